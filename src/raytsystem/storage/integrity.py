"""What `verify` reads: every row of the ledger, streamed, and each index file's own check.

The whole-ledger reads are streams (`yield_per`): a caller holds what it keeps, never a table.
Each returns the columns its check needs as a named tuple, in a fixed order where the check
walks two streams side by side (segments and evidence, by normalization ID).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Connection, func, select

from ..model.generation import ClaimState as ClaimStateObject
from ..model.generation import read_state_evidence
from .states import active
from .tables import (
    Claim,
    ClaimState,
    Evidence,
    Generation,
    Head,
    Normalization,
    Revision,
    Segment,
    Setting,
    Source,
    SourceState,
)

STREAM_ROWS = 5000  # rows fetched at a time by every stream here

R = TypeVar("R")


def _stream(conn: Connection, stmt: Any, make: Callable[[Iterable[Any]], R]) -> Iterator[R]:
    for row in conn.execution_options(yield_per=STREAM_ROWS).execute(stmt):
        yield make(row)


def _bytewise(conn: Connection, column: Any) -> Any:
    """`column` ordered by its bytes, as Python orders the same ASCII strings: SQLite's default;
    PostgreSQL's may follow the database's locale."""
    return column.collate("C") if conn.dialect.name == "postgresql" else column


def recorded_setting(conn: Connection, name: str) -> str | None:
    row = conn.execute(select(Setting.c.value).where(Setting.c.name == name)).first()
    return None if row is None else str(row[0])


def has_sources(conn: Connection) -> bool:
    return conn.execute(select(Source.c.id).limit(1)).first() is not None


class SourceRow(NamedTuple):
    id: str
    path: str


def sources(conn: Connection) -> Iterator[SourceRow]:
    return _stream(conn, select(Source.c.id, Source.c.path), SourceRow._make)


class RevisionRow(NamedTuple):
    id: str
    source_id: str
    blob: str
    size: int
    media_type: str
    path: str | None  # its source's; None when the source is missing (a dangling reference)


def revisions(conn: Connection) -> Iterator[RevisionRow]:
    return _stream(
        conn,
        select(
            Revision.c.id,
            Revision.c.source_id,
            Revision.c.blob,
            Revision.c.size,
            Revision.c.media_type,
            Source.c.path,
        ).outerjoin(Source, Source.c.id == Revision.c.source_id),
        RevisionRow._make,
    )


class NormalizationRow(NamedTuple):
    id: str
    revision_id: str
    adapter: str
    adapter_version: int
    config_hash: str
    status: str
    text_blob: str | None
    text_length: int | None
    segment_count: int


def normalizations(conn: Connection) -> Iterator[NormalizationRow]:
    return _stream(
        conn,
        select(
            Normalization.c.id,
            Normalization.c.revision_id,
            Normalization.c.adapter,
            Normalization.c.adapter_version,
            Normalization.c.config_hash,
            Normalization.c.status,
            Normalization.c.text_blob,
            Normalization.c.text_length,
            Normalization.c.segment_count,
        ),
        NormalizationRow._make,
    )


class NormalizationMeta(NamedTuple):
    """A normalization's `meta` with what re-deriving it takes: its revision's raw blob and
    its source's path (None when the revision or the source is missing)."""

    id: str
    adapter: str
    adapter_version: int
    config_hash: str
    status: str
    meta: str | None  # canonical JSON
    raw_blob: str | None
    source_id: str | None
    path: str | None


def normalization_metas(conn: Connection) -> Iterator[NormalizationMeta]:
    return _stream(
        conn,
        select(
            Normalization.c.id,
            Normalization.c.adapter,
            Normalization.c.adapter_version,
            Normalization.c.config_hash,
            Normalization.c.status,
            Normalization.c.meta,
            Revision.c.blob,
            Revision.c.source_id,
            Source.c.path,
        )
        .outerjoin(Revision, Revision.c.id == Normalization.c.revision_id)
        .outerjoin(Source, Source.c.id == Revision.c.source_id),
        NormalizationMeta._make,
    )


class SegmentRow(NamedTuple):
    normalization_id: str
    id: str
    ordinal: int
    start: int
    end: int
    sha256: str
    kind: str
    heading_path: str
    line_start: int
    line_end: int
    page: int | None
    cell: int | None


def segments_by_normalization(conn: Connection) -> Iterator[SegmentRow]:
    """Every segment, in the byte order of its normalization's ID, then by ordinal."""
    return _stream(
        conn,
        select(
            Segment.c.normalization_id,
            Segment.c.id,
            Segment.c.ordinal,
            Segment.c.start,
            Segment.c.end,
            Segment.c.sha256,
            Segment.c.kind,
            Segment.c.heading_path,
            Segment.c.line_start,
            Segment.c.line_end,
            Segment.c.page,
            Segment.c.cell,
        ).order_by(_bytewise(conn, Segment.c.normalization_id), Segment.c.ordinal),
        SegmentRow._make,
    )


class EvidenceRow(NamedTuple):
    normalization_id: str  # of the segment it points into
    id: str
    claim_id: str
    segment_id: str
    start: int
    end: int
    sha256: str
    role: str
    statement: str | None  # its claim's; None when the claim is missing (a dangling reference)


def evidence_by_normalization(conn: Connection) -> Iterator[EvidenceRow]:
    """Every evidence row that points into a segment, in the byte order of that segment's
    normalization ID (the order of `segments_by_normalization`)."""
    return _stream(
        conn,
        select(
            Segment.c.normalization_id,
            Evidence.c.id,
            Evidence.c.claim_id,
            Evidence.c.segment_id,
            Evidence.c.start,
            Evidence.c.end,
            Evidence.c.sha256,
            Evidence.c.role,
            Claim.c.statement,
        )
        .join(Segment, Segment.c.id == Evidence.c.segment_id)
        .outerjoin(Claim, Claim.c.id == Evidence.c.claim_id)
        .order_by(_bytewise(conn, Segment.c.normalization_id)),
        EvidenceRow._make,
    )


class ClaimRow(NamedTuple):
    id: str
    source_id: str
    authority: str
    statement: str
    occurrence: int


def claims(conn: Connection) -> Iterator[ClaimRow]:
    return _stream(
        conn,
        select(
            Claim.c.id, Claim.c.source_id, Claim.c.authority, Claim.c.statement, Claim.c.occurrence
        ),
        ClaimRow._make,
    )


def claim_count(conn: Connection) -> int:
    return conn.execute(select(func.count()).select_from(Claim)).scalar_one()


class RecordedClaimState(NamedTuple):
    claim_id: str
    status: str
    claim_hash: str  # as recorded
    evidence_ids: str  # canonical JSON array, as recorded
    authority: str | None  # its claim's; None when the claim is missing
    statement: str | None


def claim_states_with_claims(conn: Connection) -> Iterator[RecordedClaimState]:
    """Every claim state, with what its claim says (what its hash covers)."""
    return _stream(
        conn,
        select(
            ClaimState.c.claim_id,
            ClaimState.c.status,
            ClaimState.c.claim_hash,
            ClaimState.c.evidence_ids,
            Claim.c.authority,
            Claim.c.statement,
        ).outerjoin(Claim, Claim.c.id == ClaimState.c.claim_id),
        RecordedClaimState._make,
    )


class ChainLink(NamedTuple):
    number: int
    hash: str
    parent_hash: str | None
    manifest_digest: str


def generation_chain(conn: Connection) -> list[ChainLink]:
    """Every generation, oldest first, with what its hash is made of."""
    return list(
        _stream(
            conn,
            select(
                Generation.c.number,
                Generation.c.hash,
                Generation.c.parent_hash,
                Generation.c.manifest_digest,
            ).order_by(Generation.c.number),
            ChainLink._make,
        )
    )


class SourceStateRow(NamedTuple):
    id: int
    source_id: str
    revision_id: str
    normalization_id: str | None
    digest: str
    gen_from: int
    gen_to: int | None


def source_states(conn: Connection) -> Iterator[SourceStateRow]:
    return _stream(
        conn,
        select(
            SourceState.c.id,
            SourceState.c.source_id,
            SourceState.c.revision_id,
            SourceState.c.normalization_id,
            SourceState.c.digest,
            SourceState.c.gen_from,
            SourceState.c.gen_to,
        ),
        SourceStateRow._make,
    )


class ClaimStateSpan(NamedTuple):
    source_id: str
    gen_from: int
    gen_to: int | None


def claim_state_spans(conn: Connection) -> Iterator[ClaimStateSpan]:
    """The generations every claim state is active in, by its source."""
    return _stream(
        conn,
        select(ClaimState.c.source_id, ClaimState.c.gen_from, ClaimState.c.gen_to),
        ClaimStateSpan._make,
    )


class GenerationCounts(NamedTuple):
    """What a generation's row says it holds and changed (no hash covers these)."""

    source_count: int
    claim_count: int
    summary: str  # canonical JSON


def generation_counts(conn: Connection, number: int) -> GenerationCounts | None:
    row = conn.execute(
        select(Generation.c.source_count, Generation.c.claim_count, Generation.c.summary).where(
            Generation.c.number == number
        )
    ).first()
    return None if row is None else GenerationCounts._make(row)


class ActiveClaim(NamedTuple):
    state: ClaimStateObject
    gen_from: int


def claims_active(
    conn: Connection, number: int, source_ids: Sequence[str]
) -> dict[str, list[ActiveClaim]]:
    """The claim states of these sources active in generation `number`, each with the
    generation it opened in: source ID -> its states."""
    out: dict[str, list[ActiveClaim]] = {}
    rows = conn.execute(
        select(
            ClaimState.c.claim_id,
            ClaimState.c.source_id,
            ClaimState.c.status,
            ClaimState.c.claim_hash,
            ClaimState.c.evidence_ids,
            ClaimState.c.gen_from,
        ).where(ClaimState.c.source_id.in_(source_ids), active(ClaimState, number))
    )
    for cid, sid, status, claim_hash, evidence, gen_from in rows:
        state = ClaimStateObject(
            cid, sid, status, claim_hash, tuple(read_state_evidence(evidence) or ())
        )
        out.setdefault(sid, []).append(ActiveClaim(state, gen_from))
    return out


def claims_closed(conn: Connection, number: int, source_ids: Sequence[str]) -> dict[str, str]:
    """Claim ID -> claim hash of the states of these sources that generation `number` closed
    (found through the index on (source, end of interval): what changed, not the history)."""
    rows = conn.execute(
        select(ClaimState.c.claim_id, ClaimState.c.claim_hash).where(
            ClaimState.c.source_id.in_(source_ids), ClaimState.c.gen_to == number
        )
    )
    return {cid: claim_hash for cid, claim_hash in rows}


def source_paths(conn: Connection, source_ids: Sequence[str]) -> dict[str, str]:
    rows = conn.execute(select(Source.c.id, Source.c.path).where(Source.c.id.in_(source_ids)))
    return {sid: path for sid, path in rows}


def states_written_ahead(conn: Connection, newest: int) -> bool:
    """Whether claim states lie past generation `newest`: an ingest's that has not committed
    (`staging.py`). A scan of the claim states (no index leads with `gen_from`): ask only when
    it matters."""
    found = conn.execute(select(ClaimState.c.id).where(ClaimState.c.gen_from > newest).limit(1))
    return found.first() is not None


def head_pointer(conn: Connection) -> str | None:
    """The generation hash the head row names, whether or not that generation exists."""
    row = conn.execute(select(Head.c.generation_hash).where(Head.c.name == "current")).first()
    return None if row is None else str(row[0])


class ManualEvidence(NamedTuple):
    claim_id: str
    evidence_ids: str  # the state's list, canonical JSON, as recorded
    evidence_id: str | None  # one evidence row of the claim; None when it has none
    role: str | None
    note_meta: str | None  # the meta of the normalization its evidence's segment is in


def confirmed_manual_evidence(conn: Connection) -> Iterator[ManualEvidence]:
    """Every state in which a manual claim is confirmed, once per evidence row of its claim,
    with the meta of the note (the normalization) that evidence is in. Notes' claims are few:
    this is not streamed by the whole ledger's measure."""
    stmt = (
        select(
            ClaimState.c.claim_id,
            ClaimState.c.evidence_ids,
            Evidence.c.id,
            Evidence.c.role,
            Normalization.c.meta,
        )
        .join(Claim, Claim.c.id == ClaimState.c.claim_id)
        .outerjoin(Evidence, Evidence.c.claim_id == ClaimState.c.claim_id)
        .outerjoin(Segment, Segment.c.id == Evidence.c.segment_id)
        .outerjoin(Normalization, Normalization.c.id == Segment.c.normalization_id)
        .where(Claim.c.authority == "manual", ClaimState.c.status == "confirmed")
        .order_by(ClaimState.c.id, Evidence.c.id)
    )
    return (ManualEvidence._make(row) for row in conn.execute(stmt))
