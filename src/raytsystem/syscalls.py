"""Two Linux system calls the standard library does not wrap, through ctypes.

Both are optimizations or safety nets with a portable fallback: where the call is missing (not
Linux, no C library), each function says so and the caller does the portable thing.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

PR_SET_PDEATHSIG: Final = 1  # prctl(2): the signal a process gets when its parent thread exits


@functools.cache
def _libc(name: str) -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function: Any = getattr(ctypes.CDLL(None, use_errno=True), name, None)
    except OSError:  # pragma: no cover - no C library to load
        return None
    return function  # type: ignore[no-any-return]


def syncfs(path: Path) -> bool:
    """Flush every file and directory of the filesystem holding `path` and wait for it
    (`syncfs(2)`, which reports write-back errors since Linux 5.8). False where there is none."""
    call = _libc("syncfs")
    if call is None:
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        if call(fd) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"syncfs failed: {os.strerror(errno)}", str(path))
    finally:
        os.close(fd)
    return True


def die_with_parent(parent: int) -> None:
    """Ask the kernel to SIGKILL this process when the thread that forked it exits (call it in
    a freshly forked child, with the parent's pid); exits at once if the parent is already
    gone."""
    prctl = _libc("prctl")
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def start_helper(parent: int) -> None:
    """What a worker process of a command does first (a pool's initializer): die with the
    command (`die_with_parent`), and leave Ctrl-C to it. A terminal sends Ctrl-C's SIGINT to
    the whole process group: a worker waiting for work would die of it printing a traceback,
    while the command, which stops its pool when interrupted, reports it in one line."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
