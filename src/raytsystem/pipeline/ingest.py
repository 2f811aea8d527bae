"""INGEST: bring the workspace's files into the ledger and make the next generation.

The order of work is what makes a crash harmless:

1. take the workspace writer lock; read the current head (the parent generation);
2. find the files that may have changed (stat cache) and process them in worker processes:
   raw blob, normalization blob, segments, claims, index rows (`files.process_chunk`);
3. as the results stream in, batch by batch: write their immutable rows (content-addressed,
   so writing them twice is harmless), write their claim states ahead, opened at the new
   generation's number, which no reader asks for before the head moves there (`staging.py`),
   and put their index rows into the new index file, which has a temp name;
4. resolve the manual notes (citations, retractions) over the whole generation;
5. if anything changed: compute the generation hash, publish the index file, and in one
   transaction insert the generation, close and open state intervals, and move the head.

A kill before step 5 commits leaves the parent generation current and intact; what was written
before is immutable and reusable, an unreferenced temp file, or a claim state of a generation
that does not exist, which the next ingest deletes before it writes. Memory stays bounded by
a batch of results and one digest per source, whatever the size of the workspace.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import gc
import json
import multiprocessing
import os
import pickle
import tempfile
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Table, insert, update

from .. import faults
from ..errors import RaytError, WorkspaceError
from ..model.adapters import adapter_for, media_type_for
from ..model.generation import (
    SourceState,
    generation_hash,
    manifest_digest,
)
from ..model.objects import EvidenceRow, chain_ids, source_id_for
from ..model.text import Finding
from ..progress import Progress
from ..storage import generations, index_file
from ..storage import states as state
from ..storage.blobs import DiskBlobStore
from ..storage.db import Ledger, insert_rows, record_id_scheme
from ..storage.lock import writer_lock
from ..storage.staging import Staging, staging
from ..storage.statcache import StatCache
from ..storage.tables import (
    Claim,
    Evidence,
    Generation,
    Head,
    IngestRun,
    Normalization,
    Revision,
    Segment,
    Source,
)
from ..syscalls import start_helper
from ..workspace import Candidate, Refusal, Workspace, is_note
from .files import (
    FileResult,
    FileTask,
    KeptFile,
    adapter_key,
    now_iso,
    process_chunk,
)
from .indexing import SourceForIndex, index_rows, rebuild
from .manual import resolve_manual

PARALLEL_THRESHOLD = 64
CHUNK = 64  # files a worker takes at once; their new blobs make one pack (ADR 0025)
BATCH = 100  # results taken (blobs published, rows written) at once while the workers go on
AHEAD = 4 * BATCH  # files done or under way beyond what was taken: the bound `_results` keeps
# Workers run this much nicer than the writer. The writer is the one serial part: when other
# work shares the machine, nicer workers leave it a core whenever it has work (ADR 0026: the
# writer also takes files itself, so an ingest of `jobs` keeps `jobs` processes busy; before,
# with `jobs` workers beside the writer, 10,000 files on 2 cores took 45.7 s at 0 and 42.9 s
# at 5).
WORKER_NICENESS = 5
REBUILD_CHUNK = 500  # unchanged sources read back per step of a full index build
SUMMARY_PATHS = 100
GC_THRESHOLD = 100_000  # allocations between collections (the default is 700)


@dataclass
class IngestReport:
    generation: generations.GenerationRef | None
    parent: generations.GenerationRef | None
    created: bool
    scanned: int = 0
    unchanged: int = 0
    new_revisions: int = 0
    new_sources: int = 0
    removed_sources: int = 0
    claims_added: int = 0
    claims_removed: int = 0
    claims_changed: int = 0  # same claim, new status or evidence
    bytes_read: int = 0
    index_rebuilt: bool = False
    index_built_from: str | None = None  # "spare" | "parent" | "ledger", for a new generation
    indexes_pruned: int = 0
    index_spare_made: bool = False
    findings: list[Finding] = field(default_factory=list)
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
                "claims_added": self.claims_added,
                "claims_removed": self.claims_removed,
                "claims_changed": self.claims_changed,
                "bytes_read": self.bytes_read,
            },
            "index_rebuilt": self.index_rebuilt,
            # How the new generation's index was made and how many old ones were pruned.
            "index": {
                "built_from": self.index_built_from,
                "pruned": self.indexes_pruned,
                "spare_made": self.index_spare_made,
            },
            "findings": [f.to_json() for f in sorted(self.findings)],
            "seconds": round(self.seconds, 3),
        }


def _insert_ignore(conn: Connection, table: Table, rows: Sequence[Sequence[Any]]) -> None:
    """Rows of immutable objects, as tuples in the table's column order; a row whose ID is
    already there is the same row (content-addressed), so it is skipped."""
    insert_rows(conn, table.name, [c.name for c in table.columns], rows, existing="skip")


@functools.cache
def _worker_store(raw_root: Path) -> DiskBlobStore:
    """A worker's view of the raw store, one for the whole ingest: the packs' tables are read
    once."""
    return DiskBlobStore(raw_root)


def _process_chunk(tasks: list[FileTask], box: int, raw_root: Path) -> tuple[int, int]:
    """A chunk's results, pickled into `box` (one of `_Boxes`); returns the box and their
    length, all that crosses the pool's pipe (`_Boxes.take`'s arguments)."""
    data = pickle.dumps(process_chunk(tasks, _worker_store(raw_root)), pickle.HIGHEST_PROTOCOL)
    faults.point("ingest.hand_over")  # where a box's memory may run out
    with memoryview(data) as view:
        done = 0
        while done < len(view):
            done += os.pwrite(box, view[done:], done)
    return box, len(data)


class _Boxes:
    """Where workers leave their chunks' results for the writer: one file in memory for each
    chunk that may be handed out and not yet taken (chunk i uses box i % count), made before
    the pool forks, so every worker holds them too, and gone when the last holder closes them.

    A chunk's pickled results are about 3 MB. Sent back through the pool's pipe, they crossed
    64 KiB at a time: the worker waited whenever the pipe was full, and the pool's result thread
    took the GIL from the writer for every piece (ADR 0026 had shortened the switch interval to
    0.5 ms for it). Now a worker writes them here in one call and the writer reads them in one
    (ADR 0029). A box is emptied as it is read, and reused only for a chunk handed out after
    that: no more than `count` chunks are ever out at once (`_results`' window).
    """

    def __init__(self, count: int) -> None:
        self.fds: list[int] = []
        try:
            for _ in range(count):
                self.fds.append(_memory_file())
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> _Boxes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def box(self, chunk: int) -> int:
        return self.fds[chunk % len(self.fds)]

    def take(self, fd: int, length: int) -> bytes:
        """The `length` bytes a worker left in box `fd`, which is emptied."""
        parts, got = [], 0
        while got < length:  # one read, but for pickles past what one `pread` may return
            part = os.pread(fd, length - got, got)
            if not part:  # never expected: nothing else writes or truncates a box
                raise RaytError(
                    f"a worker's results were cut short ({got} of {length} bytes)",
                    code="internal_error",
                )
            parts.append(part)
            got += len(part)
        os.ftruncate(fd, 0)  # its memory back at once
        return b"".join(parts)  # the one part itself, not a copy, when there is one

    def close(self) -> None:
        while self.fds:
            os.close(self.fds.pop())


def _memory_file() -> int:
    """A file with no name, in memory where the system has such files: Linux's `memfd`, which
    no file system sync writes out and nothing can leave behind. Elsewhere, or where the call
    is refused (a sandbox), a temporary file, unlinked at once."""
    with contextlib.suppress(AttributeError, OSError):
        return os.memfd_create("raytsystem-results", os.MFD_CLOEXEC)
    fd, name = tempfile.mkstemp(prefix="raytsystem-results-")
    os.unlink(name)
    return fd


def _start_worker(parent: int) -> None:
    start_helper(parent)
    with contextlib.suppress(OSError):  # a process may not be allowed to change it: no matter
        os.nice(WORKER_NICENESS)


def _plan(files: int, jobs: int) -> tuple[int, int, int]:
    """How `_results` shares `files` among `jobs` processes: (files per chunk, chunks the
    workers hold at most, chunks handed out and not yet taken at most: `window`)."""
    workers = jobs - 1
    size = max(1, min(CHUNK, files // (jobs * 8) or 1))
    chunks = -(-files // size)
    # Chunks the workers have at most: enough that they never wait for this process, and no
    # more than their share, so that this one has chunks left to take.
    queued = max(2 * workers + 1, min(AHEAD // size, chunks * workers // jobs))
    return size, queued, max(2 * queued, AHEAD // size)


def _results(
    tasks: list[FileTask], store: DiskBlobStore, jobs: int, progress: Progress | None
) -> Generator[FileResult, None, None]:
    """Results in task order (sorted by path), as soon as each is ready.

    `jobs` processes share the work: this one, which also writes, and `jobs - 1` workers. The
    workers take chunks of files in order; whenever the next chunk to be taken is not ready,
    this process does the next one not yet handed out itself instead of waiting (ADR 0026).
    So no more processes are busy than there are jobs, and the writer's idle moments go to
    the files. Chunks handed out and not yet taken from here are at most `window`: AHEAD
    files, or twice what the workers may hold if that is more (768 files at 10,000 files on
    two cores), which keeps memory flat when the writer falls behind, whatever the
    workspace's size.
    """
    done, done_bytes = 0, 0

    def report(result: FileResult) -> FileResult:
        nonlocal done, done_bytes
        done += 1
        done_bytes += result.size
        if progress:
            progress("normalize", done, len(tasks), done_bytes)
        return result

    if jobs <= 1 or len(tasks) < PARALLEL_THRESHOLD:
        for i in range(0, len(tasks), CHUNK):
            for result in process_chunk(tasks[i : i + CHUNK], store):
                yield report(result)
        return
    workers = jobs - 1
    size, queued, window = _plan(len(tasks), jobs)
    chunks = [tasks[i : i + size] for i in range(0, len(tasks), size)]
    # Chunks in task order: a worker's future, or the results of one done here.
    slots: collections.deque[Future[tuple[int, int]] | list[FileResult]] = collections.deque()
    handed = 0  # chunks handed out (to a worker or done here)
    # Made before the pool, so the workers inherit them.
    with _Boxes(window) as boxes, _worker_pool(workers, store) as pool:
        try:
            while slots or handed < len(chunks):
                at_workers = sum(isinstance(slot, Future) for slot in slots)
                while handed < len(chunks) and at_workers < queued and len(slots) < window:
                    slots.append(
                        pool.submit(_process_chunk, chunks[handed], boxes.box(handed), store.root)
                    )
                    handed += 1
                    at_workers += 1
                head = slots[0]
                behind = isinstance(head, Future) and not head.done()
                if behind and handed < len(chunks) and len(slots) < window:
                    # The workers are behind: the next chunk, done here, rather than a wait
                    # (while the window has room: a file that takes a worker long holds the
                    # rest back).
                    slots.append(process_chunk(chunks[handed], store))
                    handed += 1
                    continue
                slots.popleft()
                faults.point("ingest.take_chunk")
                if isinstance(head, Future):
                    results: list[FileResult] = pickle.loads(boxes.take(*head.result()))
                else:
                    results = head
                for result in results:
                    yield report(result)
            if done != len(tasks):  # never expected
                raise RaytError(f"ingest got {done} of {len(tasks)} results", code="internal_error")
        except BrokenProcessPool as exc:
            raise RaytError(
                "a worker process died (killed, or out of memory); nothing of this run was "
                "committed: the previous generation is still current",
                code="worker_died",
            ) from exc


@contextlib.contextmanager
def _worker_pool(workers: int, store: DiskBlobStore) -> Iterator[ProcessPoolExecutor]:
    """The ingest's worker processes, and what is still queued at them cancelled at the end.

    A worker outliving a killed ingest would hold the writer lock (its flock is inherited) and
    wait for work forever: each one dies with the ingest (`_start_worker`). The first submit
    forks every worker, from the thread that submits: the main one."""
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_worker,
        initargs=(os.getpid(),),
    )
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _batches(items: Iterable[FileResult], size: int) -> Iterator[list[FileResult]]:
    batch: list[FileResult] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclass
class _Run:
    """What one ingest keeps between batches: small, whatever the workspace's size."""

    ws: Workspace
    ledger: Ledger
    blobs: DiskBlobStore
    stage: Staging
    parent: generations.GenerationRef | None
    active: dict[str, state.ActiveSource]
    report: IngestReport
    started_at: str
    side: Callable[..., Future[Any]]  # runs work on the ingest's side thread (`_side_thread`)
    # Opened on first use: a run that changes nothing never copies the parent's index.
    # Written on this thread: the workers keep both cores busy, and a writer thread of its
    # own only made the two SQLite connections contend (ADR 0015).
    open_index: Callable[[], index_file.IndexWriter]
    # Per changed source: its state, without claims (written ahead already) except for notes.
    states: dict[str, SourceState] = field(default_factory=dict)
    changed: dict[str, KeptFile] = field(default_factory=dict)
    removed_paths: list[str] = field(default_factory=list)
    spare: Future[bool] | None = None  # the spare copy of the new index, under way
    _index: index_file.IndexWriter | None = None

    @property
    def index(self) -> index_file.IndexWriter:
        if self._index is None:
            self._index = self.open_index()
        return self._index

    def abandon_index(self) -> None:
        if self._index is not None:
            self._index.abandon()

    @property
    def index_built_from(self) -> str | None:
        if self._index is None:
            return None
        return self._index.built_from

    @contextlib.contextmanager
    def settling_index(self) -> Iterator[None]:
        """The index writes out what it holds in memory (`IndexWriter.settle`) on another
        thread while the body runs (the ledger's commit: the two are about as long, 0.4 s at
        10,000 files, and each waits on its own file); its error, if any, is raised after."""
        if self._index is None:
            yield
            return
        settled = self.side(self._index.settle)
        try:
            yield
        finally:
            _wait_out(settled)  # on a failure the index is abandoned next: not while it commits
        settled.result()

    def take(self, batch: list[FileResult]) -> None:
        """Record one batch of results (rows, staged states, index rows), keeping of each
        new file only what the end of the ingest reads (`KeptFile`)."""
        # Each new result with its source's ID (derived from the path once, used four times).
        new = [(r, source_id_for(r.path)) for r in batch if r.outcome == "new"]
        for r in batch:
            self.report.bytes_read += r.size
            if r.finding:
                self.report.findings.append(r.finding)
            self.report.findings.extend(r.findings)
            if r.outcome == "unchanged":
                self.report.unchanged += 1
            elif r.outcome == "skipped" and r.path in self.active:
                self.removed_paths.append(r.path)  # its content can no longer be ingested
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
            _write_objects(conn, new, self.started_at, ())
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


_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)


def _wait_out(future: Future[Any]) -> None:
    """Wait until `future` is done, whatever it raised and however often Ctrl-C is pressed
    meanwhile (re-raised once it is done); its own error is dropped: the caller has one."""
    interrupted = False
    while not future.done():
        try:
            concurrent.futures.wait([future])
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt


@contextlib.contextmanager
def _side_thread() -> Iterator[Callable[..., Future[Any]]]:
    """A thread for the writer's work that can run beside its own (the index settling during
    the ledger's commit, the spare copy during the generation's transaction): a `submit`.
    Whatever ends the ingest, everything submitted is done before this exits, however often
    Ctrl-C is pressed meanwhile: the writer lock is released after."""
    submitted: list[Future[Any]] = []
    with ThreadPoolExecutor(1, thread_name_prefix="ingest-side") as pool:

        def submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
            submitted.append(pool.submit(fn, *args))
            return submitted[-1]

        try:
            yield submit
        finally:
            for future in submitted:
                _wait_out(future)


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


@contextlib.contextmanager
def _few_collections() -> Iterator[None]:
    """Run the cyclic garbage collector less often while ingesting (workers inherit this).

    An ingest allocates millions of small, acyclic objects (parser tokens, row tuples, the
    rows unpickled from workers); with the default threshold the collector runs every 700
    allocations and re-walks them, about a tenth of the parent's time. Reference counting still
    frees everything at once; only cycles wait a little longer.
    """
    old = gc.get_threshold()
    gc.freeze()  # what exists already (modules, the active sources) is never walked again
    gc.set_threshold(GC_THRESHOLD, old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def ingest(
    ws: Workspace,
    ledger: Ledger,
    scope: Sequence[str] = (),
    *,
    jobs: int | None = None,
    lock_timeout: float = 30.0,
    progress: Progress | None = None,
) -> IngestReport:
    started = time.monotonic()
    started_at = now_iso()
    jobs = jobs or min(os.cpu_count() or 1, 8)
    blobs = DiskBlobStore(ws.raw_dir)
    with (
        writer_lock(ws.state_dir, ledger, lock_timeout),
        staging(ledger) as stage,
        blobs.staging_area() as staging_dir,
        _few_collections(),
        _side_thread() as side,
    ):
        _settle_id_scheme(ledger, ws.config.ids.scheme)  # before any ID is derived
        with ledger.reading() as conn:
            parent = generations.head(conn)
            active = state.active_sources(conn, parent.number if parent else None)
        report = IngestReport(generation=parent, parent=parent, created=False)
        left = stage.start(parent.number + 1 if parent else 1)
        if left:
            report.findings.append(
                Finding(
                    "interrupted_ingest",
                    "ledger",
                    f"removed {left} claim states an earlier ingest wrote but never made "
                    "current (it was killed or failed before its last transaction)",
                    "info",
                )
            )
        cache = StatCache(ws.state_dir / "statcache.sqlite3", parent.hash if parent else None)

        candidates: list[Candidate] = []
        scanned_ns = time.time_ns()  # before any file's stat is taken (the stat cache's clock)
        for item in ws.discover(scope):
            if isinstance(item, Refusal):
                if item.code == "path_not_found" and any(map(_scope_filter([item.path]), active)):
                    continue  # a known source that was deleted: recorded as gone below
                report.findings.append(Finding(item.code, item.path, item.message))
            else:
                candidates.append(item)
        report.scanned = len(candidates)
        seen = {c.path for c in candidates} | {
            f.subject for f in report.findings if f.code != "path_not_found"
        }
        in_scope = _scope_filter(scope)

        tasks: list[FileTask] = []
        for c in candidates:
            a = active.get(c.path)
            if (
                a
                and cache.fresh(c.path, c.stat, a.revision_id)
                and a.adapter == _current_adapter(c.path)
            ):
                report.unchanged += 1
                continue
            tasks.append(
                FileTask(
                    c.path,
                    c.disk,
                    staging_dir,
                    ws.config.ingest.max_file_bytes,
                    ledger.ids.number,
                    a.blob if a else None,
                    a.adapter if a else None,
                    a.text_blob if a else None,
                )
            )

        parent_index = (
            index_file.index_path(ws.index_dir, parent.number, parent.hash) if parent else None
        )
        usable_parent = (
            parent is not None
            and parent_index is not None
            and index_file.usable(parent_index, parent.hash)
        )
        run = _Run(
            ws,
            ledger,
            blobs,
            stage,
            parent,
            active,
            report,
            started_at,
            side,
            functools.partial(
                index_file.IndexWriter,
                ws.index_dir,
                parent=parent_index if usable_parent else None,
                parent_hash=parent.hash if parent else None,
                spare=(
                    index_file.spare_for(ws.index_dir, parent_index, ws.config.index.keep)
                    if usable_parent and parent_index
                    else None
                ),
            ),
        )
        run.removed_paths = sorted(p for p in active if in_scope(p) and p not in seen)
        try:
            with contextlib.closing(_results(tasks, blobs, jobs, progress)) as results:
                for batch in _batches(results, BATCH):
                    run.take(batch)
            with run.settling_index():
                stage.commit()  # the manual layer reads the ledger on connections of its own
            faults.point("ingest.after_normalize")
            generation = _finish(run, usable_parent, started)
        except BaseException:
            run.abandon_index()
            raise

        if report.created and generation is not None:
            report.index_built_from = run.index_built_from
            new_index = index_file.index_path(ws.index_dir, generation.number, generation.hash)
            first = [new_index] + ([parent_index] if parent_index else [])
            pruned = index_file.prune(ws.index_dir, ws.config.index.keep, first)
            report.indexes_pruned = len(pruned)
        report.index_spare_made = run.spare is not None and run.spare.result()
        if tasks or report.created:
            # Otherwise every file looked at was trusted by the cache, for this generation,
            # and nothing else changed: writing the cache again would change nothing.
            stat_entries = [
                (c.path, c.stat, rev)
                for c in candidates
                if (rev := _cached_revision(c.path, active, run.changed))
            ]
            current = generation or parent
            cache.save(
                current.hash if current else None,
                stat_entries,
                scanned_ns,
                keep=lambda path: not in_scope(path),  # what an ingest of PATHS did not look at
            )
        report.seconds = time.monotonic() - started
        return report


def _settle_id_scheme(ledger: Ledger, named: int) -> None:
    """Derive IDs by the ledger's scheme, which must be the one raytsystem.toml names: one
    ledger never mixes schemes (ADR 0030)."""
    recorded = record_id_scheme(ledger, named)
    if recorded != named:
        raise WorkspaceError(
            f"this ledger's IDs are derived by ID scheme {recorded}, and "
            f"raytsystem.toml's [ids] scheme is {named} (1 when it names none). A ledger keeps "
            f"the scheme it was made with: set `scheme = {recorded}` under [ids], or "
            "ingest into a new ledger (move .raytsystem/ aside, or use a new database; claim "
            "IDs quoted in notes then change)",
            code="id_scheme_mismatch",
        )


def _finish(run: _Run, usable_parent: bool, started: float) -> generations.GenerationRef | None:
    """Manual layer, then the new generation if anything changed (None if nothing did)."""
    report, parent, active = run.report, run.parent, run.active
    removed = {active[p].source_id for p in run.removed_paths} - set(run.states)
    with run.ledger.reading() as conn:
        manual = resolve_manual(
            conn,
            run.blobs,
            parent.number if parent else None,
            active,
            run.changed,
            run.states,
            removed,
            run.stage,
            chain_ids(run.ledger.ids),
        )
    report.findings.extend(manual.findings)
    with run.stage.transaction() as conn:
        _write_objects(conn, (), run.started_at, manual.evidence)
        for sid, s in manual.states.items():
            run.states[sid] = s
            run.stage.put_claims(sid, s.claims)
    faults.point("ingest.after_objects")
    if manual.states:
        with run.ledger.reading() as conn:
            run.index.replace(
                index_rows(
                    conn,
                    run.blobs,
                    [
                        SourceForIndex(s.source_id, s.path, s.normalization_id, s.claims)
                        for s in manual.states.values()
                    ],
                )
            )
    report.new_revisions = sum(
        1
        for r in run.changed.values()
        if (a := active.get(r.path)) is None or a.revision_id != r.revision_id
    )
    report.new_sources = sum(1 for p in run.changed if p not in active)
    by_id = {a.source_id: a for a in active.values()}
    differing = {
        sid: s for sid, s in run.states.items() if sid not in by_id or by_id[sid].digest != s.digest
    }
    if not differing and not removed:
        run.abandon_index()
        if parent is not None and not usable_parent:
            # A machine that shares the ledger (or lost its .raytsystem/indexes) gets the
            # current generation's index back from the ledger.
            with run.ledger.reading() as conn:
                rebuild(run.ws.index_dir, conn, run.blobs, parent)
            report.index_rebuilt = True
        report.seconds = time.monotonic() - started
        with run.stage.transaction() as conn:
            run.stage.keep_only(())  # what the manual layer restated, the same as before
            _record_run(conn, run.started_at, None, report)
        return None

    run.index.delete(sorted(removed))
    if parent is not None and not usable_parent:
        _index_unchanged_sources(run, parent, set(differing) | removed)
    number = parent.number + 1 if parent else 1
    digests = {a.source_id: a.digest for a in active.values()}
    for sid in removed:
        digests.pop(sid, None)
    digests.update({sid: s.digest for sid, s in differing.items()})
    manifest = manifest_digest(digests)
    ghash = generation_hash(number, parent.hash if parent else None, manifest)
    faults.point("ingest.before_index")
    path = index_file.index_path(run.ws.index_dir, number, ghash)
    run.index.finish(path, ghash, number)
    with index_file.open_index(path, ghash):
        pass  # the index opens and records this generation: it is complete
    faults.point("ingest.after_index")
    if index_file.wants_spare(run.ws.index_dir, run.ws.config.index.keep):
        # Copied while the ledger's transaction runs (the copy waits on the disk, the
        # transaction mostly on the CPU): a spare made for a generation whose transaction then
        # fails is still a good spare.
        run.spare = run.side(index_file.make_spare, run.ws.index_dir, path)

    paths = {a.source_id: a.path for a in active.values()}
    added_paths = sorted(s.path for sid, s in differing.items() if sid not in by_id)
    removed_list = sorted(paths.get(s, s) for s in removed)
    created_at = now_iso()
    with run.stage.transaction(final=True) as conn:
        current = generations.head(conn)
        if (current.hash if current else None) != (parent.hash if parent else None):
            raise RaytError(
                "the current generation moved while this ingest ran", code="generation_moved"
            )
        run.stage.keep_only(differing)
        run.stage.put_sources(differing.values(), removed, parented=by_id)
        added, closed, restated = run.stage.apply()
        report.claims_added, report.claims_removed, report.claims_changed = added, closed, restated
        report.removed_sources = len(removed)
        claim_count = (parent.claim_count if parent else 0) + added - closed
        summary = {
            "sources_added": len(added_paths),
            "sources_changed": len([sid for sid in differing if sid in by_id]),
            "sources_removed": len(removed_list),
            "sources_added_paths": added_paths[:SUMMARY_PATHS],
            "sources_removed_paths": removed_list[:SUMMARY_PATHS],
            "claims_added": added,
            "claims_removed": closed,
            "claims_changed": restated,
        }
        conn.execute(
            insert(Generation),
            {
                "hash": ghash,
                "number": number,
                "parent_hash": parent.hash if parent else None,
                "manifest_digest": manifest,
                "created_at": created_at,
                "source_count": len(digests),
                "claim_count": claim_count,
                "summary": json.dumps(summary, sort_keys=True, ensure_ascii=False),
            },
        )
        faults.point("ingest.before_head")
        if current is None:
            conn.execute(
                insert(Head),
                {"name": "current", "generation_hash": ghash, "number": number},
            )
        else:
            moved = conn.execute(
                update(Head)
                .where(Head.c.name == "current", Head.c.generation_hash == current.hash)
                .values(generation_hash=ghash, number=number)
            )
            if moved.rowcount != 1:
                raise RaytError("the head moved during ingest", code="generation_moved")
        generation = generations.GenerationRef(
            number,
            ghash,
            parent.hash if parent else None,
            manifest,
            created_at,
            len(digests),
            claim_count,
            summary,
        )
        report.generation = generation
        report.created = True
        report.seconds = time.monotonic() - started
        _record_run(conn, run.started_at, ghash, report)
    faults.point("ingest.after_commit")
    return generation


def _index_unchanged_sources(run: _Run, parent: generations.GenerationRef, skip: set[str]) -> None:
    """Without a usable parent index, the new index needs the unchanged sources' rows too."""
    keep = sorted(
        (
            a
            for a in run.active.values()
            if a.source_id not in skip and a.source_id not in run.states
        ),
        key=lambda a: a.path,
    )
    for i in range(0, len(keep), REBUILD_CHUNK):
        part = keep[i : i + REBUILD_CHUNK]
        with run.ledger.reading() as conn:
            claims = state.claim_states(conn, parent.number, [a.source_id for a in part])
            run.index.replace(
                index_rows(
                    conn,
                    run.blobs,
                    [
                        SourceForIndex(
                            a.source_id,
                            a.path,
                            a.normalization_id,
                            [c for _, c in claims.get(a.source_id, [])],
                        )
                        for a in part
                    ],
                )
            )


def _scope_filter(scope: Sequence[str]) -> Callable[[str], bool]:
    prefixes = [s.rstrip("/") for s in scope if s]
    if not prefixes:
        return lambda _p: True
    return lambda p: any(p == s or p.startswith(s + "/") for s in prefixes)


def _current_adapter(path: str) -> str:
    return _adapter_key_for(media_type_for(path))


@functools.lru_cache(maxsize=16)
def _adapter_key_for(media_type: str) -> str:
    return adapter_key(adapter_for(media_type))


def _cached_revision(
    path: str, active: dict[str, state.ActiveSource], changed: dict[str, KeptFile]
) -> str:
    if path in changed:
        return changed[path].revision_id
    a = active.get(path)
    return a.revision_id if a else ""


def _write_objects(
    conn: Connection,
    results: Iterable[tuple[FileResult, str]],
    seen_at: str,
    extra_evidence: Sequence[EvidenceRow],
) -> None:
    """The immutable rows of these results (each with its source's ID); segments, claims and
    evidence are already tuples in their tables' column order (`FileResult`)."""
    sources: list[tuple[Any, ...]] = []
    revisions: list[tuple[Any, ...]] = []
    normalizations: list[tuple[Any, ...]] = []
    segments: list[tuple[Any, ...]] = []
    claims: list[tuple[Any, ...]] = []
    evidence: list[tuple[Any, ...]] = list(extra_evidence)
    for r, sid in results:
        sources.append(_row(Source, id=sid, path=r.path, first_seen_at=seen_at))
        revisions.append(
            _row(
                Revision,
                id=r.revision_id,
                source_id=sid,
                blob=r.blob,
                size=r.size,
                media_type=r.media_type,
                first_seen_at=seen_at,
            )
        )
        normalizations.append(_row(Normalization, **r.normalization))
        segments.extend(r.segments)
        claims.extend(r.claims)
        evidence.extend(r.evidence)
    _insert_ignore(conn, Source, sources)
    _insert_ignore(conn, Revision, revisions)
    _insert_ignore(conn, Normalization, normalizations)
    _insert_ignore(conn, Segment, segments)
    _insert_ignore(conn, Claim, claims)
    _insert_ignore(conn, Evidence, evidence)


def _row(table: Table, **values: Any) -> tuple[Any, ...]:
    """A row as a tuple in its table's column order (a missing or extra value is a KeyError)."""
    columns = [c.name for c in table.columns]
    if len(values) != len(columns):
        raise KeyError(f"{table.name}: {sorted(set(values) ^ set(columns))}")
    return tuple(values[c] for c in columns)


def _record_run(conn: Connection, started_at: str, ghash: str | None, report: IngestReport) -> None:
    conn.execute(
        insert(IngestRun),
        {
            "started_at": started_at,
            "finished_at": now_iso(),
            "generation_hash": ghash,
            "summary": json.dumps(report.to_json(), ensure_ascii=False, sort_keys=True),
        },
    )
