"""Rows of the evidence chain and the derivations of their IDs and hashes.

Kept free of heavy imports: QUERY and VERIFY re-derive IDs with these functions on every answer.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple

import blake3

from ..canonical import Shape
from ..ids import HASH_HEX, identity_digest, identity_template, shaped_hash


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


# The same IDs again, for one file's hundreds of segments and sentences: the fields they share
# fixed, the others given as canonical JSON texts (`json_text(s)`, ints as they are) in sorted
# key order (`ids.identity_template`). About half the cost of the calls above.


def segment_ids(normalization_id: str) -> Callable[[int, int, str, int], str]:
    """segment_id(normalization_id, ordinal, start, end, sha256) for one normalization's
    segments, taking (end, ordinal, json_text(sha256), start)."""
    return identity_template(
        "segment", ("end", "ordinal", "sha256", "start"), normalization=normalization_id
    )


def extracted_claim_ids(source_id: str) -> Callable[[int, str], str]:
    """claim_id(source_id, "extracted", statement, occurrence) for one source's sentences,
    taking (occurrence, json_text(statement))."""
    return identity_template(
        "claim", ("occurrence", "statement"), authority="extracted", source=source_id
    )


statement_evidence_id: Callable[[str, int, str, str, int], str] = identity_template(
    "evidence", ("claim", "end", "segment", "sha256", "start"), role="statement"
)
"""evidence_id(claim, segment, start, end, sha256, "statement"), taking
(json_text(claim), end, json_text(segment), json_text(sha256), start)."""


_CLAIM_HASH = Shape(("id", "statement", "authority", "status", "evidence", "kind"))
_CONFIRMED_EXTRACTED: Final = _CLAIM_HASH.template(
    ("evidence", "id", "statement"), authority="extracted", kind="claim", status="confirmed"
)


def confirmed_claim_hash(evidence: str, claim: str, statement: str) -> str:
    """claim_hash(claim, statement, "extracted", "confirmed", evidence_ids), taking the canonical
    JSON of the sorted evidence IDs, json_text(claim) and json_text(statement)."""
    text = _CONFIRMED_EXTRACTED % (evidence, claim, statement)
    return blake3.blake3(text.encode("utf-8")).hexdigest(length=HASH_HEX // 2)


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
