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
from typing import Any, Final, NamedTuple

from ..canonical import canonical_json, json_text, sha256_hex
from ..sentences import split_sentences
from .adapters import PROSE_KINDS, SEGMENT_KINDS, Normalized, SegmentDraft
from .objects import ChainIds, ClaimRow, EvidenceRow, SegmentRow, statement_of

_HAS_WORD: Final = re.compile(r"[^\W_]")


def segment_rows(ids: ChainIds, normalization_id: str, normalized: Normalized) -> list[SegmentRow]:
    rows = []
    text = normalized.text
    segment_id = ids.segment_ids(normalization_id)
    # A section's segments share its heading path: (its JSON, that JSON as a JSON string).
    headings: dict[tuple[str, ...], tuple[str, str]] = {}
    for ordinal, seg in enumerate(normalized.segments):
        start, end = seg.start, seg.end
        sha = sha256_hex(text[start:end])
        heading = headings.get(seg.heading_path)
        if heading is None:
            stored = canonical_json(list(seg.heading_path)).decode("utf-8")
            heading = headings[seg.heading_path] = (stored, json_text(stored))
        page, cell = seg.page, seg.cell
        rows.append(
            SegmentRow(
                segment_id(
                    end,
                    ordinal,
                    json_text(sha),
                    start,
                    _KIND_TEXT.get(seg.kind) or json_text(seg.kind),
                    heading[1],
                    seg.line_start,
                    seg.line_end,
                    "null" if page is None else page,
                    "null" if cell is None else cell,
                ),
                normalization_id,
                ordinal,
                seg.kind,
                heading[0],
                start,
                end,
                seg.line_start,
                seg.line_end,
                sha,
                page,
                cell,
            )
        )
    return rows


_KIND_TEXT: Final = {kind: json_text(kind) for kind in SEGMENT_KINDS}


class Sentence(NamedTuple):
    """One sentence of a segment: its absolute span, its exact text, its statement (`excerpt`
    with whitespace collapsed, NFC) and the footnote labels attached to it."""

    segment: int  # ordinal
    start: int
    end: int
    excerpt: str
    statement: str
    refs: tuple[str, ...]


def sentences(text: str, seg: SegmentDraft, ordinal: int) -> Iterator[Sentence]:
    """Sentences of a prose segment; a footnote reference belongs to the sentence it follows."""
    base = seg.start
    body = text[base : seg.end]
    spans = split_sentences(body, seg.protected)
    refs_by_span: list[list[str]] = [[] for _ in spans] if seg.refs else []
    for offset, label in seg.refs:
        # The sentence that ends at or before the reference, or the first one.
        index = 0
        for k, (s, _e) in enumerate(spans):
            if s <= offset:
                index = k
        if spans:
            refs_by_span[index].append(label)
    for k, (s, e) in enumerate(spans):
        excerpt = body[s:e]
        if not _HAS_WORD.search(excerpt):
            continue
        refs = tuple(refs_by_span[k]) if refs_by_span else ()
        yield Sentence(ordinal, base + s, base + e, excerpt, statement_of(excerpt), refs)


def prose_sentences(normalized: Normalized) -> Iterator[Sentence]:
    for ordinal, seg in enumerate(normalized.segments):
        if seg.kind in PROSE_KINDS:
            yield from sentences(normalized.text, seg, ordinal)


def extract_claims(
    ids: ChainIds, source_id: str, normalized: Normalized, segments: Sequence[SegmentRow]
) -> list[tuple[ClaimRow, EvidenceRow]]:
    """One extracted claim with one evidence per sentence of every prose segment."""
    claims, evidence = extract_claim_rows(ids, source_id, normalized, segments)
    return [
        (ClaimRow._make(c), EvidenceRow._make(e)) for c, e in zip(claims, evidence, strict=True)
    ]


def extract_claim_rows(
    ids: ChainIds, source_id: str, normalized: Normalized, segments: Sequence[SegmentRow]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """`extract_claims` as plain tuples in `ClaimRow`'s and `EvidenceRow`'s field order, the
    claims and their statements' evidence in two lists (what an ingest worker sends on)."""
    claims: list[tuple[Any, ...]] = []
    evidence: list[tuple[Any, ...]] = []
    occurrences: dict[str, int] = {}
    claim_id = ids.extracted_claim_ids(source_id)
    statement_evidence_id = ids.statement_evidence_id
    for ordinal, start, end, excerpt, statement, _refs in prose_sentences(normalized):
        occurrence = occurrences.get(statement, 0)
        occurrences[statement] = occurrence + 1
        cid = claim_id(occurrence, json_text(statement))
        seg_id = segments[ordinal].id
        sha = sha256_hex(excerpt)
        claims.append((cid, source_id, "extracted", statement, occurrence))
        evidence.append(
            (
                statement_evidence_id(
                    json_text(cid), end, json_text(seg_id), json_text(sha), start
                ),
                cid,
                seg_id,
                start,
                end,
                sha,
                "statement",
            )
        )
    return claims, evidence
