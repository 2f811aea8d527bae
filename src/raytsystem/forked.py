"""One job done in a forked child beside this process: for a one-shot command, whose child
starts at once with everything the command has loaded, and works on another core while the
command imports and opens the rest.

The child runs the job, hands its result back pickled through a pipe, and leaves without
cleaning up; it dies with the command. Only the command that forked it reads what it sends.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
from collections.abc import Callable
from typing import Generic, TypeVar

from .syscalls import die_with_parent

T = TypeVar("T")


class ChildFailed(RuntimeError):
    """The child ended without a result (the job raised, or the child was killed)."""


class Child(Generic[T]):
    """A forked child at work: `result` waits for what it sends; `close` lets it go unread."""

    def __init__(self, pid: int, read_end: int) -> None:
        self._pid: int | None = pid
        self._read_end = read_end

    def result(self) -> T:
        """The job's result (once: the child is gone after); `ChildFailed` if there is none:
        the job raised, or the child was killed, or what it sent was cut short."""
        if self._pid is None:
            raise ChildFailed("the forked child's result was taken or let go already")
        fd, self._read_end = self._read_end, -1  # the file object below owns it now
        try:
            with os.fdopen(fd, "rb") as src:
                data = src.read()
        except BaseException:
            self.close()  # interrupted: end the child rather than wait for its whole job
            raise
        status = self._reap()
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or not data:
            raise ChildFailed("the forked child ended without a result")
        try:
            result: T = pickle.loads(data)  # from our own child
        except (pickle.UnpicklingError, EOFError, ValueError) as exc:
            raise ChildFailed("the forked child's result was cut short") from exc
        return result

    def close(self) -> None:
        """End the child if its result was not taken."""
        if self._pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, signal.SIGKILL)
        if self._read_end >= 0:
            os.close(self._read_end)
            self._read_end = -1
        self._reap()

    def _reap(self) -> int:
        """Wait for the child to end; its wait status (0 if it was reaped elsewhere)."""
        pid, self._pid = self._pid, None
        if pid is None:
            return 0
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:
            return 0


def in_child(job: Callable[[], T]) -> Child[T] | None:
    """Start `job` now in a forked child; its result comes back pickled (a type the child
    hands over in bulk may pickle itself in a cheaper form). None where there is no fork.

    Call it from the main thread before any other thread starts: a fork copies only the
    thread that made it, so a lock another thread held would stay locked in the child."""
    if not hasattr(os, "fork"):
        return None
    parent = os.getpid()
    try:
        read_end, write_end = os.pipe()
    except OSError:  # no file descriptor left: the command does the job itself
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:  # the child: do the job, hand the result over, and leave at once
        code = 1
        try:
            os.close(read_end)
            die_with_parent(parent)
            # Ctrl-C and a termination end it without a word, whatever handlers the command set.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            # A child that lives for one job needs no cycle collector, whose full passes
            # would visit (and copy, page by page) every object it shares with its parent.
            gc.disable()
            # Let go of the parent's stdin, stdout and stderr: whoever reads the command's
            # output to its end must not wait for this child.
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            data = pickle.dumps(job(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return Child(pid, read_end)
