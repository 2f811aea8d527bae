"""EVAL: measure retrieval quality on a dataset of questions, without an LLM judge, beside
plain BM25 over the same generation, so the distance to that baseline is visible.

A dataset is JSON (validated with pydantic; the README's eval part documents it):

    {"name": "...", "k": 10, "evidence_k": 5,
     "cases": [{"id": "c1", "query": "...",
                "expect_paths": ["docs/a.md"],      # relevant sources (any of them)
                "expect_evidence": [                # sentences that answer (optional)
                    {"path": "docs/a.md", "text": "Retries stop after 5 attempts."},
                    {"path": "docs/b.md", "lines": [12, 14]}],
                "expect_words": [["archive", "archives"], ["extract"]],  # optional
                "expect_claims": ["clm_..."],       # relevant claims (optional)
                "forbidden_paths": ["docs/old.md"], # must never be cited
                "must_contain": ["5 attempts"],     # the answer must contain these texts
                "must_not_contain": ["7 attempts"]},
               {"id": "c2", "query": "...", "expect": "gap"}]}   # off-topic: must be a gap

Each case is run through QUERY twice (with `--limit` = min(50, 5k), so that enough distinct
sources are ranked). The ranked sources are the distinct source paths of the citations, in
citation order (evidence of role `statement`); the ranked claims are the cited claim IDs.

Metrics (means over the cases that define the expectation; off-topic cases count only in
their gap rate):
- recall@k: share of expected paths (or claims) among the first k distinct sources;
- hit@k: whether any expected path is among them (the share of cases that find a relevant
  source; it equals recall@k for a case with one expected path; ADR 0045: both readings);
- MRR@k: 1 / rank of the first expected path among them (0 when none in the first k);
- top-1: the first ranked source (or claim) is expected;
- evidence recall@e (e = `evidence_k`): share of a case's evidence units met by the first e
  citations; evidence hit@e: at least one met. A citation meets a `text` unit when it cites
  the same path and one of the two texts (whitespace collapsed, NFC) contains the other, and
  a `lines` unit when its lines overlap them;
- word precision@e: share of the first e citations whose statement holds every word group of
  `expect_words` (a group is met by any of its forms, case-folded substrings: the forms are
  the inflections a person accepts); a gap scores 0;
- gap rate off-topic: share of `"expect": "gap"` cases answered with a gap (want 1);
  gap rate answerable: share of the other cases answered with a gap (want 0);
- sources in e citations: distinct sources among the first e citations of answered cases;
- citation precision: share of cited claims whose source is expected;
- contamination: share of cases where a forbidden path is cited;
- must-contain / must-not-contain pass rates;
- repeatability: share of cases whose two runs gave identical JSON (timing aside);
- latency p50 / p95 of the in-process query calls.

The same figures (recall, hit, MRR, top-1, gap rates; evidence and word figures from its sentences)
are computed for the plain BM25 baselines of `baseline.py`: whole sources for sources,
confirmed claims for sentences. The baseline answers a gap only when no document holds any
of the question's words.
"""

from __future__ import annotations

import json
import math
import time
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import RaytError, UsageError
from ..storage.blobs import BlobStore
from ..storage.reader import Reader
from .query import MAX_LIMIT, query

if TYPE_CHECKING:
    from .baseline import Baseline
    from .meaning import Meaning


class EvidenceUnit(BaseModel):
    """One place that answers a case: a sentence's text, or a line range, of one source."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    path: str
    text: str | None = Field(default=None, min_length=1)
    lines: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> EvidenceUnit:
        if (self.text is None) == (self.lines is None):
            raise ValueError("give exactly one of text and lines")
        if self.lines is not None and not 1 <= self.lines[0] <= self.lines[1]:
            raise ValueError("lines must be [first, last], 1-based, first <= last")
        return self


class Case(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    query: str
    expect: Literal["answer", "gap"] = "answer"
    expect_paths: tuple[str, ...] = ()
    expect_evidence: tuple[EvidenceUnit, ...] = ()
    expect_words: tuple[tuple[str, ...], ...] = ()
    expect_claims: tuple[str, ...] = ()
    forbidden_paths: tuple[str, ...] = ()
    must_contain: tuple[str, ...] = ()
    must_not_contain: tuple[str, ...] = ()


class Dataset(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = "dataset"
    about: str = ""  # what the dataset is and how to run it; not read
    k: int = Field(default=10, ge=1, le=MAX_LIMIT)
    evidence_k: int = Field(default=5, ge=1, le=MAX_LIMIT)
    cases: tuple[Case, ...] = Field(min_length=1)


def load_dataset(path: Path) -> Dataset:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"no dataset file {path}", code="dataset_invalid") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}", code="dataset_invalid") from exc
    try:
        return Dataset.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise UsageError(
            f"{path} is not a raytsystem eval dataset: {problems}", code="dataset_invalid"
        ) from exc


def _ranked(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    paths: list[str] = []
    claims: list[str] = []
    for citation in body.get("citations", []):
        claims.append(citation["claim"]["id"])
        for ev in citation["evidence"]:
            if ev["role"] == "statement" and ev["source_path"] not in paths:
                paths.append(ev["source_path"])
    return paths, claims


def _without_timing(body: dict[str, Any]) -> str:
    return json.dumps(
        {k: v for k, v in body.items() if k != "timing"}, sort_keys=True, ensure_ascii=False
    )


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _collapsed(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


# A cited place, as the evidence measures see it: (path, text, first line, last line); lines
# are None for the baseline's sentences, which carry no line numbers.
Cited = tuple[str, str, int | None, int | None]


def _meets(unit: EvidenceUnit, cited: Cited) -> bool:
    path, text, first, last = cited
    if path != unit.path:
        return False
    if unit.text is not None:
        a, b = _collapsed(unit.text), _collapsed(text)
        return bool(a and b) and (a in b or b in a)
    assert unit.lines is not None
    return (
        first is not None and last is not None and first <= unit.lines[1] and unit.lines[0] <= last
    )


def _citations(body: dict[str, Any]) -> list[Cited]:
    out: list[Cited] = []
    for citation in body.get("citations", []):
        for ev in citation["evidence"]:
            if ev["role"] == "statement":
                out.append(
                    (
                        ev["source_path"],
                        citation["claim"]["statement"],
                        ev["lines"]["start"],
                        ev["lines"]["end"],
                    )
                )
                break
    return out


def _holds_words(text: str, groups: Sequence[Sequence[str]]) -> bool:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return all(
        any(unicodedata.normalize("NFKC", form).casefold() in folded for form in group)
        for group in groups
    )


def _path_figures(row: dict[str, Any], top: list[str], expected: set[str]) -> None:
    found = {p for p in top if p in expected}
    row["recall_at_k"] = len(found) / len(expected)
    row["hit_at_k"] = 1.0 if found else 0.0
    first = next((i for i, p in enumerate(top, 1) if p in expected), None)
    row["mrr_at_k"] = 1 / first if first else 0.0
    row["top1"] = 1.0 if top and top[0] in expected else 0.0


def _evidence_figures(
    row: dict[str, Any], case: Case, cited: list[Cited], *, with_lines: bool = True
) -> None:
    """Evidence and word figures of the first `evidence_k` cited places (already cut).
    Without lines (the baseline's sentences), only a case whose units are all texts is judged."""
    units = case.expect_evidence
    if units and (with_lines or all(u.text is not None for u in units)):
        met = [any(_meets(u, c) for c in cited) for u in units]
        row["evidence_recall"] = sum(met) / len(met)
        row["evidence_hit"] = 1.0 if any(met) else 0.0
    if case.expect_words:
        row["word_precision"] = (
            sum(_holds_words(c[1], case.expect_words) for c in cited) / len(cited) if cited else 0.0
        )


_FIGURES = (
    "recall_at_k",
    "hit_at_k",
    "mrr_at_k",
    "top1",
    "evidence_recall",
    "evidence_hit",
    "word_precision",
    "gap_offtopic",
    "gap_answerable",
)


def _means(rows: list[dict[str, Any]], keys: Sequence[str]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key in keys:
        values = [r[key] for r in rows if key in r]
        out[key] = round(sum(values) / len(values), 4) if values else None
    return out


def _renamed(means: dict[str, float | None]) -> dict[str, float | None]:
    """Metric names as the JSON has them (`_e`: at the dataset's `evidence_k`)."""
    names = {
        "evidence_recall": "evidence_recall_at_e",
        "evidence_hit": "evidence_hit_at_e",
        "word_precision": "word_precision_at_e",
        "gap_offtopic": "gap_rate_offtopic",
        "gap_answerable": "gap_rate_answerable",
        "sources_in_e": "sources_in_e_citations",
    }
    return {names.get(k, k): v for k, v in means.items()}


def evaluate(
    reader: Reader,
    blobs: BlobStore,
    index_dir: Path,
    dataset: Dataset,
    *,
    k: int | None = None,
    generation: str | None = None,
    meaning: Meaning | None = None,
) -> dict[str, Any]:
    from ..storage import index_file
    from ..storage.generations import target_generation
    from .baseline import build_baseline

    k = k or dataset.k
    e = dataset.evidence_k
    limit = min(MAX_LIMIT, max(5 * k, e))
    target, _ = target_generation(reader, generation, None)
    with index_file.open_index(
        index_file.index_path(index_dir, target.number, target.hash),
        target.hash,
        target.index_digest,
    ) as conn:
        baseline = build_baseline(conn, reader, blobs)
    try:
        rows, base_rows, latencies = _run_cases(
            reader, blobs, index_dir, dataset, baseline, limit, generation, k, meaning
        )
    finally:
        baseline.close()
    metrics = _metrics(rows, dataset, latencies)
    base_metrics: dict[str, Any] = _renamed(_means(base_rows, _FIGURES))
    base_metrics["sources"] = baseline.source_count
    base_metrics["sentences"] = baseline.sentence_count
    for row, base in zip(rows, base_rows, strict=True):
        row["baseline"] = base
    return {
        "schema_version": "1",
        "dataset": dataset.name,
        "k": k,
        "evidence_k": e,
        "query_limit": limit,
        "generation": target.to_json(),
        "meaning": None
        if meaning is None
        else meaning.settings() | {"vectors": meaning.vectors_for(target.hash)},
        "metrics": metrics,
        "baseline": {
            "what": "FTS5 bm25(), porter tokenizer, English stop words dropped from the "
            "question; sources: one document per source (its whole normalized text); "
            "sentences: one per confirmed claim, with its heading path",
            "metrics": base_metrics,
        },
        "cases": rows,
    }


_METRIC_KEYS: Final = (
    *_FIGURES,
    "sources_in_e",
    "claim_recall_at_k",
    "claim_top1",
    "citation_precision",
    "contamination",
    "must_contain",
    "must_not_contain",
    "repeatable",
)


def _run_cases(
    reader: Reader,
    blobs: BlobStore,
    index_dir: Path,
    dataset: Dataset,
    baseline: Baseline,
    limit: int,
    generation: str | None,
    k: int,
    meaning: Meaning | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[float]]:
    """Each case asked twice (the second run checks the answer repeats), and of the baseline:
    (raytsystem's rows, the baseline's rows, every query's latency in ms)."""
    e = dataset.evidence_k
    rows, base_rows, latencies = [], [], []
    for case in dataset.cases:
        runs = []
        for _ in range(2):
            started = time.perf_counter()
            try:
                body = query(
                    reader,
                    blobs,
                    index_dir,
                    case.query,
                    limit=limit,
                    generation=generation,
                    meaning=meaning,
                ).to_json()
            except RaytError as exc:
                body = exc.to_json()
            latencies.append((time.perf_counter() - started) * 1000)
            runs.append(body)
        rows.append(_case_row(case, runs, k, e))
        base_rows.append(
            _baseline_row(case, baseline.sources(case.query, k), baseline.sentences(case.query, e))
        )
    return rows, base_rows, latencies


def _metrics(
    rows: list[dict[str, Any]], dataset: Dataset, latencies: list[float]
) -> dict[str, Any]:
    metrics: dict[str, Any] = _renamed(_means(rows, _METRIC_KEYS))
    metrics["cases"] = len(dataset.cases)
    metrics["offtopic_cases"] = sum(c.expect == "gap" for c in dataset.cases)
    metrics["latency_ms"] = {
        "p50": round(_percentile(latencies, 0.5), 2),
        "p95": round(_percentile(latencies, 0.95), 2),
    }
    return metrics


def _case_row(case: Case, runs: list[dict[str, Any]], k: int, e: int) -> dict[str, Any]:
    body = runs[0]
    paths, claims = _ranked(body)
    top = paths[:k]
    status = body.get("status", "error")
    row: dict[str, Any] = {
        "id": case.id,
        "query": case.query,
        "status": status,
        "ranked_paths": top,
    }
    if "error" in body:
        row["error"] = body["error"]
    row["repeatable"] = 1.0 if _without_timing(runs[0]) == _without_timing(runs[1]) else 0.0
    if case.expect == "gap":
        row["gap_offtopic"] = 1.0 if status == "gap" else 0.0
        return row
    row["gap_answerable"] = 1.0 if status == "gap" else 0.0
    cited = _citations(body)[:e]
    if cited:
        row["sources_in_e"] = len({c[0] for c in cited})
    if case.expect_paths:
        expected = set(case.expect_paths)
        _path_figures(row, top, expected)
        cited_paths = [
            ev["source_path"]
            for c in body.get("citations", [])[:k]
            for ev in c["evidence"]
            if ev["role"] == "statement"
        ]
        if cited_paths:
            row["citation_precision"] = sum(p in expected for p in cited_paths) / len(cited_paths)
    _evidence_figures(row, case, cited)
    if case.expect_claims:
        expected_claims = set(case.expect_claims)
        row["claim_recall_at_k"] = len(expected_claims & set(claims[:k])) / len(expected_claims)
        row["claim_top1"] = 1.0 if claims and claims[0] in expected_claims else 0.0
    if case.forbidden_paths:
        cited_all = {ev["source_path"] for c in body.get("citations", []) for ev in c["evidence"]}
        row["contamination"] = 1.0 if cited_all & set(case.forbidden_paths) else 0.0
    answer = body.get("answer", "")
    if case.must_contain:
        row["must_contain"] = 1.0 if all(t in answer for t in case.must_contain) else 0.0
    if case.must_not_contain:
        row["must_not_contain"] = (
            1.0 if not any(t in answer for t in case.must_not_contain) else 0.0
        )
    row["repeatable"] = 1.0 if _without_timing(runs[0]) == _without_timing(runs[1]) else 0.0
    return row


def _baseline_row(case: Case, top: list[str], sentences: list[Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"ranked_paths": top}
    gap = not top
    if case.expect == "gap":
        row["gap_offtopic"] = 1.0 if gap else 0.0
        return row
    row["gap_answerable"] = 1.0 if gap else 0.0
    if case.expect_paths:
        _path_figures(row, top, set(case.expect_paths))
    cited: list[Cited] = [(h.path, h.text, None, None) for h in sentences]
    _evidence_figures(row, case, cited, with_lines=False)
    return row
