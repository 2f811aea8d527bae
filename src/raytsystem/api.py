"""The service layer: one workspace and its ledger, and every operation on them.

`Session` is what the front ends (the CLI, the MCP server, the Universe server) call, and the
Python API a program imports:

    from raytsystem.api import Session

    with Session.open("/path/to/workspace") as kb:
        kb.ingest()
        answer = kb.query("How long do refunds take?")
        for citation in answer.citations:
            print(citation.claim.statement, citation.claim.evidence[0].source_path)

A session opens what an operation needs when it runs and closes it after: a query reads the
ledger through a read-only snapshot (`storage.reader`: no SQLAlchemy, a fast start), the
others through the ledger's engine, opened once per session; writers take the writer lock.
Errors are `errors.RaytError`s with stable codes. Every answer (`query`, `search`, `bundle`)
carries the workspace's freshness against its generation, attached here for every front end
(the session's `freshness` mode: "track", "check", "fork", "off"; `pipeline.freshness`).
A query's meaning gap uses the model `[meaning]` names, read once per session (ADR 0043).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .workspace import REVIEWS_DIR, Workspace, init_workspace

if TYPE_CHECKING:
    from .pipeline.freshness import FreshAnswer as FreshAnswer
    from .pipeline.freshness import Freshness as Freshness
    from .pipeline.freshness import Probe, Tracker
    from .pipeline.ingest import IngestReport as IngestReport
    from .pipeline.meaning import Meaning
    from .pipeline.query import Answer as Answer
    from .pipeline.query import Citation as Citation
    from .pipeline.scan import ScanReport as ScanReport
    from .pipeline.verify_report import VerifyReport as VerifyReport
    from .pipeline.watch import WatchEvent as WatchEvent
    from .pipeline.watch import stop_on_signals as stop_on_signals
    from .progress import Progress
    from .storage.blobs import DiskBlobStore
    from .storage.db import Ledger
    from .storage.reader import Reader

# Result types and helpers for front ends, imported when first asked for (cheap to import).
_LAZY = {
    "Answer": ("pipeline.query", "Answer"),
    "FreshAnswer": ("pipeline.freshness", "FreshAnswer"),
    "Freshness": ("pipeline.freshness", "Freshness"),
    "Citation": ("pipeline.query", "Citation"),
    "IngestReport": ("pipeline.ingest_run", "IngestReport"),
    "ScanReport": ("pipeline.scan", "ScanReport"),
    "VerifyReport": ("pipeline.verify_report", "VerifyReport"),
    "WatchEvent": ("pipeline.watch", "WatchEvent"),
    "prepare_process": ("storage.sqlite_tuning", "tune_process"),  # before SQLite is opened
    "stop_on_signals": ("pipeline.watch", "stop_on_signals"),  # around `Session.watch`
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __package__), attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DEFAULT_LOCK_TIMEOUT = 30.0
DEFAULT_MAX_NODES = 20_000  # nodes the Universe page draws by default (`graph`)
# "track": one walk, then the OS's change notifications (a long-lived process); "check": a
# bounded walk per answer, in a thread; "fork": the same in a child process (the CLI's).
FRESHNESS_MODES = ("track", "check", "fork", "off")


class Session:
    """A workspace (`ws`) with its ledger (`database_url`; default: its embedded SQLite one).
    Paths given to its operations are relative to `cwd` (default: the root) or absolute."""

    def __init__(
        self,
        ws: Workspace,
        database_url: str | None = None,
        *,
        cwd: Path | None = None,
        freshness: str = "track",
    ) -> None:
        if freshness not in FRESHNESS_MODES:
            raise ValueError(f"freshness mode {freshness!r} is not one of {FRESHNESS_MODES}")
        self.ws = ws
        self.database_url = database_url or ws.default_database_url
        self.cwd = cwd or ws.root
        self.freshness_mode = freshness
        self._ledger: Ledger | None = None
        self._tracker: Tracker | None = None
        self._meaning: Meaning | None = None

    @classmethod
    def open(
        cls,
        workspace: str | Path | None = None,
        *,
        database_url: str | None = None,
        cwd: Path | None = None,
        freshness: str = "track",
    ) -> Session:
        """The workspace at `workspace`, or the nearest one at or above `cwd`."""
        here = cwd or Path.cwd()
        ws = Workspace.named(here / workspace) if workspace else Workspace.find(here)
        return cls(ws, database_url, cwd=here, freshness=freshness)

    @classmethod
    def init(
        cls, folder: Path, *, database_url: str | None = None, cwd: Path | None = None
    ) -> tuple[Session, list[str]]:
        """Make `folder` a workspace (safe to run again) with its ledger; -> (session, created)."""
        folder.mkdir(parents=True, exist_ok=True)
        ws, created = init_workspace(folder)
        session = cls(ws, database_url, cwd=cwd)
        session.ledger(create=True)
        return session, created

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._tracker is not None:
            self._tracker.close()
            self._tracker = None
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None

    # --- what operations open ---------------------------------------------------------------

    def ledger(self, *, create: bool = False) -> Ledger:
        """The ledger, opened (migrated when behind) on first use; `create` may make one."""
        if self._ledger is None:
            from .storage.db import open_ledger

            if self.database_url == self.ws.default_database_url:
                self.ws.state_dir.mkdir(exist_ok=True)
            self._ledger = open_ledger(self.database_url, create=create)
        return self._ledger

    @property
    def blobs(self) -> DiskBlobStore:
        from .storage.blobs import DiskBlobStore

        return DiskBlobStore(self.ws.raw_dir)

    @contextlib.contextmanager
    def _reader(self) -> Iterator[Reader]:
        from .storage.reader import open_reader

        reader = open_reader(self.database_url)
        try:
            yield reader
        finally:
            reader.close()

    @contextlib.contextmanager
    def _writing(self, lock_timeout: float) -> Iterator[Ledger]:
        from .storage.lock import writer_lock

        ledger = self.ledger()
        with writer_lock(self.ws.state_dir, ledger, lock_timeout):
            yield ledger

    def workspace_path(self, path: str) -> str:
        """A path a user typed (relative to `cwd`, or absolute) as a workspace path."""
        return self.ws.rel_from_cli(path, self.cwd)

    # --- writing ---------------------------------------------------------------------------

    def ingest(
        self,
        paths: Sequence[str] = (),
        *,
        jobs: int | None = None,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        progress: Progress | None = None,
        allow_empty: bool = False,
        walk_ahead: bool = False,
    ) -> IngestReport:
        """Ingest the workspace (or only `paths`); make the next generation if anything changed
        (one dropping every source only with `allow_empty`). `walk_ahead`: walk in a forked
        child meanwhile, for a one-shot command that has started no thread (the CLI's)."""
        from .discovery import walk_in_child

        scope = [self.workspace_path(p) for p in paths]
        walked = walk_in_child(self.ws, scope) if walk_ahead else None
        try:
            from .pipeline.ingest import ingest

            return ingest(
                self.ws,
                self.ledger(create=True),
                scope,
                jobs=jobs,
                lock_timeout=lock_timeout,
                progress=progress,
                allow_empty=allow_empty,
                walked=walked,
                meaning=self.meaning(),
            )
        finally:
            if walked is not None:
                walked.close()  # an ingest that failed before it looked

    def watch(
        self,
        report: Callable[[WatchEvent], None],
        stop: threading.Event,
        *,
        debounce_ms: int | None = None,
        max_wait_ms: int | None = None,
        jobs: int | None = None,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        on_ingest: Callable[[bool], None] | None = None,
    ) -> int:
        """Ingest now and on every change of the workspace's files until `stop` is set (an
        ingest under way finishes); `report` gets each generation and failure. -> generations."""
        from .pipeline import watch

        return watch.watch(
            self.ws,
            lambda: self.ingest(jobs=jobs, lock_timeout=lock_timeout),
            report,
            stop,
            debounce_ms=debounce_ms or watch.DEBOUNCE_MS,
            max_wait_ms=max_wait_ms or watch.MAX_WAIT_MS,
            on_ingest=on_ingest,
        )

    def install_hooks(self) -> list[dict[str, str]]:
        """Git hooks (post-commit, post-merge, post-checkout) running an ingest, beside others."""
        from .githooks import install

        return install(self.ws.root, sys.executable)

    def uninstall_hooks(self) -> list[dict[str, str]]:
        """Remove what `install_hooks` added, and only that."""
        from .githooks import uninstall

        return uninstall(self.ws.root)

    def scan(self, paths: Sequence[str] = ()) -> ScanReport:
        """The ingest's secret and personal-data checks over the files, storing nothing."""
        from .pipeline.scan import scan

        return scan(self.ws, [self.workspace_path(p) for p in paths])

    def review(
        self, generation: str | None = None, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    ) -> dict[str, Any]:
        """Audit a generation: write its report under ops/reviews/ and a Review row."""
        from .pipeline.review import review
        from .storage import generations

        with self._writing(lock_timeout) as ledger, ledger.transaction() as conn:
            gen = generations.generation_or_head(conn, generation)
            reports, policy = self.ws.root / REVIEWS_DIR, self.ws.config.ingest.personal_data
            return review(conn, self.blobs, gen, reports, policy)

    def purge(
        self, target: str, reason: str, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    ) -> dict[str, Any]:
        """Remove a raw blob's bytes and its normalized texts' (`target`: its address, or a
        source's path for every revision), with a tombstone each."""
        from .pipeline.purge import purge
        from .storage.addresses import ADDRESS_RE

        if not ADDRESS_RE.fullmatch(target):
            target = self.workspace_path(target)
        with self._writing(lock_timeout) as ledger:
            return purge(ledger, self.blobs, target, reason).to_json()

    def rebuild_index(
        self,
        generation: str | None = None,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Rebuild a generation's index (default: the current one's) from the ledger alone."""
        from .pipeline.rebuild import rebuild_index

        with self._writing(lock_timeout) as ledger:
            return rebuild_index(ledger, self.ws.index_dir, self.blobs, generation, progress)

    def unpack(self, pack: str, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> dict[str, Any]:
        """Store each intact blob of a damaged pack on its own and remove the pack."""
        name = Path(pack).name  # as verify names it, or a path to it: the store checks the form
        with self._writing(lock_timeout):
            kept, damaged = self.blobs.unpack(name)
        return {"pack": name, "kept": len(kept), "damaged": damaged}

    # --- answering -------------------------------------------------------------------------

    def query(
        self,
        text: str,
        *,
        limit: int = 5,
        per_source: int = 2,
        generation: str | None = None,
        expect_generation: str | None = None,
    ) -> FreshAnswer:
        """An answer (`limit` citations at most; a source's past `per_source` demoted) or a gap;
        fails closed on a mismatch. Its `freshness`: does the workspace still match?"""
        probe = self._probe()  # first: the walk runs while the query's modules load
        from .pipeline.freshness import FreshAnswer
        from .pipeline.query import query

        with self._reader() as reader:
            answer = query(
                reader,
                self.blobs,
                self.ws.index_dir,
                text,
                limit=limit,
                per_source=per_source,
                generation=generation,
                expect_generation=expect_generation,
                meaning=self.meaning(),
            )
            fresh = None if probe is None else probe.result(reader, answer.generation)
        return FreshAnswer.of(answer, fresh)

    def search(
        self, text: str, *, limit: int = 10, claims: bool = False, generation: str | None = None
    ) -> dict[str, Any]:
        """The blocks (or confirmed claims) that hold the words; not a verified answer."""

        def run(reader: Reader) -> dict[str, Any]:
            from .pipeline.search import search

            kind = "claim" if claims else "segment"
            index_dir = self.ws.index_dir
            return search(
                reader, self.blobs, index_dir, text, limit=limit, kind=kind, generation=generation
            )

        return self._answering(run)

    def bundle(
        self, task: str, *, max_tokens: int = 4000, generation: str | None = None
    ) -> dict[str, Any]:
        """A deterministic, verified context bundle for an agent about to do `task`."""

        def run(reader: Reader) -> dict[str, Any]:
            from .pipeline.bundle import bundle

            index_dir = self.ws.index_dir
            return bundle(
                reader, self.blobs, index_dir, task, max_tokens=max_tokens, generation=generation
            )

        return self._answering(run)

    def freshness(self, generation: str | None = None) -> Freshness:
        """Whether the files still match `generation` (default: the current one)."""
        from .pipeline.freshness import Freshness
        from .storage import generations

        probe = self._probe()
        with self._reader() as reader:
            gen = generations.generation_or_head(reader, generation)
            if probe is None:
                return Freshness("unknown", 0, (), gen.number, "the check is off")
            return probe.result(reader, gen)

    def _probe(self) -> Probe | None:
        """Start looking at the workspace for an answer about to be made (None: "off");
        forked, the walk starts before this process imports the query's modules."""
        from .pipeline.freshness_walk import observe, observe_forked

        mode, ws = self.freshness_mode, self.ws
        if mode == "off":
            return None
        forked = observe_forked(ws) if mode == "fork" else None
        from .pipeline.freshness import Probe, Tracker

        if mode == "track":
            self._tracker = self._tracker or Tracker(ws)
            return self._tracker.probe()
        return Probe(forked or (lambda deadline: observe(ws, deadline)), None)

    def _answering(self, run: Callable[[Reader], dict[str, Any]]) -> dict[str, Any]:
        """`run`'s result with the workspace's freshness against its generation (the probe
        starts first: forked, its walk runs while `run` imports what it needs)."""
        probe = self._probe()
        with self._reader() as reader:
            result = run(reader)
            if probe is None:
                return result
            from .pipeline.freshness import with_freshness
            from .storage import generations

            answered = generations.generation(reader, result["generation"]["hash"])
            return with_freshness(result, probe.result(reader, answered))

    def evaluate(
        self, dataset: Path, *, k: int | None = None, generation: str | None = None
    ) -> dict[str, Any]:
        """Retrieval figures on a dataset of questions (`raytsystem eval`)."""
        from .pipeline.evaluate import evaluate, load_dataset

        data = load_dataset(dataset if dataset.is_absolute() else self.cwd / dataset)
        at = (self.blobs, self.ws.index_dir)
        with self._reader() as reader:
            return evaluate(reader, *at, data, k=k, generation=generation, meaning=self.meaning())

    def meaning(self) -> Meaning | None:
        """The model `[meaning]` names, read once per session (ADR 0043); None when off."""
        if self._meaning is None and self.ws.config.meaning.model:
            from .pipeline.meaning import Meaning

            self._meaning = Meaning.named(self.ws.root, self.ws.config.meaning, self.ws.state_dir)
        return self._meaning

    # --- looking -----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The workspace, the ledger, the current generation and the last ingest."""
        from .pipeline.show import status
        from .storage.db import redact

        ledger = self.ledger(create=True)
        with ledger.reading() as conn:
            return {
                "workspace": str(self.ws.root),
                "database": redact(ledger.url),
                "id_scheme": ledger.id_scheme,
                **status(conn),
            }

    def history(self, path: str) -> dict[str, Any]:
        """The revisions of the source at `path` and the generations each was active in."""
        from .pipeline.show import history

        rel = self.workspace_path(path)
        with self.ledger().reading() as conn:
            return history(conn, rel)

    def show(self, object_id: str) -> dict[str, Any]:
        """Any object with its chain, and the current generation."""
        from .pipeline.show import show
        from .storage import generations

        with self.ledger().reading() as conn:
            current = generations.head(conn)
            return {
                "current_generation": current.to_json() if current else None,
                **show(conn, self.blobs, object_id),
            }

    def generations(self) -> list[dict[str, Any]]:
        from .pipeline.show import list_generations

        with self.ledger().reading() as conn:
            return list_generations(conn)

    def diff(self, from_generation: str, to_generation: str) -> dict[str, Any]:
        """Claims added, removed and changed in status between two generations."""
        from .pipeline.show import diff

        with self.ledger().reading() as conn:
            return diff(conn, from_generation, to_generation)

    def verify(self, *, progress: Progress | None = None) -> VerifyReport:
        """The full integrity check; changes nothing."""
        from .pipeline.verify import verify

        ledger, at = self.ledger(), (self.blobs, self.ws.index_dir)
        with ledger.reading() as conn:
            return verify(conn, ledger.ids, *at, progress=progress, meaning=self.meaning)

    def graph(
        self, generation: str | None = None, max_nodes: int = DEFAULT_MAX_NODES
    ) -> dict[str, Any]:
        """The evidence graph of a generation (the Universe page's data)."""
        from .pipeline.graph import graph
        from .storage import generations

        with self.ledger().reading() as conn:
            gen = generations.generation_or_head(conn, generation)
            return graph(conn, gen, max_nodes=max_nodes)
