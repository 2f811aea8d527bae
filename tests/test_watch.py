"""`raytsystem watch` (issue 37), end to end: the real command in a process of its own,
the workspace edited as editors and tools do, and the answers read back through `query
--json` until a deadline (never a timed assertion: how long an edit took to become answerable
is printed, for bench/freshness.md)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Backend, run_cli, start_cli, write

from raytsystem.pipeline.watch import Triggers
from raytsystem.workspace import Workspace

DOC = "# Payments\n\nRetries stop after at most 5 attempts.\n\nRefunds take 3 business days.\n"
QUESTION = "how many retry attempts"
DEADLINE_S = 60.0


class Watch:
    """`raytsystem watch --json ARGS` in a process group of its own (Ctrl-C goes to the
    group, as a terminal sends it); its JSON lines are collected as they come."""

    def __init__(self, ws: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = start_cli("watch", "--json", "--jobs", "1", *args, cwd=ws, env=env)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.put(json.loads(line))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr.extend(self.proc.stderr)

    def next_event(self, until: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first event (from here on) for which `until` holds."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            left = deadline - time.monotonic()
            assert left > 0, (self.seen, "".join(self.stderr))
            try:
                event = self.events.get(timeout=min(left, 0.5))
            except queue.Empty:
                assert self.proc.poll() is None, (self.seen, "".join(self.stderr))
                continue
            self.seen.append(event)
            if until(event):
                return event

    def generation(self, number: int) -> dict[str, Any]:
        return self.next_event(
            lambda e: e["event"] == "generation" and e["generation"]["number"] >= number
        )

    def interrupt(self) -> int:
        """Ctrl-C; the exit status once it ended, every event collected."""
        os.killpg(self.proc.pid, signal.SIGINT)
        code = self.proc.wait(timeout=DEADLINE_S)
        for t in self._threads:
            t.join(timeout=10)
        while not self.events.empty():
            self.seen.append(self.events.get())
        return code

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def answer(ws: Path, text: str = QUESTION) -> dict[str, Any]:
    """`query --json`; asked again when an ingest of the watch committed while it ran (the
    query then fails closed with `generation_moved`, as it must)."""
    for _ in range(20):
        result = run_cli("query", text, "--json", cwd=ws)
        if result.code == 3 and result.json()["error"]["code"] == "generation_moved":
            continue
        assert result.code == 0, result.stdout + result.stderr
        body: dict[str, Any] = result.json()
        return body
    raise AssertionError("the generation moved under 20 queries in a row")


def until_answered(ws: Path, fact: str, since: float) -> tuple[dict[str, Any], float]:
    """Poll `query --json` until its answer holds `fact` (deadline, not a timed assertion);
    the answer and the seconds from `since` (a save) to the first answer holding it."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        body = answer(ws)
        if fact in body.get("answer", ""):
            return body, time.monotonic() - since
        assert time.monotonic() < deadline, body
        time.sleep(0.05)


def ingest_runs(backend: Backend, ws: Path) -> int:
    with backend.db(ws) as db:
        return int(db.execute("SELECT count(*) FROM ingest_runs")[0][0])


@pytest.fixture
def kb(workspace: Path) -> Path:
    write(workspace, "docs/payments.md", DOC)
    write(workspace, "docs/other.md", "# Other\n\nThe office opens at nine.\n")
    return workspace


def test_an_edit_becomes_answerable_and_fresh(kb: Path) -> None:
    with Watch(kb) as w:
        first = w.generation(1)
        assert first["created"] and first["counts"]["new_sources"] == 2
        assert "5 attempts" in answer(kb)["answer"]
        saved = time.monotonic()
        write(kb, "docs/payments.md", DOC.replace("5 attempts", "7 attempts"))
        body, took = until_answered(kb, "7 attempts", saved)
        print(f"\nan edit became answerable {took:.2f} s after the save")
        # Between the generation's commit and the stat cache written after it, a check says
        # `unknown` (no cache for that generation yet); then `fresh`, without another save.
        assert body["freshness"]["state"] in ("fresh", "unknown"), body["freshness"]
        deadline = time.monotonic() + DEADLINE_S
        while (state := answer(kb)["freshness"])["state"] != "fresh":
            assert state["state"] == "unknown" and time.monotonic() < deadline, state
            time.sleep(0.05)
        assert w.interrupt() == 0
    assert answer(kb)["freshness"] == {"state": "fresh", "changed": 0, "examples": []}
    assert not any(e["event"] == "error" for e in w.seen), w.seen


def _rename_over(path: Path, text: str) -> None:
    """vim's and most IDEs' safe save: a new file beside it, renamed over the old one."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _truncate_then_write(path: Path, text: str) -> None:
    """nano's and many tools' save: the file truncated, then written in steps."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.flush()
        time.sleep(0.05)
        handle.write(text[: len(text) // 2])
        handle.flush()
        time.sleep(0.05)
        handle.write(text[len(text) // 2 :])


def _delete_then_create(path: Path, text: str) -> None:
    path.unlink()
    time.sleep(0.05)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    "save", [_rename_over, _truncate_then_write, _delete_then_create], ids=lambda f: f.__name__
)
def test_editors_save_patterns(kb: Path, save: Callable[[Path, str], None]) -> None:
    with Watch(kb) as w:
        w.generation(1)
        for n in (11, 12):
            save(kb / "docs/payments.md", DOC.replace("5 attempts", f"{n} attempts"))
            until_answered(kb, f"{n} attempts", time.monotonic())
        assert w.interrupt() == 0
    final = answer(kb)
    assert "12 attempts" in final["answer"]
    assert final["freshness"]["state"] == "fresh"
    # The editor's temporary file is not selected: never a source.
    assert run_cli("history", "docs/.payments.md.swp", cwd=kb).code == 4
    assert not any(e["event"] == "error" for e in w.seen), w.seen
    # Each save is one settled change (two generations at most, when its steps straddle
    # the debounce), never a generation per notification.
    made = [e for e in w.seen if e["event"] == "generation"]
    assert 3 <= len(made) <= 5, made


def test_a_burst_of_5000_files_makes_one_or_two_generations(kb: Path) -> None:
    with Watch(kb, "--debounce", "1000") as w:
        w.generation(1)
        burst = kb / "docs" / "burst"
        burst.mkdir()
        for i in range(5000):
            (burst / f"n{i:04d}.md").write_text(f"Part {i} has {i} bolts.\n", encoding="utf-8")
        w.next_event(lambda e: e["event"] == "generation" and _sources(kb) == 5002)
        # Wait until the settling ingest after it has run, then stop: what was made is all.
        last = run_cli("status", "--json", cwd=kb).json()["last_ingest"]["finished_at"]
        deadline = time.monotonic() + DEADLINE_S
        while run_cli("status", "--json", cwd=kb).json()["last_ingest"]["finished_at"] == last:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert w.interrupt() == 0
    after_first = [e for e in w.seen if e["event"] == "generation"][1:]
    assert 1 <= len(after_first) <= 2, [e["counts"] for e in after_first]
    assert sum(e["counts"]["new_sources"] for e in after_first) == 5000
    assert "Part 4321 has 4321 bolts" in run_cli("search", "4321 bolts", cwd=kb).stdout


def _sources(ws: Path) -> int:
    status = run_cli("status", "--json", cwd=ws).json()
    return int(status["generation"]["active_sources"]) if status["generation"] else 0


def test_the_workspaces_own_writes_trigger_nothing(kb: Path, backend: Backend) -> None:
    with Watch(kb) as w:
        w.generation(1)
        runs = ingest_runs(backend, kb)
        # What the workspace writes itself, and what it never selects.
        assert run_cli("review", cwd=kb).code == 0  # ops/reviews/, the ledger, .raytsystem/
        write(kb, "_raw/scratch.md", "# not knowledge\n")
        write(kb, ".raytsystem/scratch.md", "# not knowledge\n")
        write(kb, "ops/reviews/extra.md", "# a review report\n")
        write(kb, "build/notes.txt", "not selected: a build output\n")
        write(kb, ".git/HEAD", "ref: refs/heads/main\n")
        # Then one edit: the generation it makes counts its notifications and nothing else,
        # and the ingests are the one it called for and the settling one after it.
        write(kb, "docs/payments.md", DOC.replace("5 attempts", "8 attempts"))
        event = w.generation(2)
        deadline = time.monotonic() + DEADLINE_S
        while ingest_runs(backend, kb) < runs + 2:
            assert time.monotonic() < deadline, (runs, ingest_runs(backend, kb), w.seen)
            time.sleep(0.2)
        time.sleep(1)  # room for an ingest it should not make (the assertion is on counts)
        assert w.interrupt() == 0
    assert ingest_runs(backend, kb) == runs + 2
    assert event["counts"]["new_revisions"] == 1
    assert 1 <= event["changes"] <= 2, event  # docs/payments.md: created/modified
    assert [e["generation"]["number"] for e in w.seen if e["event"] == "generation"] == [1, 2]


def test_triggers_filter_own_writes_and_unselected_files(kb: Path) -> None:
    ws = Workspace.open(kb)
    trigger = Triggers(ws)
    root = str(kb)

    def fires(rel: str) -> bool:
        return trigger(None, os.path.join(root, *rel.split("/")))

    for rel in ("_raw/blake3/ab/cd", ".raytsystem/ledger.sqlite3", "ops/reviews/1-x.json"):
        assert not fires(rel), rel
    assert not fires(".git/index") and not fires("docs/.git/x") and not fires("build/notes.txt")
    assert fires("docs/payments.md") and fires("docs/new.md") and fires("raytsystem.toml")
    assert fires("docs")  # a folder moved away or in: its files are unknown


def test_ctrl_c_during_an_ingest_waits_for_it(kb: Path, tmp_path: Path) -> None:
    flag = tmp_path / "paused"
    env = {"RAYTSYSTEM_PAUSE_AT": "ingest.before_index:60", "RAYTSYSTEM_PAUSE_FLAG": str(flag)}
    with Watch(kb, env=env) as w:
        deadline = time.monotonic() + DEADLINE_S
        while not flag.exists():
            assert time.monotonic() < deadline and w.proc.poll() is None, "".join(w.stderr)
            time.sleep(0.02)
        os.killpg(w.proc.pid, signal.SIGINT)  # Ctrl-C in the middle of the first ingest
        with pytest.raises(subprocess.TimeoutExpired):
            w.proc.wait(timeout=1)  # still there: it waits for the ingest
        flag.unlink()  # the ingest goes on
        code = w.proc.wait(timeout=DEADLINE_S)
        for t in w._threads:
            t.join(timeout=10)
        while not w.events.empty():
            w.seen.append(w.events.get())
    assert code == 0, "".join(w.stderr)
    err = "".join(w.stderr)
    assert "stopping after the ingest under way" in err and "Traceback" not in err
    assert [e["generation"]["number"] for e in w.seen if e["event"] == "generation"] == [1]
    status = run_cli("status", "--json", cwd=kb).json()
    assert status["generation"]["number"] == 1
    assert "5 attempts" in answer(kb)["answer"]


def test_a_second_writer_is_met_by_the_lock(kb: Path, tmp_path: Path) -> None:
    """An ingest paused holding the writer lock: the watch's ingest waits (past its timeout it
    says `locked` and tries again), and makes its generation once the lock is free."""
    flag = tmp_path / "paused"
    env = {**os.environ, "RAYTSYSTEM_PAUSE_AT": "ingest.before_index:60"}
    env["RAYTSYSTEM_PAUSE_FLAG"] = str(flag)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    other = subprocess.Popen(
        [sys.executable, "-m", "raytsystem", "ingest", "--json"],
        cwd=kb,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not flag.exists():
            assert time.monotonic() < deadline and other.poll() is None
            time.sleep(0.02)
        with Watch(kb, "--lock-timeout", "0.5") as w:
            locked = w.next_event(lambda e: e["event"] == "error")
            assert locked["error"]["code"] == "locked"
            flag.unlink()
            out, _ = other.communicate(timeout=DEADLINE_S)
            assert json.loads(out)["generation"]["number"] == 1
            write(kb, "docs/payments.md", DOC.replace("5 attempts", "9 attempts"))
            w.generation(2)
            assert w.interrupt() == 0
    finally:
        if other.poll() is None:
            other.kill()
            other.communicate()
    assert "9 attempts" in answer(kb)["answer"]
