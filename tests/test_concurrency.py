"""One writer at a time, and readers that always see one complete generation, with real
concurrent processes (on both ledger backends)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import run_cli, write


def _start(ws: Path, *args: str, pause: str | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ)
    if pause:
        env["RAYTSYSTEM_PAUSE_AT"] = pause
    return subprocess.Popen(
        [sys.executable, "-m", "raytsystem", *args],
        cwd=ws,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_lock(ws: Path) -> None:
    """Until the paused writer holds the workspace lock (its pid is written into the file)."""
    lock = ws / ".raytsystem" / "writer.lock"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if lock.exists() and lock.read_text().strip():
            return
        time.sleep(0.05)
    raise AssertionError("the first writer never took the lock")


def test_a_second_writer_fails_with_locked_after_its_timeout(workspace: Path) -> None:
    write(workspace, "docs/a.md", "Alpha is first.\n")
    (workspace / ".raytsystem" / "writer.lock").unlink(missing_ok=True)
    first = _start(workspace, "ingest", "--json", pause="ingest.after_normalize:6")
    _wait_for_lock(workspace)
    second = run_cli("ingest", "--lock-timeout", "0.5", "--json", cwd=workspace)
    assert second.code == 7, second.stdout + second.stderr
    assert second.json()["error"]["code"] == "locked"
    _out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    gens = run_cli("generations", "--json", cwd=workspace).json()
    assert [g["number"] for g in gens] == [1]


def test_a_waiting_writer_runs_after_the_first_and_never_interleaves(workspace: Path) -> None:
    write(workspace, "docs/a.md", "Alpha is first.\n")
    (workspace / ".raytsystem" / "writer.lock").unlink(missing_ok=True)
    first = _start(workspace, "ingest", "--json", pause="ingest.before_head:3")
    _wait_for_lock(workspace)
    write(workspace, "docs/b.md", "Beta is second.\n")
    second = run_cli("ingest", "--lock-timeout", "60", "--json", cwd=workspace)
    assert first.wait(timeout=120) == 0
    assert second.code == 0, second.stderr
    gens = run_cli("generations", "--json", cwd=workspace).json()
    assert [g["number"] for g in gens] == list(range(1, len(gens) + 1))
    assert all(g["parent_hash"] == p["hash"] for p, g in itertools.pairwise(gens))
    assert run_cli("verify", cwd=workspace).code == 0
    assert run_cli("query", "beta second", "--json", cwd=workspace).json()["status"] == "answered"


def test_queries_during_an_ingest_see_one_complete_generation(workspace: Path) -> None:
    write(workspace, "docs/a.md", "The quota is 10 requests per minute.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    write(workspace, "docs/a.md", "The quota is 20 requests per minute.\n")
    writer = _start(workspace, "ingest", "--json", pause="ingest.before_head:4")
    seen = set()
    while writer.poll() is None:
        result = run_cli("query", "quota requests", "--json", cwd=workspace)
        if result.code == 3 and result.json()["error"]["code"] == "generation_moved":
            continue  # the head moved while this query ran: it failed closed, as documented
        assert result.code == 0, result.stdout + result.stderr
        body = result.json()
        number = body["generation"]["number"]
        # Generation 1 says 10, generation 2 says 20: never a mix, never another error.
        assert ("10 requests" in body["answer"]) == (number == 1), body
        assert ("20 requests" in body["answer"]) == (number == 2), body
        seen.add(number)
    assert writer.returncode == 0
    assert 1 in seen
    final = run_cli("query", "quota requests", "--json", cwd=workspace).json()
    assert final["generation"]["number"] == 2 and "20 requests" in final["answer"]
