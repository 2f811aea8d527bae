"""QUERY: an answer made only of verified, confirmed claims of one generation, or nothing.

1. The question becomes a bounded list of literal terms (the same analysis as indexing); FTS5
   syntax, quotes, `NEAR`, `*` or SQL in the question are just characters, and terms are
   letters and digits only, quoted into the MATCH expression.
2. The generation's index is searched for the claims that may answer and their order
   (`ranking`: sources that hold enough of the question, claims that say something about it,
   ranked deterministically). None: the answer is a gap.
3. The chosen claims are checked down to the raw bytes (`chain.Checker`). Any mismatch fails
   the whole query closed: no answer, a stable code, exit status 3.
4. The answer is the statements joined with citation markers; every citation carries the span of
   its statement in the answer, in code points and in UTF-16 units.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..errors import IntegrityError, NotFound, UsageError
from ..model import index as index_file
from ..model.terms import query_terms, terms
from ..storage.blobs import BlobStore
from ..storage.sql import Reader
from .chain import Checker, ClaimView
from .ranking import Candidate, choose

SCHEMA_VERSION: Final = "1"
MAX_QUERY_CHARS: Final = 2000
MAX_TERMS: Final = 32
DEFAULT_LIMIT: Final = 5
MAX_LIMIT: Final = 50


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
    distinct = list(dict.fromkeys(query_terms(text)))
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
        chosen = choose(conn, query_terms, limit)
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
