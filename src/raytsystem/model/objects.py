"""Rows of the evidence chain and the derivations of their IDs and hashes.

Kept free of heavy imports: QUERY and VERIFY re-derive IDs with these functions on every answer.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ..canonical import Shape
from ..ids import identity_digest, shaped_hash


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


# The IDs an ingest makes hundreds of per file take their identity's values positionally,
# through a precompiled shape (`ids.identity_digest`): the same IDs as `make_id`.
segment_id: Callable[[str, int, int, int, str], str] = identity_digest("segment")
"""segment_id(normalization_id, ordinal, start, end, sha256)"""
evidence_id: Callable[[str, str, int, int, str, str], str] = identity_digest("evidence")
"""evidence_id(claim_id, segment_id, start, end, sha256, role)"""
claim_id: Callable[[str, str, str, int], str] = identity_digest("claim")
"""claim_id(source_id, authority, statement, occurrence)"""


_CLAIM_HASH = Shape(("id", "statement", "authority", "status", "evidence", "kind"))


def claim_hash(
    claim: str, statement: str, authority: str, status: str, evidence_ids: Sequence[str]
) -> str:
    """The hash a generation records for a claim: content, status and evidence together
    (`object_hash("claim", {...})` of these fields, through a precompiled shape)."""
    return shaped_hash(
        _CLAIM_HASH, claim, statement, authority, status, sorted(evidence_ids), "claim"
    )


def statement_of(excerpt: str) -> str:
    collapsed = " ".join(excerpt.split())
    return collapsed if collapsed.isascii() else unicodedata.normalize("NFC", collapsed)
