import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write


def test_ingest_then_query_answers_with_citation(workspace: Path) -> None:
    write(workspace, "docs/payments.md", "# Payments\n\nRetries stop after at most 5 attempts.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    result = run_cli("query", "retry attempts", "--json", cwd=workspace)
    assert result.code == 0, result.stderr
    body = result.json()
    assert body["status"] == "answered"
    assert body["citations"][0]["claim"]["statement"] == "Retries stop after at most 5 attempts."


def _raytsystem(workspace: Path, *args: str, **popen: Any) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run(
        [sys.executable, "-m", "raytsystem", "--workspace", str(workspace), *args],
        env=env,
        text=True,
        stderr=subprocess.PIPE,
        timeout=300,
        **popen,
    )


def test_the_process_ends_with_all_its_output_written(workspace: Path, tmp_path: Path) -> None:
    # main() ends the process without the interpreter's teardown (cli._end_process): what a
    # command printed, more than a buffer's worth, must still be in the file it went to.
    for i in range(40):
        write(workspace, f"docs/n{i:02d}.md", f"# Note {i}\n\nAlpha number {i} is a claim.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    out = tmp_path / "out.json"
    with out.open("w") as handle:
        done = _raytsystem(workspace, "search", "alpha", "--limit", "40", "--json", stdout=handle)
    assert done.returncode == 0, done.stderr
    body = json.loads(out.read_text(encoding="utf-8"))
    assert len(out.read_bytes()) > 8192 and len(json.dumps(body)) > 8192
    missing = _raytsystem(workspace, "show", "clm_" + "0" * 32, "--json", stdout=subprocess.PIPE)
    assert missing.returncode != 0 and json.loads(missing.stdout)["error"]["code"]


def test_a_reader_that_left_ends_the_command_quietly(workspace: Path) -> None:
    write(workspace, "docs/a.md", "# A\n\nAlpha is first.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    read, written = os.pipe()
    os.close(read)  # nobody will read what the command prints
    try:
        done = _raytsystem(workspace, "status", "--json", stdout=written)
    finally:
        os.close(written)
    assert done.returncode == 1  # click's status when the output cannot be written
    assert done.stderr == ""  # no traceback, no "Exception ignored" at exit


def test_a_command_started_without_stdout_or_stderr_still_ends_well(workspace: Path) -> None:
    # Started with its output streams closed (cron, daemons: `>&-`), Python has no
    # sys.stdout / sys.stderr at all; the end of the process must not trip over that.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for closing in (">&-", "2>&-"):
        done = subprocess.run(
            ["sh", "-c", f'exec "$0" -m raytsystem --workspace "$1" status --json {closing}',
             sys.executable, str(workspace)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, (closing, done.stderr)
        assert "Traceback" not in done.stderr


def test_an_error_raised_while_handling_ctrl_c_is_reported_as_the_interrupt() -> None:
    """Cleanup that fails because Ctrl-C cut a statement short (SQLAlchemy then refuses the
    connection) must not turn an interrupted command into an internal error."""
    from raytsystem.cli import during_interrupt

    try:
        try:
            raise KeyboardInterrupt
        finally:
            raise RuntimeError("Can't reconnect until invalid transaction is rolled back")
    except RuntimeError as exc:
        assert during_interrupt(exc)
    try:
        try:
            raise ValueError("a bug")
        except ValueError as inner:
            raise RuntimeError("while reporting it") from inner
    except RuntimeError as exc:
        assert not during_interrupt(exc)


def test_out_of_resources_is_found_anywhere_in_the_chain() -> None:
    import errno
    import sqlite3

    from raytsystem.errors import DatabaseError, out_of_resources

    def raised(exc: BaseException, cause: BaseException) -> BaseException:
        try:
            raise exc from cause
        except BaseException as caught:
            return caught

    full = OSError(errno.ENOSPC, "No space left on device", "/ws/_raw/packs/x")
    found = out_of_resources(raised(RuntimeError("the pool failed"), full))
    assert found is not None and found.code == "disk_full" and found.exit_status == 8
    assert "/ws/_raw/packs/x" in found.message
    memory = out_of_resources(raised(RuntimeError("wrapped"), MemoryError()))
    assert memory is not None and memory.code == "out_of_memory"
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.execute("PRAGMA max_page_count = 4")  # SQLite's own "full", for real
    try:
        with pytest.raises(sqlite3.OperationalError) as sqlite_full:
            conn.executemany("INSERT INTO t VALUES (?)", [("x" * 1000,)] * 100)
    finally:
        conn.close()
    translated = raised(DatabaseError("ledger database error: disk full"), sqlite_full.value)
    found = out_of_resources(translated)
    assert found is not None and found.code == "disk_full"
    assert out_of_resources(raised(RuntimeError("a bug"), OSError(errno.EACCES, "denied"))) is None
    assert out_of_resources(ValueError("a bug")) is None
