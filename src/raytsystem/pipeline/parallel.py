"""How an ingest shares its files among processes (ADR 0031).

`results` yields the files' results in path order while `jobs` processes derive them: the
writer itself and `jobs - 1` worker processes (forked, at a lower priority), which take
chunks of files in order. Whenever the next chunk is not ready, the writer does the next one
not yet handed out instead of waiting, so no more processes are busy than there are jobs.
A worker leaves a chunk's pickled results in a file held in memory (`ResultBoxes`), read
back in one call; only the box number and the length cross the pool's pipe.

Also here: the writer's side thread (`side_thread`), waiting out a future through Ctrl-C
(`wait_out`), batching results (`batches`) and a quieter garbage collector for the run
(`few_collections`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import gc
import multiprocessing
import os
import pickle
import tempfile
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, TypeVar

from .. import faults
from ..errors import RaytError
from ..progress import Progress
from ..storage.blobs import DiskBlobStore
from ..syscalls import start_helper
from .files import FileResult, FileTask, process_chunk

T = TypeVar("T")

PARALLEL_THRESHOLD = 64  # fewer files than this are done by the writer alone
CHUNK = 64  # files a worker takes at once; their new blobs make one pack (ADR 0025)
BATCH = 100  # results taken (blobs published, rows written) at once while the workers go on
AHEAD = 4 * BATCH  # files done or under way beyond what was taken: the bound `results` keeps
# Workers run this much nicer than the writer, the one serial part: when other work shares
# the machine, they leave it a core whenever it has work (ADR 0031).
WORKER_NICENESS = 5
GC_THRESHOLD = 100_000  # allocations between collections (the default is 700)


@contextlib.contextmanager
def few_collections() -> Iterator[None]:
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


@contextlib.contextmanager
def side_thread() -> Iterator[Callable[..., Future[Any]]]:
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
                wait_out(future)


def wait_out(future: Future[Any]) -> None:
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


def batches(items: Iterable[FileResult], size: int) -> Iterator[list[FileResult]]:
    batch: list[FileResult] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _memory_file() -> int:
    """A file with no name, in memory where the system has such files: Linux's `memfd`, which
    no file system sync writes out and nothing can leave behind. Elsewhere, or where the call
    is refused (a sandbox), a temporary file, unlinked at once."""
    with contextlib.suppress(AttributeError, OSError):
        return os.memfd_create("raytsystem-results", os.MFD_CLOEXEC)
    fd, name = tempfile.mkstemp(prefix="raytsystem-results-")
    os.unlink(name)
    return fd


class ResultBoxes:
    """Where workers leave their chunks' results for the writer: one file in memory for each
    chunk that may be handed out and not yet taken (chunk i uses box i % count), made before
    the pool forks, so every worker holds them too, and gone when the last holder closes them.

    Through the pool's pipe a chunk's results (megabytes) would cross 64 KiB at a time, the
    worker blocking whenever the pipe is full and the pool's result thread taking the GIL from
    the writer for every piece; here they are one write and one read (ADR 0031). A box is
    emptied as it is read, and reused only for a chunk handed out after that: no more than
    `count` chunks are ever out at once (`results`' window).
    """

    def __init__(self, count: int) -> None:
        self.fds: list[int] = []
        try:
            for _ in range(count):
                self.fds.append(_memory_file())
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> ResultBoxes:
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


@functools.cache
def _worker_store(raw_root: Path) -> DiskBlobStore:
    """A worker's view of the raw store, one for the whole ingest: the packs' tables are read
    once."""
    return DiskBlobStore(raw_root)


def _process_chunk(tasks: list[FileTask], box: int, raw_root: Path) -> tuple[int, int]:
    """A chunk's results, pickled into `box` (one of `ResultBoxes`); returns the box and their
    length, all that crosses the pool's pipe (`ResultBoxes.take`'s arguments)."""
    data = pickle.dumps(process_chunk(tasks, _worker_store(raw_root)), pickle.HIGHEST_PROTOCOL)
    faults.point("ingest.hand_over")  # where a box's memory may run out
    with memoryview(data) as view:
        done = 0
        while done < len(view):
            done += os.pwrite(box, view[done:], done)
    return box, len(data)


def _start_worker(parent: int) -> None:
    start_helper(parent)
    with contextlib.suppress(OSError):  # a process may not be allowed to change it: no matter
        os.nice(WORKER_NICENESS)


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


def _plan(files: int, jobs: int) -> tuple[int, int, int]:
    """How `results` shares `files` among `jobs` processes: (files per chunk, chunks the
    workers hold at most, chunks handed out and not yet taken at most: `window`)."""
    workers = jobs - 1
    size = max(1, min(CHUNK, files // (jobs * 8) or 1))
    chunks = -(-files // size)
    # Chunks the workers have at most: enough that they never wait for this process, and no
    # more than their share, so that this one has chunks left to take.
    queued = max(2 * workers + 1, min(AHEAD // size, chunks * workers // jobs))
    return size, queued, max(2 * queued, AHEAD // size)


def results(
    tasks: list[FileTask], store: DiskBlobStore, jobs: int, progress: Progress | None
) -> Generator[FileResult, None, None]:
    """Results in task order (sorted by path), as soon as each is ready.

    `jobs` processes share the work: this one, which also writes, and `jobs - 1` workers. The
    workers take chunks of files in order; whenever the next chunk to be taken is not ready,
    this process does the next one not yet handed out itself instead of waiting (ADR 0031).
    So no more processes are busy than there are jobs, and the writer's idle moments go to
    the files. Chunks handed out and not yet taken from here are at most `window`: AHEAD
    files, or twice what the workers may hold if that is more, which keeps memory flat when
    the writer falls behind, whatever the workspace's size.
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
    with ResultBoxes(window) as boxes, _worker_pool(workers, store) as pool:
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
