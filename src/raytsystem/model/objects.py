"""Rows of the evidence chain and the derivations of their IDs and hashes.

Kept free of heavy imports: QUERY and VERIFY re-derive IDs with these functions on every answer.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import NamedTuple

from ..canonical import Shape
from ..ids import make_id, object_hash


class SegmentRow(NamedTuple):
    """A row of `segments`, its fields in the table's column order (rows are inserted as
    they are)."""

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


def segment_id(normalization_id: str, ordinal: int, start: int, end: int, sha256: str) -> str:
    return make_id(
        "segment",
        normalization=normalization_id,
        ordinal=ordinal,
        start=start,
        end=end,
        sha256=sha256,
    )


def evidence_id(claim_id: str, seg_id: str, start: int, end: int, sha256: str, role: str) -> str:
    return make_id(
        "evidence", claim=claim_id, segment=seg_id, start=start, end=end, sha256=sha256, role=role
    )


def claim_id(source_id: str, authority: str, statement: str, occurrence: int) -> str:
    return make_id(
        "claim", source=source_id, authority=authority, statement=statement, occurrence=occurrence
    )


_CLAIM_HASH = Shape(("kind", "id", "statement", "authority", "status", "evidence"))


def claim_hash(
    claim: str, statement: str, authority: str, status: str, evidence_ids: Sequence[str]
) -> str:
    """The hash a generation records for a claim: content, status and evidence together."""
    return object_hash(
        "claim",
        {
            "id": claim,
            "statement": statement,
            "authority": authority,
            "status": status,
            "evidence": sorted(evidence_ids),
        },
        _CLAIM_HASH,
    )


def statement_of(excerpt: str) -> str:
    return unicodedata.normalize("NFC", " ".join(excerpt.split()))
