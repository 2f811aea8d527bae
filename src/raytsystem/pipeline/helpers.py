"""Helper processes that read the ledger beside a command (`verify`), one connection each.

They are started with multiprocessing's "spawn", not forked: the command holds the ledger
open, and SQLite's per-process bookkeeping of file locks does not survive a fork (a forked
process opening the same file may read without the locks a concurrent writer's checkpoint
respects). Spawning costs a fresh interpreter per helper, about half a second, and the usual
"spawn" rule: a script that runs such a command in process guards its entry point with
`if __name__ == "__main__":` (raytsystem's own `__main__` does). ADR 0024.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Iterator
from multiprocessing.pool import Pool

from sqlalchemy import Connection, Engine

from ..ids import current_scheme, use_scheme
from ..storage.db import ledger_engine
from ..storage.sqlite_tuning import tune_process
from ..syscalls import start_helper

_engine: Engine | None = None  # a helper's ledger (`helper_engine`)


@contextlib.contextmanager
def ledger_helpers(conn: Connection, processes: int) -> Iterator[Pool]:
    """A pool of `processes` helpers, each with the ledger `conn` reads open on an engine of its
    own (`helper_engine`). Leaving the block stops them at once, whatever they are doing: the
    command's results are in, or it failed or was interrupted (helpers leave Ctrl-C to it)."""
    url = conn.engine.url.render_as_string(hide_password=False)
    ctx = multiprocessing.get_context("spawn")
    args = (os.getpid(), url, current_scheme())
    with ctx.Pool(processes, initializer=_start, initargs=args) as pool:
        yield pool


def _start(parent: int, url: str, id_scheme: int) -> None:
    global _engine
    start_helper(parent)
    tune_process()  # as the command did: this process has no connection yet
    use_scheme(id_scheme)  # the ledger's, which the command set (a spawned process starts anew)
    _engine = ledger_engine(url)


def helper_engine() -> Engine:
    """The ledger, in a helper process of `ledger_helpers`."""
    assert _engine is not None, "only a helper started by ledger_helpers has the ledger"
    return _engine
