"""One answer per process, as the CLI gives it: the wall time of `Session.query` and the
process's CPU time (imports included), by freshness mode: "off", "check" (the walk in a
thread) and "fork" (the walk in a child process: the CLI's). 11 rounds after a warm-up, the
modes alternating.

    uv run python -m bench.freshness_cli WORKSPACE [QUESTION]   # an ingested workspace
"""

from __future__ import annotations

import statistics
import subprocess
import sys

ONE_ANSWER = """
import resource, sys, time
from pathlib import Path
from raytsystem.api import Session
started = time.perf_counter()
with Session.open(Path(sys.argv[1]), freshness=sys.argv[2]) as session:
    answer = session.query(sys.argv[3])
    state = answer.freshness.state if answer.freshness else "-"
wall = (time.perf_counter() - started) * 1000
usage = resource.getrusage(resource.RUSAGE_SELF)
print(wall, state, (usage.ru_utime + usage.ru_stime) * 1000)
"""
MODES = ("off", "check", "fork")


def main(argv: list[str]) -> None:
    ws = argv[0]
    question = argv[1] if len(argv) > 1 else "configuration options for the retry policy"
    wall: dict[str, list[float]] = {m: [] for m in MODES}
    cpu: dict[str, list[float]] = {m: [] for m in MODES}
    states: dict[str, set[str]] = {m: set() for m in MODES}
    for round_ in range(12):
        for mode in MODES:
            out = subprocess.run(
                [sys.executable, "-c", ONE_ANSWER, ws, mode, question],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            if round_:  # the first round warms the page cache
                wall[mode].append(float(out[0]))
                states[mode].add(out[1])
                cpu[mode].append(float(out[2]))
    for mode in MODES:
        print(
            f"{mode:<6} wall p50 {statistics.median(wall[mode]):.1f} ms, "
            f"max {max(wall[mode]):.1f} ms; process CPU p50 {statistics.median(cpu[mode]):.1f} "
            f"ms; {', '.join(sorted(states[mode]))}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
