"""The freshness check's cost (issue 37, ADR 0039): what saying "fresh" or "stale" adds to an
answer, on a workspace a run has ingested.

- `check`: one bounded walk of the workspace compared with the stat cache and judged against
  the generation (what each CLI answer does, in a thread beside the query).
- `track`: a long-lived `Session` (MCP, Universe, a program): the first answer walks and
  starts the OS notifications; every later one looks only at what the notifications named.
  The figure judged is what it adds to an in-process query: the probe and the verdict, on the
  reader the query has open. Target: p95 < 10 ms at 10,000 files.
- `stale`: the same after one file was edited (its bytes hashed against its revision).

Run on its own (`uv run python -m bench.freshness --files 10000`): a synthetic corpus, a cold
ingest, then the figures; `--workspace DIR` measures a workspace already ingested instead.
The main run (`python -m bench`) measures it too, after `verify`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _summary(ms: list[float]) -> dict[str, Any]:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "count": len(ms),
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(p95, 3),
        "max_ms": round(ordered[-1], 3),
    }


def measure(ws: Path, repeat: int = 50, edit: Path | None = None) -> dict[str, Any]:
    """The figures on workspace `ws` (ingested; its current generation has a stat cache).
    With `edit`, that file is changed at the end (the workspace is not put back)."""
    from raytsystem.api import Session
    from raytsystem.pipeline.freshness import judge
    from raytsystem.pipeline.freshness_walk import BOUND_S, observe
    from raytsystem.storage import generations

    out: dict[str, Any] = {"bound_s": BOUND_S}
    with Session.open(ws, freshness="off") as session:
        session.status()  # the ledger opened, as a session that answers has it
        ms: list[float] = []
        states: set[str] = set()
        for _ in range(repeat):
            started = time.perf_counter()
            deadline = time.monotonic() + BOUND_S
            obs = observe(session.ws, deadline)
            with session._reader() as reader:
                head = generations.head(reader)
                assert head is not None, "the workspace has no generation"
                states.add(judge(obs, reader, head, head, deadline).state)
            ms.append((time.perf_counter() - started) * 1000)
        out["check"] = {**_summary(ms), "states": sorted(states), "files": len(obs.seen)}

    with Session.open(ws, freshness="track") as session:
        started = time.perf_counter()
        first = session.freshness()
        out["track_first_ms"] = round((time.perf_counter() - started) * 1000, 3)
        out["track"] = _tracked(session, repeat, {first.state})
        if edit is not None:
            with open(edit, "a", encoding="utf-8") as handle:
                handle.write("\nOne more sentence, written by the benchmark.\n")
            deadline = time.monotonic() + 30
            while session.freshness().state != "stale" and time.monotonic() < deadline:
                time.sleep(0.01)
            out["track_stale"] = _tracked(session, repeat, set())
    return out


def _tracked(session: Any, repeat: int, states: set[str]) -> dict[str, Any]:
    """What a tracking session adds to an answer: the probe (the notifications taken, the
    paths they name looked at) and the verdict, on a reader the answer has open anyway."""
    from raytsystem.storage import generations

    ms: list[float] = []
    with session._reader() as reader:
        head = generations.head(reader)
        for _ in range(repeat):
            started = time.perf_counter()
            probe = session._probe()
            states.add(probe.result(reader, head).state)
            ms.append((time.perf_counter() - started) * 1000)
    return {**_summary(ms), "states": sorted(states)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.freshness", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--files", type=int, default=10_000, help="synthetic corpus size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=50, help="checks of each kind")
    parser.add_argument("--workspace", type=Path, help="an ingested workspace to measure")
    args = parser.parse_args(argv)
    from . import corpus

    with tempfile.TemporaryDirectory(prefix="raytsystem-fresh-") as tmp:
        ws = args.workspace
        made: dict[str, Any] = {}
        if ws is None:
            ws = Path(tmp) / "ws"
            ws.mkdir()
            raytsystem = [sys.executable, "-m", "raytsystem", "--workspace", str(ws)]
            subprocess.run([*raytsystem, "init"], check=True, capture_output=True)
            stats = corpus.generate(ws, corpus.CorpusSpec(args.files, args.seed, None))
            print(f"{stats.files} files; ingesting", file=sys.stderr)
            started = time.perf_counter()
            subprocess.run([*raytsystem, "ingest", "--json"], check=True, capture_output=True)
            # Past the stat cache's racy window, then a no-change ingest records every file.
            time.sleep(2.1)
            subprocess.run([*raytsystem, "ingest", "--json"], check=True, capture_output=True)
            made = {"files": stats.files, "ingest_s": round(time.perf_counter() - started, 1)}
        edit = next((ws / "docs").rglob("*.md"), None) if args.workspace is None else None
        result = {**made, **measure(ws, args.repeat, edit)}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
