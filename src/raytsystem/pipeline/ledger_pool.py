"""Helper processes that read the ledger beside a command (`verify`), one connection each.

They are started with multiprocessing's "spawn", not forked: the command holds the ledger
open, and SQLite's per-process bookkeeping of file locks does not survive a fork (a forked
process opening the same file may read without the locks a concurrent writer's checkpoint
respects). Spawning costs a fresh interpreter per helper, about half a second, and the usual
"spawn" rule: a script that runs such a command in process guards its entry point with
`if __name__ == "__main__":` (raytsystem's own `__main__` does). ADR 0035.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from multiprocessing.pool import Pool
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine

from ..storage.db import ledger_engine
from ..storage.sqlite_tuning import tune_process
from ..syscalls import start_helper


class LedgerHelpers(NamedTuple):
    """Helper processes and the URL of the ledger they read: each task is given the URL and
    opens the ledger through `helper_engine(url)`."""

    pool: Pool
    url: str


@contextlib.contextmanager
def ledger_helpers(conn: Connection, processes: int) -> Iterator[LedgerHelpers]:
    """A pool of `processes` helpers for the ledger `conn` reads, each to open it on an engine
    of its own (`helper_engine`). Leaving the block stops them at once, whatever they are
    doing: the command's results are in, or it failed or was interrupted (helpers leave Ctrl-C
    to it)."""
    url = conn.engine.url.render_as_string(hide_password=False)
    ctx = multiprocessing.get_context("spawn")
    with _spawn_pool(ctx, processes) as pool:
        yield LedgerHelpers(pool, url)


def _spawn_pool(ctx: Any, processes: int) -> Pool:
    """The pool, its processes spawned with SIGINT ignored, a disposition they keep from
    their first instruction on: a spawned interpreter's imports come before its initializer
    could ignore Ctrl-C, and a Ctrl-C then printed their traceback. This process's own
    handler is back as soon as they are started."""
    if threading.current_thread() is not threading.main_thread():
        return ctx.Pool(processes, initializer=_start, initargs=(os.getpid(),))  # type: ignore[no-any-return]
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return ctx.Pool(processes, initializer=_start, initargs=(os.getpid(),))  # type: ignore[no-any-return]
    finally:
        signal.signal(signal.SIGINT, previous)


def _start(parent: int) -> None:
    start_helper(parent)
    tune_process()  # as the command did: this process has no connection yet


@functools.cache
def helper_engine(url: str) -> Engine:
    """The ledger at `url`, in a helper process of `ledger_helpers`: one engine for all the
    helper's tasks."""
    return ledger_engine(url)
