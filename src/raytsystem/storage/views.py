"""Read-only views of the ledger for people and agents: one object by its ID (`show`), a source's
history, the ledger's counts (`status`), the claims active in a generation (`diff`, `review`,
the evidence graph) and the evidence and segments those claims point to.

An object read whole is a record: a named tuple of all its table's columns in the table's
order (JSON columns as their text), so `show` prints every column there is
(tests/test_storage_views.py keeps the two in step).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Connection, Table, func, select

from . import states
from .tables import (
    Claim,
    ClaimState,
    Evidence,
    IngestRun,
    Normalization,
    Revision,
    Segment,
    Source,
    SourceState,
)

T = TypeVar("T")


class SourceRecord(NamedTuple):
    id: str
    path: str
    first_seen_at: str


class RevisionRecord(NamedTuple):
    id: str
    source_id: str
    blob: str
    size: int
    media_type: str
    first_seen_at: str


class NormalizationRecord(NamedTuple):
    id: str
    revision_id: str
    adapter: str
    adapter_version: int
    config_hash: str
    status: str
    text_blob: str | None
    text_length: int | None
    segment_count: int
    finding_code: str | None
    finding_message: str | None
    meta: str | None  # canonical JSON
    created_at: str


class SegmentRecord(NamedTuple):
    id: str
    normalization_id: str
    ordinal: int
    kind: str
    heading_path: str  # canonical JSON array of strings
    start: int
    end: int
    line_start: int
    line_end: int
    sha256: str
    page: int | None
    cell: int | None


class ClaimRecord(NamedTuple):
    id: str
    source_id: str
    authority: str
    statement: str
    occurrence: int


class EvidenceRecord(NamedTuple):
    id: str
    claim_id: str
    segment_id: str
    start: int
    end: int
    sha256: str
    role: str


class ClaimStateRecord(NamedTuple):
    id: int
    claim_id: str
    source_id: str
    status: str
    claim_hash: str
    evidence_ids: str  # canonical JSON array
    gen_from: int
    gen_to: int | None


class IngestRunRecord(NamedTuple):
    id: int
    started_at: str
    finished_at: str
    generation_hash: str | None
    summary: str  # JSON


# Each record type and the table it is a row of.
RECORD_TABLES: dict[type[Any], Table] = {
    SourceRecord: Source,
    RevisionRecord: Revision,
    NormalizationRecord: Normalization,
    SegmentRecord: Segment,
    ClaimRecord: Claim,
    EvidenceRecord: Evidence,
    ClaimStateRecord: ClaimState,
    IngestRunRecord: IngestRun,
}


def _columns(table: Table, fields: Sequence[str]) -> Any:
    return select(*(table.c[name] for name in fields))


def _by_id(
    conn: Connection,
    table: Table,
    fields: Sequence[str],
    make: Callable[[Iterable[Any]], T],
    object_id: str,
) -> T | None:
    row = conn.execute(_columns(table, fields).where(table.c.id == object_id)).first()
    return None if row is None else make(row)


def source(conn: Connection, source_id: str) -> SourceRecord | None:
    return _by_id(conn, Source, SourceRecord._fields, SourceRecord._make, source_id)


def source_at(conn: Connection, path: str) -> SourceRecord | None:
    """The source of a workspace-relative path, if the ledger has ever seen it."""
    row = conn.execute(_columns(Source, SourceRecord._fields).where(Source.c.path == path)).first()
    return None if row is None else SourceRecord._make(row)


def revision(conn: Connection, revision_id: str) -> RevisionRecord | None:
    return _by_id(conn, Revision, RevisionRecord._fields, RevisionRecord._make, revision_id)


def normalization(conn: Connection, normalization_id: str) -> NormalizationRecord | None:
    return _by_id(
        conn,
        Normalization,
        NormalizationRecord._fields,
        NormalizationRecord._make,
        normalization_id,
    )


def segment(conn: Connection, segment_id: str) -> SegmentRecord | None:
    return _by_id(conn, Segment, SegmentRecord._fields, SegmentRecord._make, segment_id)


def claim(conn: Connection, claim_id: str) -> ClaimRecord | None:
    return _by_id(conn, Claim, ClaimRecord._fields, ClaimRecord._make, claim_id)


def evidence(conn: Connection, evidence_id: str) -> EvidenceRecord | None:
    return _by_id(conn, Evidence, EvidenceRecord._fields, EvidenceRecord._make, evidence_id)


def revisions_of(conn: Connection, source_id: str) -> list[RevisionRecord]:
    """A source's revisions in the order they were first seen."""
    rows = conn.execute(
        _columns(Revision, RevisionRecord._fields)
        .where(Revision.c.source_id == source_id)
        .order_by(Revision.c.first_seen_at, Revision.c.id)
    )
    return [RevisionRecord._make(r) for r in rows]


def normalizations_of(conn: Connection, revision_id: str) -> list[NormalizationRecord]:
    rows = conn.execute(
        _columns(Normalization, NormalizationRecord._fields).where(
            Normalization.c.revision_id == revision_id
        )
    )
    return [NormalizationRecord._make(r) for r in rows]


class Interval(NamedTuple):
    """Generations `[gen_from, gen_to)`; `gen_to` None while open."""

    gen_from: int
    gen_to: int | None


def revision_intervals(conn: Connection, revision_id: str) -> list[Interval]:
    """The intervals of the source states that held a revision, in order."""
    rows = conn.execute(
        select(SourceState.c.gen_from, SourceState.c.gen_to)
        .where(SourceState.c.revision_id == revision_id)
        .order_by(SourceState.c.gen_from)
    )
    return [Interval._make(r) for r in rows]


def active_revision(conn: Connection, source_id: str, number: int) -> str | None:
    """The revision of a source active in generation `number`, if the source is active."""
    row = conn.execute(
        select(SourceState.c.revision_id).where(
            SourceState.c.source_id == source_id, states.active(SourceState, number)
        )
    ).first()
    return None if row is None else str(row[0])


def claim_states_of(
    conn: Connection, source_id: str, claim_id: str, up_to: int
) -> list[ClaimStateRecord]:
    """The states of a claim opened in generations up to `up_to`, oldest first."""
    rows = conn.execute(
        _columns(ClaimState, ClaimStateRecord._fields)
        .where(
            ClaimState.c.source_id == source_id,
            ClaimState.c.claim_id == claim_id,
            ClaimState.c.gen_from <= up_to,
        )
        .order_by(ClaimState.c.gen_from, ClaimState.c.id)
    )
    return [ClaimStateRecord._make(r) for r in rows]


class LedgerCounts(NamedTuple):
    sources: int
    revisions: int
    normalizations: int
    claims: int


def ledger_counts(conn: Connection) -> LedgerCounts:
    def count(table: Table) -> int:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()

    return LedgerCounts(count(Source), count(Revision), count(Normalization), count(Claim))


def last_ingest(conn: Connection) -> IngestRunRecord | None:
    row = conn.execute(
        _columns(IngestRun, IngestRunRecord._fields).order_by(IngestRun.c.id.desc()).limit(1)
    ).first()
    return None if row is None else IngestRunRecord._make(row)


class ActiveClaim(NamedTuple):
    """A claim active in a generation, with its state there."""

    claim_id: str
    source_id: str
    path: str | None  # its source's; None when the source row is missing (verify reports it)
    authority: str
    statement: str
    status: str
    claim_hash: str
    evidence_ids: tuple[str, ...]


def active_claims(conn: Connection, number: int) -> list[ActiveClaim]:
    """The claims active in generation `number`, by claim ID."""
    rows = conn.execute(
        select(
            ClaimState.c.claim_id,
            ClaimState.c.source_id,
            Source.c.path,
            Claim.c.authority,
            Claim.c.statement,
            ClaimState.c.status,
            ClaimState.c.claim_hash,
            ClaimState.c.evidence_ids,
        )
        .join(Claim, Claim.c.id == ClaimState.c.claim_id)
        .outerjoin(Source, Source.c.id == ClaimState.c.source_id)
        .where(states.active(ClaimState, number))
        .order_by(ClaimState.c.claim_id)
    )
    return [ActiveClaim(*r[:7], tuple(json.loads(r[7]))) for r in rows]


class ClaimMark(NamedTuple):
    """What tells a claim's state in a generation from another: its hash, and its status."""

    claim_hash: str
    status: str


def claim_marks(conn: Connection, number: int) -> dict[str, ClaimMark]:
    """The claims active in generation `number`: claim ID -> its hash and status there."""
    rows = conn.execute(
        select(ClaimState.c.claim_id, ClaimState.c.claim_hash, ClaimState.c.status).where(
            states.active(ClaimState, number)
        )
    )
    return {cid: ClaimMark(h, st) for cid, h, st in rows}


class ClaimSummary(NamedTuple):
    id: str
    statement: str
    authority: str
    source_path: str


def claim_summaries(conn: Connection, claim_ids: Sequence[str]) -> dict[str, ClaimSummary]:
    """Claims by ID, with their source's path (claims of a missing source are left out)."""
    out = {}
    for part in states.chunks(claim_ids):
        for row in conn.execute(
            select(Claim.c.id, Claim.c.statement, Claim.c.authority, Source.c.path)
            .join(Source, Source.c.id == Claim.c.source_id)
            .where(Claim.c.id.in_(part))
        ):
            out[row[0]] = ClaimSummary._make(row)
    return out


class EvidenceLink(NamedTuple):
    role: str  # "statement" | "citation"
    segment_id: str


def evidence_links(conn: Connection, evidence_ids: Iterable[str]) -> dict[str, EvidenceLink]:
    """Evidence by ID: its role and the segment it points into."""
    out = {}
    for part in states.chunks(sorted(set(evidence_ids))):
        for eid, role, seg in conn.execute(
            select(Evidence.c.id, Evidence.c.role, Evidence.c.segment_id).where(
                Evidence.c.id.in_(part)
            )
        ):
            out[eid] = EvidenceLink(role, seg)
    return out


class SegmentPlace(NamedTuple):
    kind: str
    heading_path: tuple[str, ...]
    revision_id: str  # of the normalization it is a segment of


def segment_places(conn: Connection, segment_ids: Sequence[str]) -> dict[str, SegmentPlace]:
    """Segments by ID: their kind, heading path and revision."""
    out = {}
    for part in states.chunks(segment_ids):
        for seg_id, kind, heading, revision_id in conn.execute(
            select(
                Segment.c.id, Segment.c.kind, Segment.c.heading_path, Normalization.c.revision_id
            )
            .join(Normalization, Normalization.c.id == Segment.c.normalization_id)
            .where(Segment.c.id.in_(part))
        ):
            out[seg_id] = SegmentPlace(kind, tuple(json.loads(heading)), revision_id)
    return out
