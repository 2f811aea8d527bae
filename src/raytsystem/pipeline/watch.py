"""WATCH: ingest whenever the workspace's files change (ADR 0039).

The OS's change notifications (watchfiles: inotify, FSEvents, ReadDirectoryChangesW) name the
paths that changed; the loop waits until they settle (no new change for `debounce_ms`, or at
most `max_wait_ms` after the first), then runs one ingest of the whole workspace, which finds
every change by the stat cache, however many notifications there were (one ingest for a
burst of thousands of files, not thousands). Editors that save in several steps
(rename-over, truncate-then-write) end as one settled change; one whose steps straddle the
debounce makes two generations, the last with the file as saved.

What never triggers an ingest: the workspace's own writes (`_raw/`, `.raytsystem/`,
`ops/reviews/`), `.git/`, and files the include/exclude globs do not select (an editor's
temporary files). A folder created, moved in or moved away does, and so does
`raytsystem.toml` (its globs are read again).

After an ingest the loop runs one more, `SETTLE_S` later, if nothing else changed meanwhile:
files saved less than 2 s before an ingest looked at them are not recorded in the stat cache
(ADR 0010), and this second look records them, so the freshness check vouches for them by
stat alone. It makes a generation only if a file changed unseen.

Stopping (`stop`, set by Ctrl-C through `stop_on_signals`) ends the loop between ingests; an
ingest that has started runs to its end. A second writer is met by the writer lock: the
ingest waits for it, and if it waits past its timeout the loop reports `locked` and tries
again `RETRY_S` later.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from ..config import CONFIG_NAME
from ..errors import RaytError
from ..workspace import RAW_DIR, REVIEWS_DIR, STATE_DIR, Workspace
from .ingest_run import IngestReport

DEBOUNCE_MS: Final = 300
MAX_WAIT_MS: Final = 10_000
SETTLE_S: Final = 2.5  # the stat cache's racy window (2 s), and a margin
RETRY_S: Final = 5.0
WAKE_MS: Final = 100  # how often the loop wakes without a change, to settle or retry
BATCH_MS: Final = 50  # notifications are handed over after this long without a new one


@dataclass(frozen=True)
class WatchEvent:
    """What the loop reports: a generation made, or an ingest that failed."""

    kind: str  # "generation" | "error"
    changes: int  # paths the notifications named since the previous ingest
    report: IngestReport | None = None
    error: RaytError | None = None

    def to_json(self) -> dict[str, Any]:
        if self.kind == "error" and self.error is not None:
            return {"event": "error", "changes": self.changes, **self.error.to_json()}
        assert self.report is not None
        return {"event": "generation", "changes": self.changes, **self.report.to_json()}

    def line(self) -> str:
        """One line for people."""
        if self.error is not None:
            return f"error[{self.error.code}]: {self.error.message}"
        r = self.report
        assert r is not None and r.generation is not None
        g = r.generation
        return (
            f"generation {g.number} {g.hash[:16]}: {r.new_revisions} new revisions "
            f"({r.new_sources} new sources), {r.removed_sources} removed, claims "
            f"+{r.claims_added} -{r.claims_removed} ~{r.claims_changed} "
            f"({r.seconds:.2f}s, after {self.changes} changed paths)"
        )


class Triggers:
    """Which notified paths call for an ingest."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.folders = self._folders()

    def _folders(self) -> set[str]:
        """The workspace's folders (relative), so a folder moved away can be told from an
        unselected file removed."""
        out: set[str] = set()
        root = str(self.ws.root)
        for folder, subdirs, _files in os.walk(root):
            rel = os.path.relpath(folder, root).replace(os.sep, "/")
            subdirs[:] = [d for d in subdirs if not self._reserved(_join(rel, d))]
            if rel != ".":
                out.add(unicodedata.normalize("NFC", rel))
        return out

    @staticmethod
    def _reserved(rel: str) -> bool:
        parts = rel.split("/")
        return (
            parts[0] in (RAW_DIR, STATE_DIR)
            or ".git" in parts
            or rel == REVIEWS_DIR
            or rel.startswith(REVIEWS_DIR + "/")
        )

    def __call__(self, _change: Any, path: str) -> bool:
        rel = os.path.relpath(path, self.ws.root).replace(os.sep, "/")
        if rel in (".", "..") or rel.startswith("../") or self._reserved(rel):
            return False
        rel = unicodedata.normalize("NFC", rel)
        if rel == CONFIG_NAME:
            return True
        if os.path.isdir(path) and not os.path.islink(path):
            self.folders.add(rel)
            return True
        if rel in self.folders:
            if not os.path.lexists(path):
                self.folders.discard(rel)
            return True
        try:
            return self.ws.selected(rel)
        except RaytError:
            return True  # raytsystem.toml is invalid now: the ingest says so


def _join(rel: str, name: str) -> str:
    return name if rel == "." else f"{rel}/{name}"


def watch(
    ws: Workspace,
    ingest: Callable[[], IngestReport],
    report: Callable[[WatchEvent], None],
    stop: threading.Event,
    *,
    debounce_ms: int = DEBOUNCE_MS,
    max_wait_ms: int = MAX_WAIT_MS,
    on_ingest: Callable[[bool], None] | None = None,
) -> int:
    """Ingest now, then whenever the workspace changes, until `stop` is set; call `report`
    for each generation made and each failed ingest. `on_ingest(True)` / `(False)` is called
    around each ingest. Returns the number of generations made.

    The notifications come unfiltered and in small batches (`BATCH_MS`), and the loop wakes
    at least every `WAKE_MS`: the filter and the debounce are applied here, by the clock, so
    that a steady stream of writes that trigger nothing (a reader's `-shm` file under
    `.raytsystem/`, say) never holds back an ingest that is due."""
    import watchfiles

    triggers = Triggers(ws)
    notifications = watchfiles.watch(
        ws.root,
        watch_filter=None,
        debounce=BATCH_MS,
        step=BATCH_MS,
        stop_event=stop,
        rust_timeout=WAKE_MS,
        yield_on_timeout=True,
        raise_interrupt=False,
        ignore_permission_denied=True,
    )
    quiet_s, most_s = debounce_ms / 1000, max_wait_ms / 1000
    made = 0
    pending = 0  # changed paths not ingested yet
    first = last = 0.0  # when the first and the latest of them came
    due: float | None = time.monotonic()  # when an ingest is due without a new change
    with contextlib.closing(notifications):
        next(notifications)  # the watcher is live before the first ingest looks
        while not stop.is_set():
            now = time.monotonic()
            settled = pending and (now - last >= quiet_s or now - first >= most_s)
            if settled or (not pending and due is not None and now >= due):
                if on_ingest:
                    on_ingest(True)
                try:
                    result = ingest()
                except RaytError as exc:
                    report(WatchEvent("error", pending, error=exc))
                    due = time.monotonic() + RETRY_S
                else:
                    if result.created and result.generation is not None:
                        report(WatchEvent("generation", pending, report=result))
                        made += 1
                    # A settling look after an ingest that changes set off (module docstring).
                    due = time.monotonic() + SETTLE_S if pending else None
                finally:
                    if on_ingest:
                        on_ingest(False)
                pending = 0
                continue
            try:
                changes = next(notifications)
            except StopIteration:
                break
            relevant = [p for c, p in changes if triggers(c, p)]
            if relevant:
                last = time.monotonic()
                if not pending:
                    first = last
                pending += len(relevant)
                if any(os.path.basename(p) == CONFIG_NAME for p in relevant):
                    ws.reload_config()  # the filter reads the globs through `ws`
    return made


@contextlib.contextmanager
def stop_on_signals(
    stop: threading.Event, busy: Callable[[], bool], said: Callable[[str], None]
) -> Iterator[None]:
    """Ctrl-C (SIGINT) and SIGTERM set `stop` instead of interrupting: the loop ends between
    ingests, and an ingest under way (`busy()`) runs to its end first. Only in the main
    thread (elsewhere, the caller sets `stop`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(_signum: int, _frame: Any) -> None:
        if not stop.is_set() and busy():
            said("stopping after the ingest under way")
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
