"""Timed subprocesses with their peak memory, and the small statistics the report needs.

`run_process` times a command by wall clock and collects that one child's resource usage with
`os.wait4`: the CPU seconds (user and system) of the child and of every process it waited for
(an ingest's workers included), and `max_rss_kib`. Linux's `ru_maxrss` is the largest single
process, not a sum, and it is never less than the resident set of the process that started
the child: a child records its starter's memory when it `exec`s after `vfork` (a 13 MiB
`python -c pass` reads 320 MiB when started from a process holding 300 MiB). So from this
benchmark's own process, the figure is at least this process's size.

Optionally a sampler thread watches the whole process tree, which a fork pool makes larger
than any single process, and then `max_rss_kib` is the largest process's own peak instead:

- Every process's own peak RSS, the kernel's `VmHWM` of its own memory after `exec`, is read
  every 0.1 s. A process is known by its pid and start time, so a reused pid is another one.
  `tree_peak_rss_sum_kib` adds them up: an upper bound of the tree's peak, since peaks reached
  at different times are added and pages a forked worker shares with its parent are counted
  in both. A peak is a high-water mark, so sampling misses only what a process gained in its
  last 0.1 s, or a process that lived less than 0.1 s.
- `tree_peak_memory_files_kib`: the most that files held only in memory (Linux `memfd`,
  through which an ingest's workers hand over their results) held at one time, read at the
  same moments. No process's RSS counts their pages, so the judged sum adds this too. Like
  the rest, it is sampled: a box that fills and empties between two readings is missed,
  though at most a chunk's results (about 3 MB) each, which the writer's heap holds next.
  The PSS figure leaves these files out.
- `tree_peak_pss_kib`: the largest sum of the processes' proportional set sizes (PSS, shared
  pages split fairly) seen at one time: an estimate of the tree's real peak, from below.
  Reading PSS is not free: the kernel walks the page tables of every process sampled, 15 ms
  of CPU for an ingest of 10,000 files (600 MiB resident). Sampled every 0.2 s, that took 7%
  of a core from the run it measured, 4% of a 2-core machine's cycles, and the cold ingest's
  time grew by as much. PSS is read at least 100 times as long apart as its last reading took
  (1% of one core), and never less than 0.2 s apart; `VmHWM` costs no page-table walk.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

PEAK_SECONDS = 0.1  # between two readings of every process's peak RSS (0.5% of a core)
PSS_SECONDS = 0.2  # between two readings of the tree's PSS, at least
SAMPLER_SHARE = 0.01  # of one core, at most, for PSS: a reading that took t s waits t / this


@dataclass(frozen=True)
class ProcResult:
    argv: tuple[str, ...]
    returncode: int
    seconds: float
    stdout: str
    stderr: str
    max_rss_kib: int
    tree_peak_pss_kib: int | None = None
    # every process's own peak RSS, added up, and the peak of memory files (below)
    tree_peak_rss_sum_kib: int | None = None
    tree_peak_memory_files_kib: int | None = None  # the most held in memory files at a time
    user_s: float | None = None  # CPU seconds, the child's and its waited-for descendants'
    system_s: float | None = None

    def check(self) -> ProcResult:
        """Raise with the command's own error output if it failed."""
        if self.returncode != 0:
            tail = (self.stderr or self.stdout).strip()[-2000:]
            raise RuntimeError(f"{' '.join(self.argv)} exited {self.returncode}: {tail}")
        return self


def _children(pid: int) -> list[int]:
    """The children of a process, forked from any of its threads."""
    if Path(f"/proc/{pid}/task/{pid}/children").exists():
        out = []
        for task in Path(f"/proc/{pid}/task").glob("*/children"):
            with contextlib.suppress(OSError):  # the thread ended meanwhile
                out += [int(x) for x in task.read_text().split()]
        return out
    # a kernel without `children` files: every process's parent
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    try:  # no smaps_rollup: resident pages instead (overcounts shared pages)
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError):
        return 0


def _peak_rss(pid: int) -> tuple[tuple[int, int], int] | None:
    """((pid, start time), peak resident set so far in KiB: `VmHWM`) of a process, or None when
    it is gone or has ended (a zombie has no memory)."""
    try:
        started = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return (pid, started), int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _memory_files(pid: int) -> dict[tuple[int, int], int]:
    """(device, inode): bytes of memory each file in memory (`memfd`) a process holds open
    takes up (its pages, not its length)."""
    out: dict[tuple[int, int], int] = {}
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return out
    for fd in fds:
        path = f"{fd_dir}/{fd}"
        try:
            if os.readlink(path).startswith("/memfd:"):
                st = os.stat(path)
                out[st.st_dev, st.st_ino] = st.st_blocks * 512
        except OSError:  # closed meanwhile
            continue
    return out


def _tree(root: int) -> list[int]:
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(_children(pid))
    return pids


class _TreeSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0  # the whole tree's PSS at one time, the largest seen
        self.hwm: dict[tuple[int, int], int] = {}  # (pid, start time): peak RSS, last read
        self.files_peak = 0  # KiB in memory files at one time (shared by processes: once)
        self.stop = threading.Event()

    def run(self) -> None:
        next_pss = time.monotonic() + PSS_SECONDS
        while not self.stop.wait(PEAK_SECONDS):
            pids = _tree(self.pid)
            files: dict[tuple[int, int], int] = {}
            for pid in pids:
                read = _peak_rss(pid)
                if read is not None:
                    process, kib = read
                    self.hwm[process] = max(kib, self.hwm.get(process, 0))
                files.update(_memory_files(pid))
            self.files_peak = max(self.files_peak, sum(files.values()) // 1024)
            if time.monotonic() >= next_pss:
                began = time.thread_time()
                self.peak = max(self.peak, sum(map(_pss_kib, pids)))
                took = (time.thread_time() - began) / SAMPLER_SHARE
                next_pss = time.monotonic() + max(PSS_SECONDS, took)


def _drain(stream: IO[bytes] | None, into: list[bytes]) -> None:
    if stream is not None:
        into.append(stream.read())


def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    sample_tree: bool = False,
) -> ProcResult:
    """Run `argv` to completion; wall time, output, exit status and peak memory."""
    sampling = sample_tree and Path("/proc/self/status").exists()
    started = time.perf_counter()
    proc = subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd
    )
    out: list[bytes] = []
    err: list[bytes] = []
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, out), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, err), daemon=True),
    ]
    for t in readers:
        t.start()
    sampler = _TreeSampler(proc.pid) if sampling else None
    ended: float | None = None
    if sampler:
        sampler.start()
        # Ended, not yet reaped: its pid cannot be reused while the sampler stops.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        ended = time.perf_counter()
        sampler.stop.set()
        sampler.join()
    if hasattr(os, "wait4"):
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = (ended or time.perf_counter()) - started
        returncode = os.waitstatus_to_exitcode(status)
        proc.returncode = returncode  # reaped here; keep Popen from waiting again
        max_rss = usage.ru_maxrss
        cpu: tuple[float | None, float | None] = (usage.ru_utime, usage.ru_stime)
    else:  # pragma: no cover - platforms without wait4
        returncode = proc.wait()
        seconds = time.perf_counter() - started
        max_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        cpu = (None, None)
    for t in readers:
        t.join()
    if sys.platform == "darwin":  # macOS reports bytes, Linux KiB
        max_rss //= 1024
    # The sampler's figures, once it has seen the child itself (not one too short-lived).
    measured = sampler if sampler and any(pid == proc.pid for pid, _ in sampler.hwm) else None
    if measured:  # each process's own peaks, not its starter's
        max_rss = max(measured.hwm.values())
    return ProcResult(
        tuple(argv),
        returncode,
        seconds,
        b"".join(out).decode("utf-8", "replace"),
        b"".join(err).decode("utf-8", "replace"),
        int(max_rss),
        tree_peak_pss_kib=sampler.peak if sampler else None,
        tree_peak_rss_sum_kib=sum(measured.hwm.values()) + measured.files_peak
        if measured
        else None,
        tree_peak_memory_files_kib=measured.files_peak if measured else None,
        user_s=cpu[0],
        system_s=cpu[1],
    )


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (never interpolated, so p95 is a value that was observed)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)
