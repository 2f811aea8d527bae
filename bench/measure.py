"""Timed subprocesses with their peak memory, and the small statistics the report needs.

`run_process` times a command by wall clock and collects that one child's resource usage with
`os.wait4`, so `max_rss_kib` is the high-water mark of the child or of any process it waited
for (Linux reports the largest single process, e.g. one ingest worker, not a sum), and the CPU
seconds (user and system) are those of the child and of every process it waited for (an
ingest's workers included). Optionally
a sampler thread also sums the proportional set size (PSS, shared pages split fairly) of the
whole process tree: a sampled estimate of the total, which a fork pool makes larger than any
single process.

Reading PSS is not free: the kernel walks the page tables of every process sampled, 15 ms of
CPU for an ingest of 10,000 files (600 MiB resident). Sampled every 0.2 s, that took 7% of a
core from the run it measured, 4% of a 2-core machine's cycles, and the cold ingest's time
grew by as much. The sampler waits at least 100 times as long as its last sample took (1% of
one core), and never less than 0.2 s.
"""

from __future__ import annotations

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

SAMPLE_SECONDS = 0.2  # the shortest wait between two samples of the tree's PSS
SAMPLER_SHARE = 0.01  # of one core, at most: a sample that took t seconds waits t / this


@dataclass(frozen=True)
class ProcResult:
    argv: tuple[str, ...]
    returncode: int
    seconds: float
    stdout: str
    stderr: str
    max_rss_kib: int
    tree_peak_pss_kib: int | None = None
    user_s: float | None = None  # CPU seconds, the child's and its waited-for descendants'
    system_s: float | None = None

    def check(self) -> ProcResult:
        """Raise with the command's own error output if it failed."""
        if self.returncode != 0:
            tail = (self.stderr or self.stdout).strip()[-2000:]
            raise RuntimeError(f"{' '.join(self.argv)} exited {self.returncode}: {tail}")
        return self


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        return [int(x) for x in path.read_text().split()]
    except OSError:
        pass
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


def _tree_pss(root: int) -> int:
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += _pss_kib(pid)
        todo.extend(_children(pid))
    return total


class _TreeSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        wait = SAMPLE_SECONDS
        while not self.stop.wait(wait):
            began = time.thread_time()
            self.peak = max(self.peak, _tree_pss(self.pid))
            wait = max(SAMPLE_SECONDS, (time.thread_time() - began) / SAMPLER_SHARE)


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
    sampling = sample_tree and Path("/proc/self/smaps_rollup").exists()
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
    if sampler:
        sampler.start()
    if hasattr(os, "wait4"):
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        returncode = os.waitstatus_to_exitcode(status)
        proc.returncode = returncode  # reaped here; keep Popen from waiting again
        max_rss = usage.ru_maxrss
        cpu: tuple[float | None, float | None] = (usage.ru_utime, usage.ru_stime)
    else:  # pragma: no cover - platforms without wait4
        returncode = proc.wait()
        seconds = time.perf_counter() - started
        max_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        cpu = (None, None)
    if sampler:
        sampler.stop.set()
        sampler.join()
    for t in readers:
        t.join()
    if sys.platform == "darwin":  # macOS reports bytes, Linux KiB
        max_rss //= 1024
    return ProcResult(
        tuple(argv),
        returncode,
        seconds,
        b"".join(out).decode("utf-8", "replace"),
        b"".join(err).decode("utf-8", "replace"),
        int(max_rss),
        sampler.peak if sampler else None,
        *cpu,
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
