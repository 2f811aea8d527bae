"""One writer at a time per workspace.

Writers (ingest, index rebuild, review) hold an exclusive `flock` on `.raytsystem/writer.lock`
for their whole run. The kernel drops the lock when the process dies, so a crash never leaves a
stale lock behind. A second writer waits up to `timeout` seconds, then fails with `locked`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import Locked


@contextlib.contextmanager
def writer_lock(path: Path, timeout: float) -> Iterator[None]:
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
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
