"""Reviews: the Review record, and what a review's audit reads beyond the active claims
(`views.active_claims`): the spans of statement and citation evidence, a claim's citations in
earlier generations, the active sources that could not be normalized.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import NamedTuple

from sqlalchemy import Connection, insert, select

from . import states
from .tables import Claim, ClaimState, Evidence, Normalization, Review, Source, SourceState


class StoredReview(NamedTuple):
    generation_hash: str
    created_at: str
    report: str  # canonical JSON of the report


def stored_review(conn: Connection, review_id: str) -> StoredReview | None:
    row = conn.execute(
        select(Review.c.generation_hash, Review.c.created_at, Review.c.report).where(
            Review.c.id == review_id
        )
    ).first()
    return None if row is None else StoredReview._make(row)


def record_review(
    conn: Connection, review_id: str, generation_hash: str, created_at: str, report: str
) -> bool:
    """Record a review unless one with this ID (the same findings of the same generation) is
    recorded already; True when this one was written."""
    if conn.execute(select(Review.c.id).where(Review.c.id == review_id)).first() is not None:
        return False
    conn.execute(
        insert(Review),
        {
            "id": review_id,
            "generation_hash": generation_hash,
            "created_at": created_at,
            "report": report,
        },
    )
    return True


def cited_before(conn: Connection, claim_id: str, number: int) -> bool:
    """Whether a state of the claim in a generation before `number` had citation evidence."""
    rows = conn.execute(
        select(ClaimState.c.evidence_ids)
        .join(Claim, Claim.c.source_id == ClaimState.c.source_id)
        .where(
            Claim.c.id == claim_id,
            ClaimState.c.claim_id == claim_id,
            ClaimState.c.gen_from < number,
        )
    ).all()
    ids = {e for (ev,) in rows for e in json.loads(ev)}
    if not ids:
        return False
    return (
        conn.execute(
            select(Evidence.c.id)
            .where(Evidence.c.id.in_(sorted(ids)), Evidence.c.role == "citation")
            .limit(1)
        ).first()
        is not None
    )


class Span(NamedTuple):
    """Characters `[start, end)` of a segment's normalized text."""

    segment_id: str
    start: int
    end: int


def statement_spans(conn: Connection, evidence_ids: Iterable[str]) -> dict[str, Span]:
    """The spans of the statement evidence among `evidence_ids`, by evidence ID."""
    out = {}
    for part in states.chunks(sorted(set(evidence_ids))):
        for eid, seg, start, end in conn.execute(
            select(Evidence.c.id, Evidence.c.segment_id, Evidence.c.start, Evidence.c.end).where(
                Evidence.c.id.in_(part), Evidence.c.role == "statement"
            )
        ):
            out[eid] = Span(seg, start, end)
    return out


class CitedSpan(NamedTuple):
    """What a claim cites: a span of a segment."""

    claim_id: str
    segment_id: str
    start: int
    end: int


def cited_spans(conn: Connection, evidence_ids: Iterable[str]) -> list[CitedSpan]:
    """The citation evidence among `evidence_ids`, in order."""
    out = []
    for part in states.chunks(sorted(set(evidence_ids))):
        for row in conn.execute(
            select(
                Evidence.c.claim_id, Evidence.c.segment_id, Evidence.c.start, Evidence.c.end
            ).where(Evidence.c.id.in_(part), Evidence.c.role == "citation")
        ):
            out.append(CitedSpan._make(row))
    return sorted(out)


class FailedNormalization(NamedTuple):
    path: str
    normalization_id: str
    message: str | None


def failed_normalizations(conn: Connection, number: int) -> list[FailedNormalization]:
    """The active sources of generation `number` whose normalization failed."""
    rows = conn.execute(
        select(Source.c.path, Normalization.c.id, Normalization.c.finding_message)
        .join(SourceState, SourceState.c.normalization_id == Normalization.c.id)
        .join(Source, Source.c.id == SourceState.c.source_id)
        .where(states.active(SourceState, number), Normalization.c.status == "failed")
    )
    return [FailedNormalization._make(r) for r in rows]
