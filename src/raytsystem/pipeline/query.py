"""QUERY: an answer made only of verified, confirmed claims of one generation, or nothing.

1. The question becomes a bounded list of literal terms (the same analysis as indexing); FTS5
   syntax, quotes, `NEAR`, `*` or SQL in the question are just characters, and terms are
   letters and digits only, quoted into the MATCH expression.
2. The generation's index is searched. A claim can answer only if its source (all its text,
   headings and path) contains enough of the question's IDF weight (`required_coverage`: all
   of a one-term question, less of a longer one); otherwise the answer is a gap. Candidates are
   scored by the BM25 of their source plus the BM25 of the claim itself (statement, heading
   path, file path), each normalized by the best of its kind, and ranked deterministically:
   authority (manual above extracted), then score, then claim ID. Near-duplicates (same terms)
   are dropped.
3. The chosen claims are checked down to the raw bytes (`chain.Checker`). Any mismatch fails
   the whole query closed: no answer, a stable code, exit status 3.
4. The answer is the statements joined with citation markers; every citation carries the span of
   its statement in the answer, in code points and in UTF-16 units.
"""

from __future__ import annotations

import math
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..errors import IntegrityError, NotFound, UsageError
from ..model import index as index_file
from ..model.terms import terms
from ..storage.blobs import BlobStore
from ..storage.sql import Reader
from .chain import Checker, ClaimView

SCHEMA_VERSION: Final = "1"
MAX_QUERY_CHARS: Final = 2000
MAX_TERMS: Final = 32
DEFAULT_LIMIT: Final = 5
MAX_LIMIT: Final = 50
CANDIDATES: Final = 300
SOURCE_CANDIDATES: Final = 200
PULL_SOURCES: Final = 20
# A term in more than this share of the sources is not searched for when rarer ones are there
# (0.2 lost 1.3 points of SciFact recall@10, 0.35 lost 0.2 and saves a third of the latency).
COMMON_SHARE: Final = 0.35
# How much the claim's source counts against the claim itself (measured: ADR 0012).
SOURCE_WEIGHT: Final = 1.0
# BM25 column weights: statement, heading path, source path.
WEIGHTS: Final = (1.0, 0.4, 0.2)
AUTHORITY_RANK: Final = {"manual": 0, "extracted": 1}


@dataclass(frozen=True)
class Gen:
    number: int
    hash: str

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "hash": self.hash}


def parse_query(text: str) -> list[str]:
    """The distinct terms of a question, in order; raise on an unusable question."""
    if len(text) > MAX_QUERY_CHARS:
        raise UsageError(
            f"the question is {len(text)} characters long; the limit is {MAX_QUERY_CHARS}",
            code="query_too_long",
        )
    distinct = list(dict.fromkeys(terms(text, drop_stopwords=True)))
    if not distinct:
        # Only stop words ("the", "how is it"): nothing to look for, and matching them would
        # touch nearly every claim of a large knowledge base.
        reason = "only stop words" if terms(text) else "no searchable words"
        raise UsageError(f"the question has {reason}", code="query_empty")
    if len(distinct) > MAX_TERMS:
        raise UsageError(
            f"the question has {len(distinct)} distinct terms; the limit is {MAX_TERMS}",
            code="query_too_many_terms",
        )
    return distinct


def match_expression(query_terms: list[str]) -> str:
    # Terms are [^\W_]+ runs (see terms.py), so quoting cannot be escaped; doubling quotes anyway
    # keeps this safe even if that ever changes.
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in query_terms)


def head(reader: Reader) -> Gen | None:
    rows = reader.rows(
        "SELECT g.number, g.hash FROM head h JOIN generations g ON g.hash = h.generation_hash "
        "WHERE h.name = 'current'"
    )
    return Gen(rows[0][0], rows[0][1]) if rows else None


def resolve_generation(reader: Reader, ref: str) -> Gen:
    ref = ref.strip().lower()
    if ref.isdigit():
        rows = reader.rows(
            "SELECT number, hash FROM generations WHERE number = :n", {"n": int(ref)}
        )
    elif len(ref) >= 8 and all(c in "0123456789abcdef" for c in ref):
        rows = reader.rows(
            "SELECT number, hash FROM generations WHERE hash >= :lo AND hash <= :hi ORDER BY number",
            {"lo": ref, "hi": ref + "g"},
        )
        if len(rows) > 1:
            raise UsageError(f"generation prefix {ref} is ambiguous", code="ambiguous_generation")
    else:
        raise UsageError(
            f"not a generation: {ref!r} (give a number or 8+ hex digits of its hash)",
            code="invalid_generation",
        )
    if not rows:
        raise NotFound(f"no generation {ref}", code="generation_not_found")
    return Gen(rows[0][0], rows[0][1])


def target_generation(
    reader: Reader, generation: str | None, expect: str | None
) -> tuple[Gen, Gen]:
    """(the generation to answer from, the current one), enforcing --expect-generation."""
    current = head(reader)
    if current is None:
        raise NotFound(
            "the knowledge base has no generation yet: run `raytsystem ingest`",
            code="no_generation",
        )
    if expect is not None:
        wanted = expect.strip().lower()
        if len(wanted) < 8 or not current.hash.startswith(wanted):
            raise IntegrityError(
                f"expected generation {wanted}, but the current generation is "
                f"{current.number} {current.hash}",
                code="generation_stale",
                expected=wanted,
                current=current.hash,
            )
    return (resolve_generation(reader, generation) if generation else current), current


@dataclass
class Candidate:
    claim_id: str
    object_hash: str
    source_id: str
    source_path: str
    authority: str
    text: str
    score: float
    dedupe_key: str


def required_coverage(n_terms: int) -> float:
    """The share of the question's IDF weight a source must contain to answer it at all.

    All of a one-term question; less of a longer one, whose extra words are often incidental:
    1/n + 5% (2 terms: 55%, so the rarer one; 3 terms: 38%; 5 terms: 25%; 10 terms: 15%).
    Measured on SciFact (ops/decisions/0012), this keeps recall while a question about
    something the knowledge base does not hold still gets a gap.
    """
    return min(1.0, 1.0 / n_terms + 0.05)


def _document_frequency(conn: sqlite3.Connection, terms_: list[str]) -> tuple[dict[str, int], int]:
    """How many sources contain each term, and how many sources there are."""
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.source_vocab "
        "USING fts5vocab(main, 'sources_fts', 'row')"
    )
    placeholders = ", ".join("?" for _ in terms_)
    df = dict(
        conn.execute(
            f"SELECT term, doc FROM temp.source_vocab WHERE term IN ({placeholders})", terms_
        ).fetchall()
    )
    recorded = dict(conn.execute("SELECT key, value FROM meta WHERE key = 'source_count'"))
    total = int(
        recorded.get("source_count")
        or conn.execute("SELECT count(*) FROM sources_fts").fetchone()[0]
    )
    return {t: df.get(t, 0) for t in terms_}, total


def _idf(df: dict[str, int], total: int) -> dict[str, float]:
    """BM25-style IDF of each term over sources.

    A term no source contains counts as if one did: rare, but not infinitely heavy, so one
    unknown word in a long question does not drown the words the knowledge base does know.
    """
    freq = {t: max(1, n) for t, n in df.items()}
    return {t: math.log(1 + (total - freq[t] + 0.5) / (freq[t] + 0.5)) for t in freq}


def candidates(conn: sqlite3.Connection, query_terms: list[str]) -> list[Candidate]:
    """Confirmed claims whose source covers enough of the question, scored by source and claim.

    A claim must itself (statement, heading path, file path) contain two of the question's
    terms (the one term of a one-term question), and its source `required_coverage` of the
    question's IDF weight.

    score = BM25 of the claim's source (all its text) + BM25 of the claim itself (statement,
    heading path, file path), each divided by the best of its kind for this question.
    """
    df, total = _document_frequency(conn, query_terms)
    idf = _idf(df, total)
    weight = sum(idf.values()) or 1.0
    # Words in most sources ("use", "file") weigh almost nothing in BM25 but make FTS5 score
    # a large part of the index: they are not searched for when rarer words are there (they
    # still count toward coverage).
    rare = [t for t in query_terms if df[t] <= COMMON_SHARE * total]
    expression = match_expression(rare or query_terms)
    need = required_coverage(len(query_terms))
    wanted = set(query_terms)
    sources: dict[str, float] = {}
    for source_id, t, h, p, score in conn.execute(
        "SELECT d.source_id, f.terms, f.heading, f.path, bm25(sources_fts, ?, ?, ?) AS score "
        "FROM sources_fts f JOIN docs d ON d.rowid = f.rowid "
        "WHERE sources_fts MATCH ? ORDER BY score, d.source_id LIMIT ?",
        (*WEIGHTS, expression, SOURCE_CANDIDATES),
    ):
        present = wanted.intersection({*t.split(), *h.split(), *p.split()})
        if sum(idf[x] for x in present) / weight >= need:
            sources[source_id] = -score
    if not sources:
        return []
    rows = conn.execute(
        "SELECT d.object_id, d.object_hash, d.source_id, d.source_path, d.authority, d.text, f.terms, "
        "f.heading, f.path, bm25(claims_fts, ?, ?, ?) AS score "
        "FROM claims_fts f JOIN docs d ON d.rowid = f.rowid "
        "WHERE claims_fts MATCH ? ORDER BY score, d.object_id LIMIT ?",
        (*WEIGHTS, expression, CANDIDATES),
    ).fetchall()
    found = {r[2] for r in rows}
    # Sources that match well but none of whose claims made the list: bring their best claims.
    missing = [
        sid
        for sid, _ in sorted(sources.items(), key=lambda x: (-x[1], x[0]))[:PULL_SOURCES]
        if sid not in found
    ]
    for sid in missing:
        # A source's rows are written together, so they span one rowid range, which FTS5
        # searches without scoring the rest of the index.
        low, high = conn.execute(
            "SELECT min(rowid), max(rowid) FROM docs WHERE source_id = ?", (sid,)
        ).fetchone()
        rows += conn.execute(
            "SELECT d.object_id, d.object_hash, d.source_id, d.source_path, d.authority, d.text, "
            "f.terms, f.heading, f.path, bm25(claims_fts, ?, ?, ?) AS score "
            "FROM claims_fts f JOIN docs d ON d.rowid = f.rowid "
            "WHERE claims_fts MATCH ? AND f.rowid BETWEEN ? AND ? AND d.source_id = ? "
            "ORDER BY score, d.object_id LIMIT 3",
            (*WEIGHTS, expression, low, high, sid),
        ).fetchall()
    best_source = max(sources.values()) or 1.0
    best_claim = max((-r[9] for r in rows), default=1.0) or 1.0
    out = []
    own_need = min(len(query_terms), 2)
    for object_id, object_hash, source_id, path, authority, text, t, h, p, score in rows:
        if source_id not in sources:
            continue
        if len(wanted.intersection({*t.split(), *h.split(), *p.split()})) < own_need:
            continue  # the claim itself must say something about the question
        relevance = SOURCE_WEIGHT * sources[source_id] / best_source + (-score) / best_claim
        out.append(
            Candidate(object_id, object_hash, source_id, path, authority, text, relevance, t)
        )
    return out


def rank(found: list[Candidate], limit: int) -> list[Candidate]:
    """Manual claims first, then by relevance, then by ID; one of each set of near-duplicates."""
    found.sort(key=lambda c: (AUTHORITY_RANK.get(c.authority, 9), -round(c.score, 9), c.claim_id))
    chosen: list[Candidate] = []
    seen: set[str] = set()
    for c in found:
        if c.dedupe_key in seen or c.claim_id in {x.claim_id for x in chosen}:
            continue
        seen.add(c.dedupe_key)
        chosen.append(c)
        if len(chosen) == limit:
            break
    return chosen


def utf16_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-16-le")) // 2


def compose(views: list[ClaimView]) -> tuple[str, list[dict[str, Any]]]:
    parts: list[str] = []
    citations = []
    length = 0
    for n, view in enumerate(views, start=1):
        if parts:
            parts.append(" ")
            length += 1
        start = length
        parts.append(view.statement)
        length += len(view.statement)
        end = length
        marker = f" [{n}]"
        parts.append(marker)
        length += len(marker)
        citations.append((n, start, end, view))
    answer = "".join(parts)
    out = []
    for n, start, end, view in citations:
        out.append(
            {
                "id": n,
                "answer_span": {"start": start, "end": end},
                "answer_span_utf16": {
                    "start": utf16_offset(answer, start),
                    "end": utf16_offset(answer, end),
                },
                "claim": {
                    "id": view.id,
                    "hash": view.hash,
                    "status": view.status,
                    "authority": view.authority,
                    "statement": view.statement,
                },
                "evidence": [
                    {
                        "role": e.role,
                        "source_path": e.source_path,
                        "source_id": e.source_id,
                        "revision_id": e.revision_id,
                        "raw_blake3": e.raw_blake3,
                        "normalization_id": e.normalization_id,
                        "adapter": e.adapter,
                        "segment_id": e.segment_id,
                        "heading_path": e.heading_path,
                        "span": {"start": e.start, "end": e.end},
                        "lines": {"start": e.line_start, "end": e.line_end},
                        "cited_excerpt": e.excerpt,
                        "cited_excerpt_sha256": e.sha256,
                    }
                    for e in view.evidence
                ],
            }
        )
    return answer, out


def verify_chosen(checker: Checker, chosen: list[Candidate], number: int) -> dict[str, ClaimView]:
    """The chains of the chosen claims, checked down to the raw bytes; any mismatch fails closed.

    Also checks that each index row still says what the ledger says (hash and statement) and
    that the claim is confirmed: only confirmed claims may answer or enter a bundle.
    """
    views, problems = checker.claims([c.claim_id for c in chosen], number)
    if problems:
        p = problems[0]
        raise IntegrityError(f"fail closed: {p.message}", code=p.code, subject=p.subject)
    for c in chosen:
        view = views[c.claim_id]
        if c.object_hash != view.hash or c.text != view.statement:
            raise IntegrityError(
                f"fail closed: the index row of claim {c.claim_id} does not match the ledger",
                code="index_row_mismatch",
                subject=c.claim_id,
            )
        if view.status != "confirmed":
            raise IntegrityError(
                f"fail closed: claim {c.claim_id} is {view.status}, not confirmed",
                code="index_row_mismatch",
                subject=c.claim_id,
            )
    return views


def query(
    reader: Reader,
    blobs: BlobStore,
    index_dir: Path,
    text: str,
    *,
    limit: int = DEFAULT_LIMIT,
    generation: str | None = None,
    expect_generation: str | None = None,
) -> dict[str, Any]:
    from .. import faults

    started = time.perf_counter()
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"--limit must be between 1 and {MAX_LIMIT}", code="invalid_limit")
    query_terms = parse_query(text)
    target, current = target_generation(reader, generation, expect_generation)
    path = index_file.index_path(index_dir, target.number, target.hash)
    with index_file.open_index(path, target.hash) as conn:
        chosen = rank(candidates(conn, query_terms), limit)
    faults.point("query.after_search")

    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "status": "gap",
        "query": text,
        "query_terms": query_terms,
        "generation": target.to_json(),
        "answer": "",
        "citations": [],
    }
    if chosen:
        views = verify_chosen(Checker(reader, blobs), chosen, target.number)
        answer, citations = compose([views[c.claim_id] for c in chosen])
        result.update(status="answered", answer=answer, citations=citations)
    if generation is None:
        reader.refresh()
        after = head(reader)
        if after != current:
            raise IntegrityError(
                "fail closed: the current generation moved while the query ran",
                code="generation_moved",
            )
    result["timing"] = {"ms": round((time.perf_counter() - started) * 1000, 3)}
    return result
