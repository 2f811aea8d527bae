"""EVAL: measure retrieval quality on a dataset of questions, without an LLM judge.

A dataset is JSON (validated with pydantic):

    {"name": "...", "k": 10,
     "cases": [{"id": "c1", "query": "...",
                "expect_paths": ["docs/a.md"],      # relevant sources (any of them)
                "expect_claims": ["clm_..."],       # relevant claims (optional)
                "forbidden_paths": ["docs/old.md"], # must never be cited
                "must_contain": ["5 attempts"],     # the answer must contain these texts
                "must_not_contain": ["7 attempts"]}]}

Each case is run through QUERY twice (with `--limit` = min(50, 5k), so that enough distinct
sources are ranked). The ranked sources are the distinct source paths of the citations, in
citation order (evidence of role `statement`); the ranked claims are the cited claim IDs.

Metrics (means over the cases that define the expectation):
- recall@k: share of expected paths (or claims) among the first k ranked;
- MRR@k: 1 / rank of the first expected path (0 when none in the first k);
- top-1: the first ranked source (or claim) is expected;
- citation precision: share of cited claims whose source is expected;
- contamination: share of cases where a forbidden path is cited;
- must-contain / must-not-contain pass rates;
- repeatability: share of cases whose two runs gave identical JSON (timing aside);
- latency p50 / p95 of the in-process query calls.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import RaytError, UsageError
from ..storage.blobs import BlobStore
from ..storage.reader import Reader
from .query import MAX_LIMIT, query


class Case(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    query: str
    expect_paths: tuple[str, ...] = ()
    expect_claims: tuple[str, ...] = ()
    forbidden_paths: tuple[str, ...] = ()
    must_contain: tuple[str, ...] = ()
    must_not_contain: tuple[str, ...] = ()


class Dataset(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = "dataset"
    k: int = Field(default=10, ge=1, le=MAX_LIMIT)
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


def evaluate(
    reader: Reader,
    blobs: BlobStore,
    index_dir: Path,
    dataset: Dataset,
    *,
    k: int | None = None,
    generation: str | None = None,
) -> dict[str, Any]:
    k = k or dataset.k
    limit = min(MAX_LIMIT, 5 * k)
    rows = []
    latencies: list[float] = []
    sums: dict[str, list[float]] = {
        "recall_at_k": [],
        "mrr_at_k": [],
        "top1": [],
        "claim_recall_at_k": [],
        "claim_top1": [],
        "citation_precision": [],
        "contamination": [],
        "must_contain": [],
        "must_not_contain": [],
        "repeatable": [],
    }
    for case in dataset.cases:
        runs = []
        for _ in range(2):
            started = time.perf_counter()
            try:
                body = query(
                    reader, blobs, index_dir, case.query, limit=limit, generation=generation
                ).to_json()
            except RaytError as exc:
                body = exc.to_json()
            latencies.append((time.perf_counter() - started) * 1000)
            runs.append(body)
        body = runs[0]
        paths, claims = _ranked(body)
        top = paths[:k]
        row: dict[str, Any] = {
            "id": case.id,
            "query": case.query,
            "status": body.get("status", "error"),
            "ranked_paths": top,
        }
        if "error" in body:
            row["error"] = body["error"]
        if case.expect_paths:
            expected = set(case.expect_paths)
            found = [p for p in top if p in expected]
            row["recall_at_k"] = len(set(found)) / len(expected)
            first = next((i for i, p in enumerate(top, 1) if p in expected), None)
            row["mrr_at_k"] = 1 / first if first else 0.0
            row["top1"] = 1.0 if top and top[0] in expected else 0.0
            cited_paths = [
                ev["source_path"]
                for c in body.get("citations", [])[:k]
                for ev in c["evidence"]
                if ev["role"] == "statement"
            ]
            if cited_paths:
                row["citation_precision"] = sum(p in expected for p in cited_paths) / len(
                    cited_paths
                )
        if case.expect_claims:
            expected_claims = set(case.expect_claims)
            row["claim_recall_at_k"] = len(expected_claims & set(claims[:k])) / len(expected_claims)
            row["claim_top1"] = 1.0 if claims and claims[0] in expected_claims else 0.0
        if case.forbidden_paths:
            cited_all = {
                ev["source_path"] for c in body.get("citations", []) for ev in c["evidence"]
            }
            row["contamination"] = 1.0 if cited_all & set(case.forbidden_paths) else 0.0
        answer = body.get("answer", "")
        if case.must_contain:
            row["must_contain"] = 1.0 if all(t in answer for t in case.must_contain) else 0.0
        if case.must_not_contain:
            row["must_not_contain"] = (
                1.0 if not any(t in answer for t in case.must_not_contain) else 0.0
            )
        row["repeatable"] = 1.0 if _without_timing(runs[0]) == _without_timing(runs[1]) else 0.0
        for key in sums:
            if key in row:
                sums[key].append(row[key])
        rows.append(row)
    metrics: dict[str, Any] = {
        key: (round(sum(v) / len(v), 4) if v else None) for key, v in sums.items()
    }
    metrics["cases"] = len(dataset.cases)
    metrics["latency_ms"] = {
        "p50": round(_percentile(latencies, 0.5), 2),
        "p95": round(_percentile(latencies, 0.95), 2),
    }
    return {
        "schema_version": "1",
        "dataset": dataset.name,
        "k": k,
        "query_limit": limit,
        "generation": runs[0].get("generation") if dataset.cases else None,
        "metrics": metrics,
        "cases": rows,
    }
