"""Segments, claims and evidence as rows, derived from a normalization by pure functions.

An extracted claim is one sentence of a prose segment, taken verbatim: its evidence is the exact
span of the sentence in the normalized text and the SHA-256 of that excerpt. The statement is the
excerpt with whitespace collapsed (and NFC); the excerpt itself stays exact, so a client can
re-check `sha256(normalized_text[start:end])`.

A claim's identity is (source, authority, statement, occurrence): the same sentence in the same
source keeps its ID across revisions, so a retraction or a dispute written against it survives
unrelated edits, and `diff` shows only sentences that really changed. The evidence, which names
the revision-specific segment and span, is what changes from revision to revision.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from ..canonical import canonical_json, sha256_hex
from ..sentences import split_sentences
from .adapters import PROSE_KINDS, Normalized, SegmentDraft
from .objects import (
    ClaimRow,
    EvidenceRow,
    SegmentRow,
    claim_id,
    evidence_id,
    segment_id,
    statement_of,
)

_HAS_WORD: Final = re.compile(r"[^\W_]")


def segment_rows(normalization_id: str, normalized: Normalized) -> list[SegmentRow]:
    rows = []
    for ordinal, seg in enumerate(normalized.segments):
        sha = sha256_hex(normalized.text[seg.start : seg.end])
        rows.append(
            SegmentRow(
                id=segment_id(normalization_id, ordinal, seg.start, seg.end, sha),
                normalization_id=normalization_id,
                ordinal=ordinal,
                kind=seg.kind,
                heading_path=canonical_json(list(seg.heading_path)).decode("utf-8"),
                start=seg.start,
                end=seg.end,
                line_start=seg.line_start,
                line_end=seg.line_end,
                sha256=sha,
            )
        )
    return rows


@dataclass(frozen=True)
class Sentence:
    """One sentence of a segment: its absolute span and the footnote labels attached to it."""

    segment: int  # ordinal
    start: int
    end: int
    statement: str
    refs: tuple[str, ...]


def sentences(text: str, seg: SegmentDraft, ordinal: int) -> Iterator[Sentence]:
    """Sentences of a prose segment; a footnote reference belongs to the sentence it follows."""
    body = text[seg.start : seg.end]
    spans = split_sentences(body, seg.protected)
    refs_by_span: list[list[str]] = [[] for _ in spans]
    for offset, label in seg.refs:
        # The sentence that ends at or before the reference, or the first one.
        index = 0
        for k, (s, _e) in enumerate(spans):
            if s <= offset:
                index = k
        if spans:
            refs_by_span[index].append(label)
    for (s, e), refs in zip(spans, refs_by_span, strict=True):
        excerpt = body[s:e]
        if not _HAS_WORD.search(excerpt):
            continue
        yield Sentence(ordinal, seg.start + s, seg.start + e, statement_of(excerpt), tuple(refs))


def prose_sentences(normalized: Normalized) -> Iterator[Sentence]:
    for ordinal, seg in enumerate(normalized.segments):
        if seg.kind in PROSE_KINDS:
            yield from sentences(normalized.text, seg, ordinal)


def extract_claims(
    source_id: str, normalized: Normalized, segments: Sequence[SegmentRow]
) -> list[tuple[ClaimRow, EvidenceRow]]:
    """One extracted claim with one evidence per sentence of every prose segment."""
    out = []
    occurrences: dict[str, int] = {}
    for sentence in prose_sentences(normalized):
        occurrence = occurrences.get(sentence.statement, 0)
        occurrences[sentence.statement] = occurrence + 1
        cid = claim_id(source_id, "extracted", sentence.statement, occurrence)
        seg = segments[sentence.segment]
        sha = sha256_hex(normalized.text[sentence.start : sentence.end])
        out.append(
            (
                ClaimRow(cid, source_id, "extracted", sentence.statement, occurrence),
                EvidenceRow(
                    evidence_id(cid, seg.id, sentence.start, sentence.end, sha, "statement"),
                    cid,
                    seg.id,
                    sentence.start,
                    sentence.end,
                    sha,
                    "statement",
                ),
            )
        )
    return out
