"""Reads of the evidence chain by ID, for the query path (query, search, bundle).

Plain SQL through a `Reader` (no SQLAlchemy import on the query path): each function loads
the rows it names by primary key, at a cost that follows the IDs asked for, never the
ledger. The rows come back as they are stored; checking them (re-deriving IDs, re-hashing
bytes) is the caller's (`pipeline.chain`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .index_file import DIGESTS_OF_THIS_FORMAT
from .reader import Reader, expand

_STEP = 500  # IDs per statement


class ClaimStateRow(NamedTuple):
    claim_id: str
    status: str
    claim_hash: str
    evidence_ids: str  # canonical JSON array


class ClaimRow(NamedTuple):
    id: str
    source_id: str
    authority: str
    statement: str
    occurrence: int


class EvidenceRow(NamedTuple):
    id: str
    claim_id: str
    segment_id: str
    start: int
    end: int
    sha256: str
    role: str


class SegmentRow(NamedTuple):
    id: str
    normalization_id: str
    ordinal: int
    kind: str
    heading_path: str  # canonical JSON array
    start: int
    end: int
    line_start: int
    line_end: int
    sha256: str
    page: int | None
    cell: int | None


class NormalizationRow(NamedTuple):
    id: str
    revision_id: str
    adapter: str
    adapter_version: int
    config_hash: str
    status: str
    text_blob: str | None
    meta: str | None  # canonical JSON: a note's claims and citations, or adapter findings


class RevisionRow(NamedTuple):
    id: str
    source_id: str
    blob: str


class SourceRow(NamedTuple):
    id: str
    path: str


class SegmentText(NamedTuple):
    """A segment with the blobs it is cut from: its normalized text and its raw bytes."""

    id: str
    kind: str
    start: int
    end: int
    line_start: int
    line_end: int
    sha256: str
    text_blob: str
    raw_blob: str


def _by_id(reader: Reader, table: str, columns: str, ids: Sequence[str]) -> list[tuple[str, ...]]:
    """Rows of `table` whose `id` is among `ids` (its first selected column is the ID)."""
    unique = sorted(set(ids))
    found = []
    for i in range(0, len(unique), _STEP):
        marks, params = expand("i", unique[i : i + _STEP])
        found.extend(reader.rows(f"SELECT {columns} FROM {table} WHERE id IN ({marks})", params))
    return found


def claim_states(reader: Reader, claim_ids: Sequence[str], number: int) -> dict[str, ClaimStateRow]:
    """The states of `claim_ids` active in generation `number`, by claim ID. A claim's states
    are found through its source: `claim_states` is indexed by source (migration 0002)."""
    out: dict[str, ClaimStateRow] = {}
    unique = sorted(set(claim_ids))
    for i in range(0, len(unique), _STEP):
        marks, params = expand("c", unique[i : i + _STEP])
        for row in reader.rows(
            "SELECT s.claim_id, s.status, s.claim_hash, s.evidence_ids FROM claims c "
            "JOIN claim_states s ON s.source_id = c.source_id AND s.claim_id = c.id "
            f"WHERE c.id IN ({marks}) AND s.gen_from <= :n "
            "AND (s.gen_to IS NULL OR s.gen_to > :n)",
            {**params, "n": number},
        ):
            out[row[0]] = ClaimStateRow._make(row)
    return out


def claims(reader: Reader, ids: Sequence[str]) -> dict[str, ClaimRow]:
    return {
        r[0]: ClaimRow._make(r)
        for r in _by_id(reader, "claims", "id, source_id, authority, statement, occurrence", ids)
    }


def evidence(reader: Reader, ids: Sequence[str]) -> dict[str, EvidenceRow]:
    columns = 'id, claim_id, segment_id, "start", "end", sha256, role'
    return {r[0]: EvidenceRow._make(r) for r in _by_id(reader, "evidence", columns, ids)}


def segments(reader: Reader, ids: Sequence[str]) -> dict[str, SegmentRow]:
    columns = (
        'id, normalization_id, ordinal, kind, heading_path, "start", "end", line_start, '
        "line_end, sha256, page, cell"
    )
    return {r[0]: SegmentRow._make(r) for r in _by_id(reader, "segments", columns, ids)}


def normalizations(reader: Reader, ids: Sequence[str]) -> dict[str, NormalizationRow]:
    columns = "id, revision_id, adapter, adapter_version, config_hash, status, text_blob, meta"
    return {r[0]: NormalizationRow._make(r) for r in _by_id(reader, "normalizations", columns, ids)}


def revisions(reader: Reader, ids: Sequence[str]) -> dict[str, RevisionRow]:
    return {
        r[0]: RevisionRow._make(r) for r in _by_id(reader, "revisions", "id, source_id, blob", ids)
    }


def sources(reader: Reader, ids: Sequence[str]) -> dict[str, SourceRow]:
    return {r[0]: SourceRow._make(r) for r in _by_id(reader, "sources", "id, path", ids)}


def index_digests(reader: Reader, source_ids: Sequence[str], number: int) -> dict[str, str | None]:
    """source ID -> the rows digest its state in generation `number` records for it in the
    index (None: a state written before the ledger recorded them, or recorded for another
    index format)."""
    out: dict[str, str | None] = {}
    unique = sorted(set(source_ids))
    for i in range(0, len(unique), _STEP):
        marks, params = expand("s", unique[i : i + _STEP])
        for sid, digest in reader.rows(
            f"SELECT source_id, CASE WHEN {DIGESTS_OF_THIS_FORMAT} THEN index_digest END "
            f"FROM source_states WHERE source_id IN ({marks}) "
            "AND gen_from <= :n AND (gen_to IS NULL OR gen_to > :n)",
            {**params, "n": number},
        ):
            out[sid] = digest
    return out


def segment_texts(reader: Reader, ids: Sequence[str]) -> dict[str, SegmentText]:
    """Segments by ID with the addresses of their normalized text and raw bytes."""
    out: dict[str, SegmentText] = {}
    unique = sorted(set(ids))
    for i in range(0, len(unique), _STEP):
        marks, params = expand("s", unique[i : i + _STEP])
        for row in reader.rows(
            'SELECT s.id, s.kind, s."start", s."end", s.line_start, s.line_end, s.sha256, '
            "n.text_blob, v.blob FROM segments s "
            "JOIN normalizations n ON n.id = s.normalization_id "
            f"JOIN revisions v ON v.id = n.revision_id WHERE s.id IN ({marks})",
            params,
        ):
            out[row[0]] = SegmentText._make(row)
    return out
