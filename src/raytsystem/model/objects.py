"""Rows of the evidence chain and the derivations of their IDs and hashes.

Kept free of heavy imports: QUERY and VERIFY re-derive IDs with these functions on every answer.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple

import blake3

from ..canonical import Shape
from ..ids import HASH_HEX, IdScheme, make_id, shaped_hash


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
    page: int | None  # a PDF's page (1-based), else None
    cell: int | None  # a notebook's cell (0-based), else None


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


def source_id_for(path: str) -> str:
    """A source's ID: the same by every ID scheme (a source has no parent)."""
    return make_id("source", path=path)


class ChainIds:
    """The IDs of the evidence chain's rows by one ID scheme (`chain_ids`), made in bulk.

    The positional derivations take their identity's values in the order `ids.IDENTITY` lists
    them, through a precompiled shape (`IdScheme.positional`). The templates are for one
    file's hundreds of segments and sentences: the fields they share fixed, the others given
    as canonical JSON texts (`json_text(s)`, ints as they are) in sorted key order
    (`IdScheme.template`), about half the cost. All give `IdScheme.make_id`'s IDs."""

    def __init__(self, scheme: IdScheme) -> None:
        self.scheme = scheme
        self.revision_id: Callable[[str, str], str] = scheme.positional("revision")
        """revision_id(source_id, blob)"""
        self.normalization_id: Callable[[str, str, int, str], str] = scheme.positional(
            "normalization"
        )
        """normalization_id(revision_id, adapter, adapter_version, config_hash)"""
        self.segment_id: Callable[..., str] = _segment_id(scheme)
        """segment_id(normalization_id, ordinal, start, end, sha256, kind, heading_path,
        line_start, line_end, page, cell): a segment row's fields in order (`SegmentRow`
        but its ID); the scheme takes the ones its identity has."""
        self.claim_id: Callable[[str, str, str, int], str] = scheme.positional("claim")
        """claim_id(source_id, authority, statement, occurrence)"""
        self.evidence_id: Callable[[str, str, int, int, str, str], str] = scheme.positional(
            "evidence"
        )
        """evidence_id(claim_id, segment_id, start, end, sha256, role)"""
        self.statement_evidence_id: Callable[[str, int, str, str, int], str] = scheme.template(
            "evidence", ("claim", "end", "segment", "sha256", "start"), role="statement"
        )
        """evidence_id(claim, segment, start, end, sha256, "statement"), taking
        (json_text(claim), end, json_text(segment), json_text(sha256), start)."""

    def segment_ids(self, normalization_id: str) -> Callable[..., str]:
        """segment_id for one normalization's segments, taking (end, ordinal,
        json_text(sha256), start, json_text(kind), json_text(heading_path), line_start,
        line_end, page, cell), pages and cells as JSON texts ("null" for none)."""
        if self.scheme.number < 3:
            short = self.scheme.template(
                "segment", ("end", "ordinal", "sha256", "start"), normalization=normalization_id
            )
            return lambda end, ordinal, sha, start, *_: short(end, ordinal, sha, start)
        full = self.scheme.template(
            "segment",
            (
                "cell",
                "end",
                "heading_path",
                "line_end",
                "line_start",
                "ordinal",
                "page",
                "segment_kind",
                "sha256",
                "start",
            ),
            normalization=normalization_id,
        )

        def make(
            end: int,
            ordinal: int,
            sha: str,
            start: int,
            kind: str,
            heading: str,
            line_start: int,
            line_end: int,
            page: str,
            cell: str,
        ) -> str:
            return full(cell, end, heading, line_end, line_start, ordinal, page, kind, sha, start)

        return make

    def extracted_claim_ids(self, source_id: str) -> Callable[[int, str], str]:
        """claim_id(source_id, "extracted", statement, occurrence) for one source's sentences,
        taking (occurrence, json_text(statement))."""
        return self.scheme.template(
            "claim", ("occurrence", "statement"), authority="extracted", source=source_id
        )


def _segment_id(scheme: IdScheme) -> Callable[..., str]:
    positional = scheme.positional("segment")
    if scheme.number >= 3:
        return positional  # every field, in SegmentRow's order
    return lambda normalization, ordinal, start, end, sha256, *_shown: positional(
        normalization, ordinal, start, end, sha256
    )


@functools.cache
def chain_ids(scheme: IdScheme) -> ChainIds:
    """The derivations of `scheme`, made once per process."""
    return ChainIds(scheme)


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
