"""A kill at any point of an ingest leaves the previous generation current and queryable.

The CLI is killed with SIGKILL at named points (see raytsystem/faults.py): nothing in the
process can clean up, exactly like a power cut or the OOM killer.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import blob_bytes, pack_blobs, run_cli, start_cli, write

POINTS = [
    "ingest.take",
    "ingest.before_publish",
    "ingest.after_normalize",
    "ingest.after_objects",
    "ingest.before_index",
    "ingest.after_index",
    "ingest.before_head",
]


@pytest.mark.parametrize("point", POINTS)
def test_kill_during_ingest_keeps_the_previous_generation(workspace: Path, point: str) -> None:
    write(workspace, "docs/a.md", "The limit is 5 requests per second.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    before = run_cli("query", "limit requests", "--json", cwd=workspace).json()
    write(workspace, "docs/a.md", "The limit is 9 requests per second.\n")

    killed = run_cli("ingest", cwd=workspace, env={"RAYTSYSTEM_CRASH_AT": point})
    assert killed.code == -signal.SIGKILL

    after = run_cli("query", "limit requests", "--json", cwd=workspace)
    assert after.code == 0, after.stdout + after.stderr
    body = after.json()
    assert body["generation"] == before["generation"]
    assert "5 requests" in body["answer"]
    verify_gens = run_cli("generations", "--json", cwd=workspace).json()
    assert [g["number"] for g in verify_gens] == [1]

    again = run_cli("ingest", "--json", cwd=workspace)
    assert again.code == 0 and again.json()["created"]
    assert (
        "9 requests" in run_cli("query", "limit requests", "--json", cwd=workspace).json()["answer"]
    )


def test_kill_before_publish_leaves_no_blob_at_its_address(workspace: Path) -> None:
    """Workers stage new blobs unsynced, in packs; until the parent has synced and published
    them, nothing is found at their addresses, and the next ingest clears what the killed one
    staged."""
    import blake3

    from raytsystem.storage.blobs import DiskBlobStore

    write(workspace, "docs/a.md", "The limit is 5 requests per second.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    data = b"The limit is 9 requests per second.\n"
    (workspace / "docs/a.md").write_bytes(data)
    address = blake3.blake3(data).hexdigest()
    staging = workspace / "_raw" / ".staging"

    killed = run_cli("ingest", cwd=workspace, env={"RAYTSYSTEM_CRASH_AT": "ingest.before_publish"})
    assert killed.code == -signal.SIGKILL
    assert DiskBlobStore(workspace / "_raw").location(address) is None
    staged = {}
    for pack in staging.glob("*.pack-*"):
        staged.update(pack_blobs(pack.read_bytes()))
    assert staged[address] == data

    assert run_cli("ingest", cwd=workspace).code == 0
    assert blob_bytes(workspace / "_raw", address) == data and not staging.exists()
    assert run_cli("verify", cwd=workspace).code == 0


def test_states_a_killed_ingest_wrote_ahead_stay_invisible_and_go(workspace: Path) -> None:
    """Claim states are written ahead, opened at the generation the ingest makes. Killed
    before the head moves, they belong to no generation: queries, `show` and `diff` never see
    them, verify reports them (info), and the next ingest removes them before it writes."""
    write(workspace, "docs/a.md", "The limit is 5 requests per second.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    cited = run_cli("query", "limit requests", "--json", cwd=workspace).json()["citations"][0]
    write(workspace, "docs/a.md", "The limit is 5 requests per second. Bursts reach 9.\n")
    killed = run_cli("ingest", cwd=workspace, env={"RAYTSYSTEM_CRASH_AT": "ingest.before_index"})
    assert killed.code == -signal.SIGKILL

    checked = run_cli("verify", "--json", cwd=workspace)
    assert checked.code == 0, checked.stdout
    codes = {f["code"]: f["severity"] for f in checked.json()["findings"]}
    assert codes == {"interrupted_ingest": "info"}
    shown = run_cli("show", cited["claim"]["id"], "--json", cwd=workspace).json()
    assert [s["from_generation"] for s in shown["states"]] == [1]
    assert run_cli("query", "bursts", "--json", cwd=workspace).json()["status"] == "gap"

    again = run_cli("ingest", "--json", cwd=workspace).json()
    assert again["created"] and again["generation"]["number"] == 2
    assert [f["code"] for f in again["findings"]] == ["interrupted_ingest"]
    assert again["counts"]["claims_added"] == 1  # the new sentence; the old one restated
    assert again["counts"]["claims_changed"] == 1
    assert run_cli("verify", "--json", cwd=workspace).json()["findings"] == []
    assert run_cli("query", "bursts", "--json", cwd=workspace).json()["status"] == "answered"


def test_many_states_left_ahead_are_all_removed(workspace: Path) -> None:
    """More leftover rows than one read-back step (500) takes, behind committed ones."""
    for i in range(40):
        write(workspace, f"docs/old{i:02d}.md", f"Old note {i} is kept. It stays as it was.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    for i in range(160):
        body = " ".join(f"Fact {k} of file {i} holds." for k in range(4))
        write(workspace, f"docs/new{i:03d}.md", body + "\n")
    killed = run_cli(
        "ingest", "--jobs", "2", cwd=workspace, env={"RAYTSYSTEM_CRASH_AT": "ingest.before_index"}
    )
    assert killed.code == -signal.SIGKILL
    again = run_cli("ingest", "--json", cwd=workspace).json()
    (finding,) = again["findings"]
    assert (
        finding["code"] == "interrupted_ingest" and "removed 640 claim states" in finding["message"]
    )
    assert again["counts"]["claims_added"] == 640 and again["counts"]["claims_removed"] == 0
    checked = run_cli("verify", "--json", cwd=workspace).json()
    assert checked["ok"] and checked["findings"] == []
    assert checked["counts"]["claim_states"] == 80 + 640


def test_kill_after_commit_leaves_the_new_generation_current(workspace: Path) -> None:
    write(workspace, "docs/a.md", "The limit is 5 requests per second.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    write(workspace, "docs/a.md", "The limit is 9 requests per second.\n")
    killed = run_cli("ingest", cwd=workspace, env={"RAYTSYSTEM_CRASH_AT": "ingest.after_commit"})
    assert killed.code == -signal.SIGKILL
    body = run_cli("query", "limit requests", "--json", cwd=workspace).json()
    assert body["generation"]["number"] == 2 and "9 requests" in body["answer"]
    # The stat cache was not written: the next ingest re-reads and finds nothing new.
    again = run_cli("ingest", "--json", cwd=workspace).json()
    assert not again["created"]


def test_kill_of_the_first_ingest_leaves_an_empty_but_usable_workspace(workspace: Path) -> None:
    write(workspace, "docs/a.md", "The limit is 5 requests per second.\n")
    killed = run_cli("ingest", cwd=workspace, env={"RAYTSYSTEM_CRASH_AT": "ingest.before_head"})
    assert killed.code == -signal.SIGKILL
    result = run_cli("query", "limit", "--json", cwd=workspace)
    assert result.code == 4 and result.json()["error"]["code"] == "no_generation"
    assert run_cli("ingest", cwd=workspace).code == 0
    assert (
        run_cli("query", "limit requests", "--json", cwd=workspace).json()["status"] == "answered"
    )


def test_ctrl_c_stops_cleanly_and_keeps_the_previous_generation(workspace: Path) -> None:
    write(workspace, "docs/a.md", "The limit is 5 requests per second.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    write(workspace, "docs/a.md", "The limit is 9 requests per second.\n")
    _ctrl_c_at(workspace, "ingest.after_normalize", "ingest", "--json")
    assert not list((workspace / ".raytsystem" / "indexes").glob(".building-*"))
    body = run_cli("query", "limit requests", "--json", cwd=workspace).json()
    assert body["generation"]["number"] == 1 and "5 requests" in body["answer"]


def test_ctrl_c_stops_an_index_rebuild_and_keeps_the_index_there_was(workspace: Path) -> None:
    write(workspace, "docs/a.md", "The limit is 5 requests per second.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    (index,) = (workspace / ".raytsystem" / "indexes").glob("0*.sqlite3")
    before = index.read_bytes()
    building = workspace / ".raytsystem" / "indexes"
    _ctrl_c_at(
        workspace,
        "rebuild.step",
        "index",
        "rebuild",
        "--json",
        # The new file exists: the rebuild is under way, paused in its loop.
        ready=lambda: bool(list(building.glob(".building-*"))),
    )
    assert not list(building.glob(".building-*"))
    assert index.read_bytes() == before
    body = run_cli("query", "limit requests", "--json", cwd=workspace).json()
    assert body["status"] == "answered" and "5 requests" in body["answer"]


def _ctrl_c_at(
    workspace: Path, point: str, *command: str, ready: Callable[[], bool] | None = None
) -> None:
    """Run a command paused at `point` (reached once `ready()` holds, or after 3 s), then press
    Ctrl-C as a terminal does (SIGINT to its whole process group): it must end with exit 130
    and say so once, in one line (in JSON with `--json`), with no traceback from any process."""
    import os
    import time

    proc = start_cli(*command, cwd=workspace, env={"RAYTSYSTEM_PAUSE_AT": f"{point}:30"})
    if ready is None:
        time.sleep(3)
    else:
        deadline = time.monotonic() + 30
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    if "--json" in command:
        assert json.loads(out)["error"]["code"] == "interrupted"
        assert "Traceback" not in err
    else:
        assert err.strip() == "error[interrupted]: interrupted", err


@pytest.mark.parametrize("point", ["verify.blobs", "verify.references", "verify.index_rows"])
def test_ctrl_c_stops_a_verify_cleanly(workspace: Path, point: str) -> None:
    """Ctrl-C as a terminal sends it, to the whole process group (verify's hashing and
    index-deriving processes too): exit 130, one line saying so, no traceback from any
    process."""
    import os

    from raytsystem.pipeline.indexing import DIGEST_STEP

    if point == "verify.index_rows" and (os.cpu_count() or 1) < 2:
        pytest.skip("one core: index rows are derived in the command's own process")
    for i in range(DIGEST_STEP + 30):  # blobs in many shards, sources in two steps: pools
        write(workspace, f"docs/f{i:03d}.md", f"Part {i} has {i} bolts.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    _ctrl_c_at(workspace, point, "verify")
    assert run_cli("verify", cwd=workspace).code == 0


def test_ctrl_c_stops_a_parallel_ingest_cleanly(workspace: Path) -> None:
    """Ctrl-C to the whole process group while the workers wait for the writer: one line,
    exit 130, no traceback from a worker, the previous generation still current."""
    write(workspace, "docs/a.md", "The limit is 5 requests per second.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    _many(workspace, 120, "steel")  # over the parallel threshold
    _ctrl_c_at(workspace, "ingest.take", "ingest")
    body = run_cli("query", "limit requests", "--json", cwd=workspace).json()
    assert body["generation"]["number"] == 1 and "5 requests" in body["answer"]


def _many(workspace: Path, n: int, word: str) -> None:
    for i in range(n):
        write(
            workspace,
            f"docs/many/f{i:04d}.md",
            f"# Part {i}\n\nThe {word} part {i} has {i} bolts.\n",
        )


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_a_killed_parallel_ingest_leaves_no_worker_holding_the_lock(workspace: Path) -> None:
    """Workers are forked with the writer lock's descriptor; they must die with the parent."""
    _many(workspace, 120, "first")
    killed = run_cli(
        "ingest", "--jobs", "2", cwd=workspace, env={"RAYTSYSTEM_CRASH_AT": "ingest.take"}
    )
    assert killed.code == -signal.SIGKILL
    again = run_cli("ingest", "--lock-timeout", "10", "--json", cwd=workspace)
    assert again.code == 0, again.stdout + again.stderr
    assert again.json()["counts"]["new_sources"] == 120


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_a_worker_killed_mid_ingest_fails_the_run_and_commits_nothing(workspace: Path) -> None:
    """The pool breaks; the run must fail (`worker_died`), never finish with files missing."""
    import os
    import subprocess
    import sys
    import time

    write(workspace, "docs/a.md", "The limit is 5 requests per second.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    _many(workspace, 900, "second")
    env = {**os.environ, "RAYTSYSTEM_PAUSE_AT": "ingest.take:4"}
    proc = subprocess.Popen(
        # Three jobs: two workers beside the writer, which takes files too (ADR 0026).
        [sys.executable, "-m", "raytsystem", "ingest", "--jobs", "3", "--json"],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while len(workers := _children(proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(workers) >= 2, "the workers never started"
    time.sleep(1)  # inside the pause: the workers have filled the window and wait
    os.kill(workers[0], signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, (out, err)
    assert json.loads(out)["error"]["code"] == "worker_died"
    gens = run_cli("generations", "--json", cwd=workspace).json()
    assert [g["number"] for g in gens] == [1]
    again = run_cli("ingest", "--json", cwd=workspace)
    assert again.code == 0 and again.json()["counts"]["new_sources"] == 900


@pytest.mark.parametrize(
    ("point", "jobs", "errno_name", "code"),
    [
        # In the writer, as it takes a batch (blobs, ledger rows, index rows).
        ("ingest.take", "1", "ENOSPC", "disk_full"),
        # In a worker, as it hands a chunk's results over in its box (a file in memory):
        # the error crosses the pool and is told apart all the same.
        ("ingest.hand_over", "2", "ENOMEM", "out_of_memory"),
    ],
)
def test_an_ingest_out_of_disk_or_memory_says_so_and_commits_nothing(
    workspace: Path, point: str, jobs: str, errno_name: str, code: str
) -> None:
    """Not `internal_error` ("a bug: report it"): its own code, exit 8, one line, and the
    previous generation current; the next ingest, with room again, makes the new one."""
    write(workspace, "docs/a.md", "The limit is 5 requests per second.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    _many(workspace, 120, "third")  # over the parallel threshold
    failed = run_cli(
        "ingest",
        "--jobs",
        jobs,
        "--json",
        cwd=workspace,
        env={"RAYTSYSTEM_FAIL_AT": f"{point}:{errno_name}"},
    )
    assert failed.code == 8, failed.stdout + failed.stderr
    error = json.loads(failed.stdout)["error"]
    assert error["code"] == code
    assert "previous generation current" in error["message"]
    assert "Traceback" not in failed.stderr
    plain = run_cli(
        "ingest", "--jobs", jobs, cwd=workspace, env={"RAYTSYSTEM_FAIL_AT": f"{point}:{errno_name}"}
    )
    assert plain.code == 8 and plain.stderr.startswith(f"error[{code}]: ")
    assert plain.stderr.count("\n") == 1
    gens = run_cli("generations", "--json", cwd=workspace).json()
    assert [g["number"] for g in gens] == [1]
    again = run_cli("ingest", "--jobs", jobs, "--json", cwd=workspace)
    assert again.code == 0 and again.json()["counts"]["new_sources"] == 120
