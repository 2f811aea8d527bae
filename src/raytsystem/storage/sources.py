"""Reads of what the ledger holds of sources' content, for ingest's later steps: normalized
texts and their segments, claims' statements, notes' metadata, which source owns a claim.

Each function reads the rows it is given IDs for, a chunk of IDs per statement, so its cost
follows the sources an ingest touches, not the ledger.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from sqlalchemy import Connection, select

from .states import active, chunks
from .tables import Claim, Evidence, Normalization, Segment
from .tables import ClaimState as ClaimStateRow


class SegmentForIndex(NamedTuple):
    """What the index holds of a segment, but its text (cut from the normalized text)."""

    id: str
    sha256: str
    kind: str
    heading_path: str  # canonical JSON array
    start: int
    end: int


class StatementPlace(NamedTuple):
    """Where a claim's statement is: its segment's heading path, the segment, the span."""

    heading_path: str
    segment_id: str
    start: int
    end: int


def text_blobs(conn: Connection, normalization_ids: Iterable[str]) -> dict[str, str | None]:
    """normalization ID -> the address of its normalized text (None: it failed)."""
    out: dict[str, str | None] = {}
    for part in chunks(sorted(set(normalization_ids))):
        stmt = select(Normalization.c.id, Normalization.c.text_blob).where(
            Normalization.c.id.in_(part)
        )
        out.update((nid, blob) for nid, blob in conn.execute(stmt))
    return out


def segment_spans(conn: Connection, normalization_id: str) -> list[tuple[str, int, int]]:
    """(segment ID, start, end) of a normalization's segments, in order."""
    stmt = (
        select(Segment.c.id, Segment.c.start, Segment.c.end)
        .where(Segment.c.normalization_id == normalization_id)
        .order_by(Segment.c.ordinal)
    )
    return [(r[0], r[1], r[2]) for r in conn.execute(stmt)]


def segments_for_index(
    conn: Connection, normalization_ids: Iterable[str]
) -> dict[str, list[SegmentForIndex]]:
    """normalization ID -> its segments in order, as the index takes them."""
    out: dict[str, list[SegmentForIndex]] = {}
    for part in chunks(sorted(set(normalization_ids))):
        stmt = (
            select(
                Segment.c.normalization_id,
                Segment.c.id,
                Segment.c.sha256,
                Segment.c.kind,
                Segment.c.heading_path,
                Segment.c.start,
                Segment.c.end,
            )
            .where(Segment.c.normalization_id.in_(part))
            .order_by(Segment.c.normalization_id, Segment.c.ordinal)
        )
        for r in conn.execute(stmt):
            out.setdefault(r[0], []).append(SegmentForIndex(r[1], r[2], r[3], r[4], r[5], r[6]))
    return out


def claim_texts(conn: Connection, claim_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
    """claim ID -> (statement, authority)."""
    out: dict[str, tuple[str, str]] = {}
    for part in chunks(sorted(set(claim_ids))):
        stmt = select(Claim.c.id, Claim.c.statement, Claim.c.authority).where(Claim.c.id.in_(part))
        out.update(
            (cid, (statement, authority)) for cid, statement, authority in conn.execute(stmt)
        )
    return out


def statement_places(conn: Connection, evidence_ids: Iterable[str]) -> dict[str, StatementPlace]:
    """claim ID -> where its statement is, for the statement evidence among `evidence_ids`."""
    out: dict[str, StatementPlace] = {}
    for part in chunks(sorted(set(evidence_ids))):
        stmt = (
            select(
                Evidence.c.claim_id,
                Segment.c.heading_path,
                Evidence.c.segment_id,
                Evidence.c.start,
                Evidence.c.end,
            )
            .join(Segment, Segment.c.id == Evidence.c.segment_id)
            .where(Evidence.c.id.in_(part), Evidence.c.role == "statement")
        )
        out.update((r[0], StatementPlace(r[1], r[2], r[3], r[4])) for r in conn.execute(stmt))
    return out


def normalization_metas(
    conn: Connection, normalization_ids: Iterable[str]
) -> dict[str, str | None]:
    """normalization ID -> its `meta` (canonical JSON; a note's parsed front matter, claims
    and citations), or None."""
    out: dict[str, str | None] = {}
    for part in chunks(sorted(set(normalization_ids))):
        stmt = select(Normalization.c.id, Normalization.c.meta).where(Normalization.c.id.in_(part))
        out.update((nid, meta) for nid, meta in conn.execute(stmt))
    return out


def claim_owners(conn: Connection, number: int, claim_ids: Iterable[str]) -> dict[str, str]:
    """claim ID -> the source it is active with in generation `number` (claims not active
    then are left out)."""
    out: dict[str, str] = {}
    row = ClaimStateRow
    for part in chunks(sorted(set(claim_ids))):
        stmt = (
            select(row.c.claim_id, row.c.source_id)
            .join(Claim, (Claim.c.source_id == row.c.source_id) & (Claim.c.id == row.c.claim_id))
            .where(Claim.c.id.in_(part), active(row, number))
        )
        out.update((cid, sid) for cid, sid in conn.execute(stmt))
    return out
