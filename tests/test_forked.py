"""Work in a forked child (`forked.in_child`) and the ingest's walk made there
(`discovery.walk_in_child`): the same files as a walk made in the command, and a child whose
result is not taken does not outlive its command."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from conftest import write

from raytsystem.api import Session
from raytsystem.discovery import Candidate, Refusal, Skip, walk, walk_in_child
from raytsystem.forked import ChildFailed, in_child
from raytsystem.pipeline.ingest_scan import _walked
from raytsystem.workspace import Workspace, init_workspace

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    init_workspace(root)
    for n in range(40):
        write(root, f"docs/{n % 4}/note-{n:02d}.md", f"Note {n}.\n")
    write(root, "docs/picture.png", "not an image")  # passed over: a format never read
    write(root, "docs/bad\x01name.md", "refused: a control character in the path\n")
    return Workspace.open(root)


def test_a_walk_in_a_child_finds_what_a_walk_here_finds(ws: Workspace) -> None:
    before = time.time_ns()
    child = walk_in_child(ws)
    assert child is not None
    there = child.result()
    here = walk(ws)
    assert there.found == here.found
    kinds = {type(f) for f in there.found}
    assert kinds == {Candidate, Skip, Refusal}
    assert sum(isinstance(f, Candidate) for f in there.found) == 40
    assert before <= there.began_ns <= here.began_ns


def test_a_walk_in_a_child_of_some_paths(ws: Workspace) -> None:
    child = walk_in_child(ws, ["docs/1", "docs/missing.md"])
    assert child is not None
    assert child.result().found == walk(ws, ["docs/1", "docs/missing.md"]).found


def test_a_child_whose_job_fails_has_no_result() -> None:
    def fails() -> int:
        raise ValueError("the job went wrong")

    child = in_child(fails)
    assert child is not None
    with pytest.raises(ChildFailed):
        child.result()


def test_a_child_killed_while_it_hands_over_has_no_result() -> None:
    """A child ended part-way through its write (more than a pipe holds): what came is cut
    short, and that is no result, never a half one."""
    child = in_child(lambda: b"x" * 4_000_000)
    assert child is not None
    time.sleep(0.5)  # it has filled the pipe and waits for the reader
    os.kill(child._pid or 0, signal.SIGKILL)
    with pytest.raises(ChildFailed):
        child.result()


def test_a_walk_of_other_paths_is_not_taken_for_this_one(ws: Workspace) -> None:
    child = walk_in_child(ws, ["docs/1"])
    assert child is not None
    assert _walked(child, ["docs/2"]) is None  # the ingest walks docs/2 itself
    again = walk_in_child(ws, ["docs/1"])
    assert again is not None
    taken = _walked(again, ["docs/1"])
    assert taken is not None and taken.found == walk(ws, ["docs/1"]).found


def test_a_child_let_go_unread_is_ended_and_reaped(tmp_path: Path) -> None:
    marker = tmp_path / "pid"

    def slow() -> int:
        # Written whole, then renamed: the parent never reads a marker still being written.
        written = tmp_path / "pid.tmp"
        written.write_text(str(os.getpid()))
        os.replace(written, marker)
        time.sleep(60)
        return 1

    child = in_child(slow)
    assert child is not None
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    pid = int(marker.read_text())
    started = time.monotonic()
    child.close()
    assert time.monotonic() - started < 5  # ended, not waited for
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone, and reaped: no zombie left behind
    with pytest.raises(ChildFailed):
        child.result()
    child.close()  # again: nothing to do


def test_an_ingest_that_walks_ahead_sees_what_one_that_walks_itself_sees(tmp_path: Path) -> None:
    """The same files ingested into two workspaces, one walked in a child: the same counts,
    the same files passed over and refused, the same generation; and a change after it is
    seen."""
    reports = []
    for ahead in (True, False):
        root = tmp_path / f"ahead-{ahead}"
        root.mkdir()
        init_workspace(root)
        for n in range(12):
            write(root, f"docs/note-{n:02d}.md", f"# Note {n}\n\nRetry {n} backs off.\n")
        write(root, "docs/picture.png", "not an image")
        write(root, "docs/bad\x01name.md", "refused\n")
        with Session.open(root) as kb:
            first = kb.ingest(walk_ahead=ahead).to_json()
            write(root, "docs/note-03.md", "# Note 3\n\nRetry 3 gives up.\n")
            second = kb.ingest(walk_ahead=ahead).to_json()
        reports.append((first, second))
    (first, second), (first_here, second_here) = reports
    for got, expected in ((first, first_here), (second, second_here)):
        assert got["counts"] == expected["counts"]
        assert got["skipped"] == expected["skipped"]
        assert got["findings"] == expected["findings"]
        assert got["generation"]["hash"] == expected["generation"]["hash"]
    assert second["counts"]["new_revisions"] == 1 and second["counts"]["unchanged"] == 11
    assert first["findings"] and first["skipped"]["unsupported_type"] == 1
