"""Index rows of sources: one pure function makes them, from memory or from the ledger.

`source_rows` turns a source's segments (with their text) and its active claims into index
rows. Ingest calls it with what it has just computed; `index rebuild` and the fallback full
build call it with the same facts read back from the ledger and the normalized-text blobs
(`index_rows`). One function, so an index rebuilt from scratch has exactly the rows (and
digests) of one patched generation after generation.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import Connection

from .. import faults
from ..errors import IntegrityError
from ..model.adapters import PROSE_KINDS
from ..model.generation import ClaimState
from ..model.records import RECORD, Record, heading_list, read_record
from ..model.terms import term_text
from ..progress import Progress
from ..storage import index_file, index_writer
from ..storage import sources as ledger_sources
from ..storage import states as state
from ..storage.blobs import BlobStore, DiskBlobStore
from ..storage.generations import GenerationRef
from ..storage.index_file import Row
from .ledger_pool import helper_engine, ledger_helpers


class SegmentFact(NamedTuple):
    id: str
    sha256: str
    kind: str
    heading_path: str  # canonical JSON array
    text: str
    start: int  # where `text` starts in the normalized text


class ClaimFact(NamedTuple):
    """A confirmed or other claim as the index sees it. Its `statement` must be its excerpt
    `[start, end)` with whitespace collapsed and NFC (`statement_of`), as every claim the
    pipeline makes is and `verify` checks: a paragraph's terms are taken from its claims'
    statements when their spans tile it (`_tiled`)."""

    id: str
    hash: str
    status: str
    authority: str
    statement: str
    heading_path: str  # of the segment its statement is in
    segment_id: str  # that segment
    start: int  # where its statement's excerpt starts in the normalized text
    end: int  # and where it ends


@dataclass(frozen=True)
class SourceForIndex:
    source_id: str
    path: str
    normalization_id: str | None
    claims: Sequence[ClaimState]


class Analyzer:
    """Memoized text analysis (the same texts recur: headings, paths, repeated sentences)."""

    def __init__(self, cache: Mapping[str, str] | None = None) -> None:
        self._cache = dict(cache or {})

    def text(self, text: str) -> str:
        got = self._cache.get(text)
        if got is None:
            got = self._cache[text] = term_text(text)
        return got

    def heading(self, heading_path: str) -> str:
        key = "\x00h" + heading_path
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = term_text(" ".join(json.loads(heading_path)))
        return got

    def path(self, path: str) -> str:
        key = "\x00p" + path
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = term_text(posixpath.splitext(path)[0].replace("/", " "))
        return got


def source_rows(
    source_id: str,
    path: str,
    normalization_id: str | None,
    segments: Sequence[SegmentFact],
    claims: Sequence[ClaimFact],
    analyzer: Analyzer,
) -> list[Row]:
    """Every index row of one source: its segments, itself as a whole, its confirmed claims.

    A prose segment whose terms are exactly its confirmed claims' terms, in order (its
    sentences, nothing left over: the common case) gets no row of its own; its claims stand for
    it in `search` (ADR 0021). Any other segment, one with a disputed sentence, say, or a word
    across a sentence cut, has its row.

    A source that is a decision record (`model/records.py`) has its role and status on every
    row: `record` on its own row, each claim's and segment's role on theirs.

    `claims` come in text order (`index_rows` sorts those of the ledger), as do their rows:
    adjacent claim rows are adjacent sentences, each other's context (`ranking.in_context`).

    Rows are plain tuples with the fields of `IndexRow`, in order: a worker makes a hundred
    per file and sends them to the writer as they are."""
    rows: list[Row] = []
    roles = _Roles(segments)
    pterms = analyzer.path(path)
    confirmed = [c for c in claims if c.status == "confirmed"]
    claim_terms = [analyzer.text(c.statement) for c in confirmed]
    in_segment: dict[str, list[tuple[int, int, str]]] = {}
    for claim, terms in zip(confirmed, claim_terms, strict=True):
        in_segment.setdefault(claim.segment_id, []).append((claim.start, claim.end, terms))
    whole, headings, stood_for = _add_segment_rows(
        rows, source_id, path, pterms, segments, in_segment, analyzer, roles
    )
    if normalization_id and (whole or headings):
        # The whole source as one document: the context QUERY weighs claims by.
        rows.append(
            (
                "source",
                source_id,
                normalization_id,
                source_id,
                path,
                "[]",
                "",
                "",
                "",
                path,
                "",
                RECORD if roles.record else "",
                roles.status,
                " ".join(whole),
                " ".join(headings),
                pterms,
            )
        )
    _add_claim_rows(
        rows, source_id, path, pterms, confirmed, claim_terms, stood_for, analyzer, roles
    )
    return rows


class _Roles:
    """The record a source's segments make (if any), and the role of each of its parts."""

    def __init__(self, segments: Sequence[SegmentFact]) -> None:
        self.record: Record | None = read_record(
            (s.id, s.kind, s.heading_path, s.text) for s in segments
        )
        self.status = self.record.status if self.record else ""
        self._paths: dict[str, list[str]] = {}

    def of(self, segment_id: str, heading_path: str) -> str:
        if self.record is None:
            return ""
        return self.record.role(segment_id, heading_list(heading_path, self._paths))


def _add_segment_rows(
    rows: list[Row],
    source_id: str,
    path: str,
    pterms: str,
    segments: Sequence[SegmentFact],
    in_segment: dict[str, list[tuple[int, int, str]]],
    analyzer: Analyzer,
    roles: _Roles,
) -> tuple[list[str], list[str], set[str]]:
    """Add the rows of the segments that need one (`in_segment`: segment ID -> its confirmed
    claims' (start, end, terms)); return the terms of the source's body and of its headings,
    in order, and the IDs of the segments whose claims stand for them."""
    stood_for: set[str] = set()
    whole: list[str] = []
    headings: list[str] = []
    for seg in segments:
        mine = in_segment.get(seg.id) if seg.kind in PROSE_KINDS else None
        if mine is None:
            seg_terms, covered = analyzer.text(seg.text), False
        else:
            mine.sort()  # text order
            joined = " ".join(terms for _, _, terms in mine if terms)  # its claims' terms
            if _tiled(seg, mine):
                seg_terms, covered = joined, True
            else:
                seg_terms = analyzer.text(seg.text)
                covered = seg_terms == joined
        (headings if seg.kind == "heading" else whole).append(seg_terms)
        if covered:
            stood_for.add(seg.id)
            continue
        # The text itself is not stored in the index (its SHA-256 is): readers cut it from the
        # verified normalized-text blob, and the index stays a third smaller.
        rows.append(
            (
                "segment",
                seg.id,
                seg.sha256,
                source_id,
                path,
                seg.heading_path,
                seg.kind,
                "",
                "",
                "",
                "",
                roles.of(seg.id, seg.heading_path),
                roles.status,
                seg_terms,
                analyzer.heading(seg.heading_path),
                pterms,
            )
        )
    return whole, headings, stood_for


def _add_claim_rows(
    rows: list[Row],
    source_id: str,
    path: str,
    pterms: str,
    confirmed: Sequence[ClaimFact],
    claim_terms: Sequence[str],
    stood_for: set[str],
    analyzer: Analyzer,
    roles: _Roles,
) -> None:
    """Add a row for each confirmed claim; one whose segment has no row of its own names it."""
    for claim, terms in zip(confirmed, claim_terms, strict=True):
        rows.append(
            (
                "claim",
                claim.id,
                claim.hash,
                source_id,
                path,
                claim.heading_path,
                "",
                claim.authority,
                claim.status,
                claim.statement,
                claim.segment_id if claim.segment_id in stood_for else "",
                roles.of(claim.segment_id, claim.heading_path),
                roles.status,
                terms,
                analyzer.heading(claim.heading_path),
                pterms,
            )
        )


def _tiled(seg: SegmentFact, claims: list[tuple[int, int, str]]) -> bool:
    """Whether the claims' excerpts ((start, end, terms) triples, in text order) tile the
    segment's text: whitespace between each two, nothing but whitespace before the first or
    after the last.

    Then the segment's terms are its claims' terms joined: analysis cuts words at whitespace,
    and whitespace never combines with its neighbours (in NFKC or case folding), so the terms
    of such a text are its pieces' terms in order (tests/test_terms.py checks the property),
    and a paragraph is analyzed once, as its sentences, instead of twice. Claims glued
    together with no space between (after `。`) do not tile: that segment is analyzed."""
    text, base = seg.text, seg.start
    position = 0
    for start, end, _ in claims:
        start, end = start - base, end - base
        if start < position or end < start or end > len(text):
            return False
        if start > position:
            if not text[position:start].isspace():
                return False
        elif position:
            return False  # glued to the claim before it
        position = end
    return position == len(text) or text[position:].isspace()


def index_rows(
    conn: Connection,
    blobs: BlobStore,
    sources: Sequence[SourceForIndex],
    analyzer: Analyzer | None = None,
) -> dict[str, list[Row]]:
    """The rows of `sources`, with every fact read from the ledger and the blobs."""
    analyzer = analyzer or Analyzer()
    norm_ids = {s.normalization_id for s in sources if s.normalization_id}
    text_blobs = ledger_sources.text_blobs(conn, norm_ids)
    segments = ledger_sources.segments_for_index(conn, norm_ids)
    confirmed = [c for s in sources for c in s.claims if c.status == "confirmed"]
    statements = ledger_sources.claim_texts(conn, (c.claim_id for c in confirmed))
    _require_claims(confirmed, statements)
    located = ledger_sources.statement_places(conn, (e for c in confirmed for e in c.evidence_ids))

    out: dict[str, list[Row]] = {}
    for source in sources:
        norm_id = source.normalization_id
        facts: list[SegmentFact] = []
        text_blob = text_blobs.get(norm_id) if norm_id else None
        if norm_id and text_blob:
            text = blobs.get(text_blob).decode("utf-8")
            facts = [
                SegmentFact(g.id, g.sha256, g.kind, g.heading_path, text[g.start : g.end], g.start)
                for g in segments.get(norm_id, [])
            ]
        # In text order, as a worker makes them (the ledger's states come in no set order).
        claims = sorted(
            (
                ClaimFact(
                    c.claim_id,
                    c.claim_hash,
                    c.status,
                    statements[c.claim_id][1],
                    statements[c.claim_id][0],
                    *located.get(c.claim_id, ("[]", "", 0, 0)),
                )
                for c in source.claims
                if c.status == "confirmed"
            ),
            key=lambda c: (c.start, c.end, c.id),
        )
        out[source.source_id] = source_rows(
            source.source_id, source.path, norm_id, facts, claims, analyzer
        )
    return out


def _require_claims(confirmed: Sequence[ClaimState], statements: Mapping[str, object]) -> None:
    """Every confirmed claim state's claim is in the ledger: a row cannot be made of a
    statement that is not there (a damaged or edited ledger: `verify` names the reference)."""
    missing = sorted({c.claim_id for c in confirmed} - statements.keys())
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise IntegrityError(
            f"claim {missing[0]}{more} is active and confirmed, but the ledger has no row of it",
            code="ledger_mismatch",
            claim_ids=missing[:10],
        )


SOURCES_PER_STEP = 500  # sources read back from the ledger at a time by a whole-index pass


def _sources_by_path(conn: Connection, generation: GenerationRef) -> list[state.ActiveSource]:
    return sorted(state.active_sources(conn, generation.number).values(), key=lambda a: a.path)


def _step_rows(
    conn: Connection, blobs: BlobStore, number: int, part: Sequence[state.ActiveSource]
) -> dict[str, list[Row]]:
    """The rows of some of generation `number`'s sources."""
    claims = state.claim_states(conn, number, [a.source_id for a in part])
    return index_rows(
        conn,
        blobs,
        [
            SourceForIndex(
                a.source_id, a.path, a.normalization_id, [c for _, c in claims.get(a.source_id, [])]
            )
            for a in part
        ],
    )


def generation_rows(
    conn: Connection,
    blobs: BlobStore,
    generation: GenerationRef,
    progress: Progress | None = None,
) -> Iterator[dict[str, list[Row]]]:
    """Every index row of `generation`, from the ledger alone, a few hundred sources at a time
    (by path): memory follows the step, not the corpus (a whole 10,000-file generation's rows
    held at once took 1.7 GB)."""
    yield from _rows_in_steps(conn, blobs, generation, _sources_by_path(conn, generation), progress)


def _rows_in_steps(
    conn: Connection,
    blobs: BlobStore,
    generation: GenerationRef,
    sources: Sequence[state.ActiveSource],
    progress: Progress | None,
) -> Iterator[dict[str, list[Row]]]:
    for i in range(0, len(sources), SOURCES_PER_STEP):
        if progress:
            progress("index rows from the ledger", i, len(sources), 0)
        yield _step_rows(conn, blobs, generation.number, sources[i : i + SOURCES_PER_STEP])
    if progress:
        progress("index rows from the ledger", len(sources), len(sources), 0)


DIGEST_STEP = 100  # sources per task of a parallel digest (a small step keeps the bar moving)
DIGEST_JOBS_MAX = 8


def generation_digest(
    conn: Connection,
    blobs: BlobStore,
    generation: GenerationRef,
    progress: Progress | None = None,
    *,
    jobs: int | None = None,
) -> str:
    """The rows digest of `generation`'s index as the ledger derives it (what `verify`
    compares with the digest an index file records).

    Re-deriving every row is most of a verify's time and each source's rows are a pure
    function of the ledger: with more than one core and a step's worth of sources, the steps
    are spread over helper processes (`helpers.ledger_helpers`). A generation's rows never
    change once it is current, so a helper's later snapshot derives the same ones."""
    sources = _sources_by_path(conn, generation)
    jobs = jobs or min(os.cpu_count() or 1, DIGEST_JOBS_MAX)
    if jobs < 2 or len(sources) <= DIGEST_STEP or not isinstance(blobs, DiskBlobStore):
        return index_file.rows_digest(
            {
                source_id: index_file.source_rows_digest(rows)
                for step in _rows_in_steps(conn, blobs, generation, sources, progress)
                for source_id, rows in step.items()
            }
        )
    steps = [sources[i : i + DIGEST_STEP] for i in range(0, len(sources), DIGEST_STEP)]
    digests: dict[str, str] = {}
    done = 0
    if progress:
        progress("index rows from the ledger", done, len(sources), 0)
    with ledger_helpers(conn, min(jobs, len(steps))) as helpers:
        tasks = [(helpers.url, generation.number, str(blobs.root), step) for step in steps]
        for step, got in zip(steps, helpers.pool.imap(_step_digests, tasks), strict=True):
            faults.point("verify.index_rows")
            digests.update(got)
            done += len(step)
            if progress:
                progress("index rows from the ledger", done, len(sources), 0)
    return index_file.rows_digest(digests)


@functools.cache
def _helper_store(raw_root: str) -> DiskBlobStore:
    """A helper's one store for all its steps: the packs' tables are read once (ADR 0025)."""
    return DiskBlobStore(Path(raw_root))


def _step_digests(task: tuple[str, int, str, list[state.ActiveSource]]) -> dict[str, str]:
    """In a helper process: the digests of some of generation `number`'s sources."""
    url, number, raw_root, part = task
    with helper_engine(url).connect() as conn:
        rows = _step_rows(conn, _helper_store(raw_root), number, part)
    return {source_id: index_file.source_rows_digest(r) for source_id, r in rows.items()}


def rebuild(
    index_dir: Path,
    conn: Connection,
    blobs: BlobStore,
    generation: GenerationRef,
    progress: Progress | None = None,
) -> dict[str, object]:
    """Write the index of `generation` from the ledger alone; returns its path and digests."""
    path = index_file.index_path(index_dir, generation.number, generation.hash)
    previous = None
    if path.is_file():
        with contextlib.suppress(Exception), index_file.open_index(path, generation.hash) as old:
            previous = index_file.read_meta(old).get("rows_digest")
    writer = index_writer.IndexWriter(index_dir)
    documents = 0
    try:
        for step in generation_rows(conn, blobs, generation, progress):
            writer.replace(step)
            faults.point("rebuild.step")
            documents += sum(map(len, step.values()))
    except BaseException:
        writer.abandon()
        raise
    digest = writer.finish(path, generation.hash, generation.number)
    return {
        "generation": generation.to_json(),
        "path": str(path),
        "rows_digest": digest,
        "previous_rows_digest": previous,
        "same_as_previous": previous == digest if previous else None,
        "documents": documents,
    }
