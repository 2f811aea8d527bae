"""Progress bars of long work: drawn on stderr when it is a terminal (a pseudo-terminal here),
never with --json, never when stderr is not a terminal; the answer on stdout is the same."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli, write

SQLITE = {"RAYTSYSTEM_DATABASE_URL": ""}


def run_on_terminal(*args: str, cwd: Path) -> tuple[int, str, str]:
    """Run `raytsystem ARGS` with stderr on a pseudo-terminal: (status, stdout, terminal)."""
    env = {**os.environ, **SQLITE, "COLUMNS": "160"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    main, side = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "raytsystem", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=side,
    )
    os.close(side)
    seen = b""
    while True:
        ready, _, _ = select.select([main], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the other end closed: the process is gone
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    assert proc.stdout is not None
    out = proc.stdout.read().decode("utf-8")
    proc.wait(timeout=60)
    os.close(main)
    return proc.returncode, out, seen.decode("utf-8", "replace")


@pytest.fixture
def ws(tmp_path: Path, _workspace_template: Path) -> Path:
    import shutil

    root = tmp_path / "ws"
    shutil.copytree(_workspace_template, root, symlinks=True)
    for n in range(80):  # enough for the parallel path: its results come in chunks
        write(root, f"docs/note-{n:02d}.md", f"# Note {n}\n\nThe ledger keeps note {n}.\n")
    return root


def test_ingest_verify_and_rebuild_draw_bars_on_a_terminal(ws: Path) -> None:
    code, out, terminal = run_on_terminal("ingest", cwd=ws)
    assert code == 0 and out.startswith("generation 1 "), out
    assert "ingest: normalize" in terminal and "80/80" in terminal and " MB" in terminal
    code, out, terminal = run_on_terminal("verify", cwd=ws)
    assert code == 0 and out.startswith("ok: "), out
    assert "verify: index rows from the ledger" in terminal
    code, out, terminal = run_on_terminal("index", "rebuild", cwd=ws)
    assert code == 0 and "rebuilt" in out, out
    assert "index rebuild: index rows from the ledger" in terminal


def test_json_and_pipes_stay_quiet(ws: Path) -> None:
    code, out, terminal = run_on_terminal("ingest", "--json", cwd=ws)
    assert code == 0 and json.loads(out)["created"] and terminal == ""
    for args in (("verify", "--json"), ("index", "rebuild", "--json")):
        code, out, terminal = run_on_terminal(*args, cwd=ws)
        assert code == 0 and json.loads(out) and terminal == "", (args, terminal)
    write(ws, "docs/note-00.md", "# Note\n\nChanged.\n")
    piped = run_cli("ingest", cwd=ws, env=SQLITE)  # stderr is a pipe: no bar, not even codes
    assert piped.code == 0 and piped.stderr == ""
