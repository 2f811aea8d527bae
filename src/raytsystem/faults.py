"""Crash points for tests: prove that a kill at any step leaves the previous generation current.

Tests set `RAYTSYSTEM_CRASH_AT=<point>` on a CLI subprocess; when the pipeline reaches that
point the process sends itself SIGKILL, which no cleanup code can intercept, exactly like a
power cut or an OOM kill. `RAYTSYSTEM_PAUSE_AT=<point>:<seconds>` sleeps instead, so a test can
change the workspace while a command is in flight; with `RAYTSYSTEM_PAUSE_FLAG=<file>` too,
the paused process creates that file when it gets there and goes on as soon as the test
deletes it, so a test waits for the point, not for a guessed time. `RAYTSYSTEM_FAIL_AT=<point>:<errno name>`
raises the system's error of that name there (`ENOSPC`: the disk is full; a name `errno` does
not know: `EIO`), as the system call after it would. With none of them set, `point` is a few
string comparisons and nothing else. This is the one place outside the CLI that reads the
environment: it is read once, at import.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from typing import Final

_CRASH: Final = os.environ.get("RAYTSYSTEM_CRASH_AT", "")
_PAUSE_POINT, _, _PAUSE_SECONDS = os.environ.get("RAYTSYSTEM_PAUSE_AT", "").partition(":")
_PAUSE_FLAG: Final = os.environ.get("RAYTSYSTEM_PAUSE_FLAG", "")
_FAIL_POINT, _, _FAIL_ERRNO = os.environ.get("RAYTSYSTEM_FAIL_AT", "").partition(":")


def point(name: str) -> None:
    if name == _CRASH:
        os.kill(os.getpid(), signal.SIGKILL)
    if name == _PAUSE_POINT:
        _pause(float(_PAUSE_SECONDS or "1"))
    if name == _FAIL_POINT:
        code = getattr(errno, _FAIL_ERRNO, errno.EIO)
        raise OSError(code, os.strerror(code))


def _pause(seconds: float) -> None:
    if not _PAUSE_FLAG:
        time.sleep(seconds)
        return
    with open(_PAUSE_FLAG, "w"):
        pass
    deadline = time.monotonic() + seconds
    while os.path.exists(_PAUSE_FLAG) and time.monotonic() < deadline:
        time.sleep(0.02)
