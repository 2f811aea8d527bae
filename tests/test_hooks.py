"""`raytsystem hooks install/uninstall` (issue 37) with real git: the hooks run an ingest
after a commit, a merge and a checkout, sit beside hooks that were there, come out cleanly,
and never fail the git command."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write

DOC = "# Payments\n\nRetries stop after at most 5 attempts.\n"
QUESTION = "how many retry attempts"
DEADLINE_S = 60.0
THEIRS = '#!/bin/sh\n# the team\'s own hook\necho ran >> "$(git rev-parse --git-dir)/theirs.log"\nexit 0\n'


def git(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def repo(workspace: Path) -> Path:
    assert git(workspace, "init", "-q").returncode == 0
    hooks = workspace / ".git" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    (hooks / "post-commit").write_text(THEIRS)
    (hooks / "post-commit").chmod(0o750)
    return workspace


def wait_for_answer(ws: Path, fact: str) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        result = run_cli("query", QUESTION, "--json", cwd=ws)
        if result.code == 0 and fact in result.json().get("answer", ""):
            body: dict[str, Any] = result.json()
            return body
        assert time.monotonic() < deadline, result.stdout + result.stderr
        time.sleep(0.2)


def test_hooks_ingest_after_commit_and_checkout_and_uninstall_cleanly(repo: Path) -> None:
    hooks = repo / ".git" / "hooks"
    installed = run_cli("hooks", "install", "--json", cwd=repo)
    assert installed.code == 0, installed.stderr
    actions = {Path(h["hook"]).name: h["action"] for h in installed.json()["hooks"]}
    assert actions == {
        "post-commit": "appended",
        "post-merge": "created",
        "post-checkout": "created",
    }
    mine = (hooks / "post-commit").read_text()
    # Their lines are kept, in order, and ours run before their final `exit`.
    assert mine.startswith("#!/bin/sh\n# the team's own hook\necho ran")
    assert mine.rstrip().endswith("exit 0")
    assert mine.index("# >>> raytsystem ingest >>>") < mine.index("exit 0")
    assert (hooks / "post-commit").stat().st_mode & 0o777 == 0o751  # their mode, executable
    # Installing again changes nothing but says so.
    again = run_cli("hooks", "install", "--json", cwd=repo).json()["hooks"]
    assert {h["action"] for h in again} == {"updated"}
    assert (hooks / "post-commit").read_text() == mine

    write(repo, "docs/payments.md", DOC)
    git(repo, "add", "-A")
    done = git(repo, "commit", "-qm", "docs")
    assert done.returncode == 0, done.stderr
    wait_for_answer(repo, "5 attempts")  # the post-commit hook ingested, in the background
    assert (repo / ".git" / "theirs.log").read_text() == "ran\n"  # their hook ran too

    write(repo, "docs/payments.md", DOC.replace("5 attempts", "6 attempts"))
    git(repo, "commit", "-qam", "six")
    wait_for_answer(repo, "6 attempts")
    assert git(repo, "checkout", "-q", "HEAD~1").returncode == 0  # post-checkout
    body = wait_for_answer(repo, "5 attempts")
    assert body["generation"]["number"] >= 3

    removed = run_cli("hooks", "uninstall", "--json", cwd=repo).json()["hooks"]
    actions = {Path(h["hook"]).name: h["action"] for h in removed}
    assert actions == {
        "post-commit": "removed",
        "post-merge": "deleted",
        "post-checkout": "deleted",
    }
    assert (hooks / "post-commit").read_text() == THEIRS  # byte for byte what it was
    assert not (hooks / "post-merge").exists() and not (hooks / "post-checkout").exists()
    again = run_cli("hooks", "uninstall", "--json", cwd=repo).json()["hooks"]
    assert {h["action"] for h in again} == {"absent"}


def test_a_failing_ingest_never_fails_the_git_command(repo: Path) -> None:
    assert run_cli("hooks", "install", cwd=repo).code == 0
    (repo / "raytsystem.toml").write_text("[ingest\nbroken = \n")  # every ingest fails
    write(repo, "docs/payments.md", DOC)
    git(repo, "add", "-A")
    done = git(repo, "commit", "-qm", "docs")
    assert done.returncode == 0, done.stderr
    assert git(repo, "checkout", "-q", "-b", "other").returncode == 0
    log = repo / ".raytsystem" / "hooks.log"
    deadline = time.monotonic() + DEADLINE_S
    while "config_invalid" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # The hook's interpreter gone (a venv removed): git still succeeds.
    hook = repo / ".git" / "hooks" / "post-commit"
    hook.write_text(hook.read_text().replace(sys.executable, "/nonexistent/python"))
    write(repo, "docs/more.md", DOC)
    git(repo, "add", "-A")
    assert git(repo, "commit", "-qm", "more").returncode == 0


def test_hooks_refuse_what_they_cannot_edit(repo: Path, tmp_path: Path) -> None:
    hook = repo / ".git" / "hooks" / "post-merge"
    hook.write_text("#!/usr/bin/env python3\nprint('theirs')\n")
    result = run_cli("hooks", "install", "--json", cwd=repo)
    assert result.code == 5 and result.json()["error"]["code"] == "hook_not_shell"
    # Nothing was written: not even the hooks it could have edited.
    assert "raytsystem" not in (repo / ".git" / "hooks" / "post-commit").read_text()
    assert not (repo / ".git" / "hooks" / "post-checkout").exists()

    plain = tmp_path / "plain"
    plain.mkdir()
    assert run_cli("init", cwd=plain).code == 0
    outside = run_cli(
        "hooks", "install", "--json", cwd=plain, env={"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    )
    assert outside.code == 5 and outside.json()["error"]["code"] == "not_a_git_repository"
