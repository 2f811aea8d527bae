"""One writer at a time per workspace and per ledger.

Writers (ingest, index rebuild, review) hold, for their whole run:
- an exclusive `flock` on `.raytsystem/writer.lock`, which guards the workspace's local files
  (index files, stat cache) and, with the embedded SQLite ledger, the ledger itself;
- with PostgreSQL, also a session advisory lock on the shared database, so two machines that
  share one ledger never write generations at the same time.

The kernel drops a flock, and PostgreSQL an advisory lock, when their holder dies, so a crash
never leaves a stale lock. A second writer waits up to `timeout` seconds, then fails `locked`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..errors import Locked

if TYPE_CHECKING:
    from .db import Ledger

T = TypeVar("T")
LOCK_NAME = "writer.lock"

# pg_advisory_lock takes a bigint key; every raytsystem process uses this fixed one.
ADVISORY_KEY = 0x5A7C_91D3_0E4B_6F12
_POLL = 0.05


@contextlib.contextmanager
def file_lock(path: Path, timeout: float) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise Locked(
                        f"another raytsystem process is writing to this workspace "
                        f"(lock {path}); waited {timeout:g}s",
                        lock=str(path),
                    ) from None
                time.sleep(_POLL)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def advisory_lock(ledger: Ledger, timeout: float) -> Iterator[None]:
    from sqlalchemy import text

    with ledger.engine.connect() as conn:
        deadline = time.monotonic() + timeout
        while not conn.execute(
            text("SELECT pg_try_advisory_lock(:k)"), {"k": ADVISORY_KEY}
        ).scalar():
            conn.rollback()
            if time.monotonic() >= deadline:
                raise Locked(
                    f"another raytsystem process is writing to this ledger; waited {timeout:g}s",
                    lock="postgresql advisory lock",
                )
            time.sleep(_POLL)
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": ADVISORY_KEY})
            conn.commit()


@contextlib.contextmanager
def writer_lock(state_dir: Path, ledger: Ledger | None, timeout: float) -> Iterator[None]:
    """The workspace's file lock, plus the ledger's advisory lock when it is PostgreSQL."""
    deadline = time.monotonic() + timeout
    with file_lock(state_dir / LOCK_NAME, timeout):
        if ledger is not None and ledger.dialect == "postgresql":
            with advisory_lock(ledger, max(0.0, deadline - time.monotonic())):
                yield
        else:
            yield


def without_writer(state_dir: Path, look: Callable[[], T]) -> T | None:
    """`look()`, run while no writer runs in this workspace, or None if one runs now.

    A shared `flock` on the writers' lock file, which each writer holds exclusively for its
    whole run, is held while `look` runs: no writer starts meanwhile (one that tries waits,
    then takes it). Nothing is created or written: without a lock file no writer has started,
    and if one makes it while `look` runs, that is taken as a writer running."""
    path = state_dir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        found = look()
        return None if path.exists() else found
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        try:
            return look()
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
