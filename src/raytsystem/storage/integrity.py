"""What `verify` reads: every row of the ledger, streamed, and each index file's own check.

The whole-ledger reads are streams (`yield_per`): a caller holds what it keeps, never a table.
Each returns the columns its check needs as a named tuple, in a fixed order where the check
walks two streams side by side (segments and evidence, by normalization ID).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Connection, func, select, text
from sqlalchemy.exc import SQLAlchemyError

from ..errors import database_corrupt
from ..model.generation import ClaimState as ClaimStateObject
from . import index_file
from .states import active, read_state_evidence
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
# The references check looks every reference up in its parent's B-tree: with SQLite's default
# 2 MiB page cache that is more than twice as slow on a 10,000-file ledger as with this one,
# as much as ingest's ledger connection has (staging.py).
REFERENCE_CHECK_CACHE_MIB = 256

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


QUICK_CHECK_LINES = 20  # problems `ledger_structure` asks SQLite for at most


def ledger_structure(conn: Connection) -> list[str]:
    """What SQLite's own check of the ledger file finds wrong with its structure (`PRAGMA
    quick_check`: every page of every table and index B-tree is read and its format checked,
    without comparing indexes with their tables, which `integrity_check` adds at several times
    the cost); empty when it finds nothing. A page a failing disk overwrote is found here even
    when no read of the rows would touch it. PostgreSQL has no such check without an extension:
    nothing is found there."""
    if conn.dialect.name != "sqlite":
        return []
    try:
        rows = conn.exec_driver_sql(f"PRAGMA quick_check({QUICK_CHECK_LINES})").all()
    except SQLAlchemyError as exc:
        damaged = database_corrupt(exc, ledger=True)
        if damaged is None:
            raise
        return [f"SQLite cannot check it: {damaged.details['said']}"]
    lines = [line for (text,) in rows for line in str(text).splitlines()]
    if lines == ["ok"]:
        return []
    roots = _root_pages(conn)
    return [
        _PAGE.sub(lambda m: f"{m[0]} ({roots[int(m[1])]})" if int(m[1]) in roots else m[0], line)
        for line in lines
        if not line.startswith("*** in database")
    ]


_PAGE = re.compile(r"\b(?:Page|page) ([0-9]+)")


def _root_pages(conn: Connection) -> dict[int, str]:
    """Root page -> "table NAME" / "index NAME": what a damaged page that is a root belongs to
    (empty if even the schema cannot be read)."""
    try:
        rows = conn.exec_driver_sql(
            "SELECT rootpage, type, name FROM sqlite_master WHERE rootpage > 0"
        ).all()
    except SQLAlchemyError:
        return {}
    return {int(page): f"{kind} {name}" for page, kind, name in rows}


class DanglingReference(NamedTuple):
    table: str
    rowid: int
    parent: str  # the table it refers to


def dangling_references(conn: Connection) -> list[DanglingReference]:
    """Rows whose reference leads to no row (`PRAGMA foreign_key_check`). SQLite checks them on
    insert except in an ingest's batches (`Staging.batch`, which checks its rows in memory
    instead); PostgreSQL always enforces them, so there this finds none."""
    if conn.dialect.name != "sqlite":
        return []
    (cache,) = conn.exec_driver_sql("PRAGMA cache_size").one()
    conn.exec_driver_sql(f"PRAGMA cache_size=-{REFERENCE_CHECK_CACHE_MIB * 1024}")
    dangling = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
    # Not in a `finally`: after a failed or interrupted (Ctrl-C) statement SQLAlchemy refuses
    # the connection any further statement, and that refusal would hide what happened.
    conn.exec_driver_sql(f"PRAGMA cache_size={int(cache)}")
    return [DanglingReference(table, rowid, parent) for table, rowid, parent, _fk in dangling]


class StateEvidenceProblem(NamedTuple):
    rowid: int  # of the claim state
    claim_id: str
    evidence_id: str
    owner: str | None  # the claim the evidence belongs to; None: no such evidence row


# The evidence IDs of every claim state, each with the evidence row it names, where there is
# none or it is another claim's. A JSON array is no foreign key, so neither database checks
# these. A text that is no JSON array is read as an empty one (a CASE, which SQLite evaluates
# in order: json_each and json_type raise on malformed JSON). PostgreSQL casts only texts that
# are arrays of plain strings (no escape, no control character: always valid JSON): a cast
# that failed would end the transaction. `verify_rows.check_claims` reports the rest.
_STATE_EVIDENCE_SQLITE = """
    SELECT cs.id, cs.claim_id, j.value, e.claim_id
    FROM claim_states cs, json_each(
        CASE WHEN NOT json_valid(cs.evidence_ids) THEN '[]'
             WHEN json_type(cs.evidence_ids) <> 'array' THEN '[]'
             ELSE cs.evidence_ids END
    ) j
    LEFT JOIN evidence e ON e.id = j.value
    WHERE e.id IS NULL OR e.claim_id <> cs.claim_id
    ORDER BY cs.id
    LIMIT :limit"""
_STATE_EVIDENCE_POSTGRESQL = r"""
    SELECT cs.id, cs.claim_id, j.value, e.claim_id
    FROM claim_states cs
    CROSS JOIN LATERAL jsonb_array_elements_text(
        CASE WHEN cs.evidence_ids ~ '^\[\s*("[^"\\[:cntrl:]]*"\s*(,\s*"[^"\\[:cntrl:]]*"\s*)*)?\]$'
             THEN cs.evidence_ids::jsonb ELSE '[]'::jsonb END
    ) AS j(value)
    LEFT JOIN evidence e ON e.id = j.value
    WHERE e.id IS NULL OR e.claim_id <> cs.claim_id
    ORDER BY cs.id
    LIMIT :limit"""


def state_evidence_problems(conn: Connection, limit: int) -> list[StateEvidenceProblem]:
    """Claim states that list an evidence ID with no evidence row, or another claim's (at
    most `limit`). One pass over the claim states, each evidence ID looked up by its key."""
    sql = _STATE_EVIDENCE_SQLITE if conn.dialect.name == "sqlite" else _STATE_EVIDENCE_POSTGRESQL
    rows = conn.execute(text(sql), {"limit": limit})
    return [StateEvidenceProblem._make(r) for r in rows]


class IndexFileCheck(NamedTuple):
    """An index file read in one snapshot: its records, and what its own check found."""

    meta: dict[str, str]
    current_format: bool  # False: written in another index format, and not checked
    problems: list[str]  # `index_file.check_rows`'s findings
    unreadable: str | None = None  # why the file cannot be read (nothing else is then known)


def check_index_file(path: Path) -> IndexFileCheck:
    """The file's records and its rows checked against them (`index_file.check_rows`)."""
    try:
        conn = sqlite3.connect(index_file.ro_uri(path), uri=True)
        try:
            conn.execute("BEGIN")  # one snapshot of the file
            meta = index_file.read_meta(conn)
            current = meta.get("format") == index_file.FORMAT
            problems = index_file.check_rows(conn) if current else []
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return IndexFileCheck({}, False, [], f"unreadable: {exc}")
    return IndexFileCheck(meta, current, problems)
