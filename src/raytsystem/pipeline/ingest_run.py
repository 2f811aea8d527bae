"""What one ingest holds while the files' results stream in (`Run`), and how it takes them.

`Run.take` records a batch of results: it checks that each new result's rows refer only to
each other (`check_references`), publishes the blobs the workers staged, writes the immutable
rows and the claim states ahead (`storage.staging`), and puts the index rows into the new
index file. Of each new file it keeps only what the end of the ingest reads (`KeptFile`), so
memory follows a batch, not the workspace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from .. import faults
from ..errors import RaytError
from ..model.adapters import names_a_format
from ..model.generation import SourceState
from ..model.objects import source_id_for
from ..model.text import Finding
from ..storage import index_writer
from ..storage import states as state
from ..storage.blobs import DiskBlobStore
from ..storage.db import Ledger
from ..storage.generations import GenerationRef
from ..storage.staging import Staging
from ..storage.writes import ObjectRows, insert_objects
from ..workspace import Workspace, is_note
from .files import FileResult, KeptFile
from .indexing import SourceForIndex, index_rows
from .parallel import wait_out
from .screen import Screen

REBUILD_CHUNK = 500  # unchanged sources read back per step of a full index build


@dataclass
class IngestReport:
    """What an ingest did: the generation it made (or the current one, when nothing changed),
    its figures and its findings."""

    generation: GenerationRef | None
    parent: GenerationRef | None
    created: bool
    scanned: int = 0
    unchanged: int = 0
    new_revisions: int = 0
    new_sources: int = 0
    removed_sources: int = 0
    # Sources whose file could not be ingested this time (a finding says why): their last
    # good revision stays active.
    kept_sources: int = 0
    claims_added: int = 0
    claims_removed: int = 0
    claims_changed: int = 0  # same claim, new status or evidence
    bytes_read: int = 0
    index_rebuilt: bool = False
    index_built_from: str | None = None  # "spare" | "parent" | "ledger", for a new generation
    indexes_pruned: int = 0
    index_spare_made: bool = False
    # Statements the model `[meaning]` names encoded for this generation (ADR 0044).
    vectors_encoded: int = 0
    findings: list[Finding] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # files passed over, by reason
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "generation": None if self.generation is None else self.generation.to_json(),
            # The generation the new one follows; null when no generation was made.
            "parent": self.parent.to_json() if self.created and self.parent else None,
            "counts": {
                "scanned": self.scanned,
                "unchanged": self.unchanged,
                "new_revisions": self.new_revisions,
                "new_sources": self.new_sources,
                "removed_sources": self.removed_sources,
                "kept_sources": self.kept_sources,
                "claims_added": self.claims_added,
                "claims_removed": self.claims_removed,
                "claims_changed": self.claims_changed,
                "bytes_read": self.bytes_read,
            },
            # Files discovery passed over, by reason (not_selected, ignored_by_gitignore,
            # unsupported_type): counted, not findings.
            "skipped": dict(sorted(self.skipped.items())),
            "index_rebuilt": self.index_rebuilt,
            # How the new generation's index was made and how many old ones were pruned.
            "index": {
                "built_from": self.index_built_from,
                "pruned": self.indexes_pruned,
                "spare_made": self.index_spare_made,
            },
            "vectors_encoded": self.vectors_encoded,
            "findings": [f.to_json() for f in sorted(self.findings)],
            "seconds": round(self.seconds, 3),
        }


@dataclass
class Run:
    """What one ingest keeps between batches: small, whatever the workspace's size."""

    ws: Workspace
    ledger: Ledger
    blobs: DiskBlobStore
    stage: Staging
    parent: GenerationRef | None
    active: dict[str, state.ActiveSource]  # the parent's sources by path
    report: IngestReport
    started_at: str
    side: Callable[..., Future[Any]]  # runs work on the ingest's side thread
    # Opened on first use: a run that changes nothing never copies the parent's index.
    # Written on this thread: the workers keep the cores busy, and a writer thread of its
    # own only made the two SQLite connections contend (ADR 0032).
    open_index: Callable[[], index_writer.IndexWriter]
    # Per changed source: its state, without claims (written ahead already) except for notes.
    states: dict[str, SourceState] = field(default_factory=dict)
    changed: dict[str, KeptFile] = field(default_factory=dict)
    removed_paths: list[str] = field(default_factory=list)
    # Sources whose file was found but could not be ingested (too large, not text, unreadable):
    # their last revision stays active, and the stat cache must not vouch for the file.
    kept_paths: set[str] = field(default_factory=set)
    # What the workers keep out of the store (pipeline/screen.py).
    screen: Screen = field(default_factory=Screen)
    # paths the screen refused, with its findings
    quarantined: dict[str, list[Finding]] = field(default_factory=dict)
    spare: Future[bool] | None = None  # the spare copy of the new index, under way
    parent_index: Path | None = None  # the parent generation's index file
    parent_index_usable: bool = False  # it is there and records the parent (`index_file.usable`)
    _index: index_writer.IndexWriter | None = None

    @property
    def index(self) -> index_writer.IndexWriter:
        if self._index is None:
            self._index = self.open_index()
        return self._index

    def abandon_index(self) -> None:
        if self._index is not None:
            self._index.abandon()

    @property
    def index_built_from(self) -> str | None:
        return None if self._index is None else self._index.built_from

    @contextlib.contextmanager
    def settling_index(self) -> Iterator[None]:
        """The index writes out what it holds in memory (`IndexWriter.settle`) on the side
        thread while the body runs (the ledger's commit: each waits on its own file); its
        error, if any, is raised after."""
        if self._index is None:
            yield
            return
        settled = self.side(self._index.settle)
        try:
            yield
        finally:
            wait_out(settled)  # on a failure the index is abandoned next: not while it commits
        settled.result()

    def take(self, batch: list[FileResult]) -> None:
        """Record one batch of results (rows, staged states, index rows), keeping of each
        new file only what the end of the ingest reads (`KeptFile`)."""
        # Each new result with its source's ID (derived from the path once, used four times).
        new = [(r, source_id_for(r.path)) for r in batch if r.outcome == "new"]
        for r in batch:
            self._count(r)
        if not new:
            return
        faults.point("ingest.take")
        # The workers staged their new blobs unsynced: make them durable and visible before
        # any row that points to them is committed.
        faults.point("ingest.before_publish")
        for r, sid in new:
            check_references(r, sid)
        self.blobs.publish(staged for r, _ in new for staged in r.staged)
        rows: dict[str, list[tuple[Any, ...]]] = {}
        digests: dict[str, str] = {}
        with self.stage.batch() as conn:
            insert_objects(conn, object_rows(new, self.started_at))
            for r, sid in new:
                nid = str(r.normalization["id"])
                if is_note(r.path):
                    # A note's claims and statuses are decided with the whole generation.
                    self.states[sid] = SourceState(sid, r.path, r.revision_id, nid, "", ())
                else:
                    self.states[sid] = SourceState(
                        sid, r.path, r.revision_id, nid, r.source_digest, ()
                    )
                    self.stage.put_rows(sid, r.claim_states, had_states=r.path in self.active)
                    rows[sid] = r.index_rows
                    digests[sid] = r.index_digest
                self.changed[r.path] = KeptFile(r.path, r.revision_id, nid, r.note_meta)
        self.index.replace(rows, digests)

    def _count(self, r: FileResult) -> None:
        self.report.bytes_read += r.size
        if r.finding and r.finding.code == "binary_file" and self._unnamed(r.path):
            # a file whose name gives no format and that is not text: passed over like an
            # image, and counted (a `.md` that is not text, or a source that turned binary,
            # is a finding)
            self.report.skipped["binary_file"] = self.report.skipped.get("binary_file", 0) + 1
        elif r.finding:
            self.report.findings.append(r.finding)
        self.report.findings.extend(r.findings)
        if r.outcome == "unchanged":
            self.report.unchanged += 1
        elif r.outcome == "quarantined":
            self.quarantined[r.path] = r.findings  # its source keeps the revision it had
        elif r.outcome in ("skipped", "unreadable") and r.path in self.active:
            # The file is there: its source is removed only when it is gone or deselected.
            # Until its bytes can be ingested again, its last good revision stays active.
            self.kept_paths.add(r.path)
            self.report.kept_sources += 1

    def _unnamed(self, path: str) -> bool:
        return not names_a_format(path) and path not in self.active

    def index_unchanged_sources(self, skip: set[str]) -> None:
        """Without a usable parent index, the new index needs the unchanged sources' rows
        too, read back from the ledger a step at a time."""
        assert self.parent is not None
        keep = sorted(
            (
                a
                for a in self.active.values()
                if a.source_id not in skip and a.source_id not in self.states
            ),
            key=lambda a: a.path,
        )
        for i in range(0, len(keep), REBUILD_CHUNK):
            part = keep[i : i + REBUILD_CHUNK]
            with self.ledger.reading() as conn:
                claims = state.claim_states(conn, self.parent.number, [a.source_id for a in part])
                sources = [
                    SourceForIndex(
                        a.source_id,
                        a.path,
                        a.normalization_id,
                        [c for _, c in claims.get(a.source_id, [])],
                    )
                    for a in part
                ]
                self.index.replace(index_rows(conn, self.blobs, sources))


def object_rows(results: list[tuple[FileResult, str]], seen_at: str) -> ObjectRows:
    """The immutable rows of these results (each with its source's ID); segments, claims and
    evidence are tuples in their tables' column order already (`FileResult`)."""
    rows = ObjectRows()
    for r, sid in results:
        rows.add_file(
            (sid, r.path), (r.revision_id, r.blob, r.size, r.media_type), r.normalization, seen_at
        )
        rows.segments.extend(r.segments)
        rows.claims.extend(r.claims)
        rows.evidence.extend(r.evidence)
    return rows


_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)


def check_references(r: FileResult, source_id: str) -> None:
    """Refuse a new result whose rows refer to anything but each other and its own source
    (`source_id`, its path's).

    The writer writes a result's rows without SQLite's foreign-key checks (`Staging.batch`):
    a worker derives every reference from the rows it makes with it (a segment names its
    normalization, a claim its source, an evidence its claim and segment, a state its claim),
    so this holds unless the code that makes them is wrong, and it is checked here, in
    memory, before anything is written."""
    norm = r.normalization or {}
    own, segments, claims = {source_id}, set(map(_FIRST, r.segments)), set(map(_FIRST, r.claims))
    if not (
        norm.get("revision_id") == r.revision_id
        and {norm.get("id")}.issuperset(map(_SECOND, r.segments))
        and own.issuperset(map(_SECOND, r.claims))
        and claims.issuperset(map(_SECOND, r.evidence))
        and segments.issuperset(map(_THIRD, r.evidence))
        and claims.issuperset(map(_FIRST, r.claim_states))
        and own.issuperset(map(_SECOND, r.claim_states))
    ):
        raise RaytError(
            f"the rows made for {r.path} refer to rows that are not among them (a bug in "
            "raytsystem); the ingest stopped before writing them: the previous generation is "
            "still current",
            code="internal_error",
        )
