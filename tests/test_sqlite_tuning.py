"""SQLite's process settings (storage/sqlite_tuning.py): they reach the SQLite that Python's
sqlite3 module uses, and the command line applies them only as the process's own command.

Each check runs in a fresh interpreter: the settings are process-wide and can only change
before the first connection, which this test process opened long ago.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

_PROBE = textwrap.dedent(
    """
    import atexit, ctypes, json, sqlite3, sys
    import _sqlite3
    tuned = None
    def report():
        lib = ctypes.CDLL(_sqlite3.__file__)
        lib.sqlite3_memory_used.restype = ctypes.c_int64
        conn = sqlite3.connect(":memory:")
        conn.execute("CREATE TABLE t (x)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(500)])
        rows = conn.execute("SELECT count(*), sum(x) FROM t").fetchone()
        print(json.dumps({"tuned": tuned, "counted": lib.sqlite3_memory_used(), "rows": rows}))
    if sys.argv[1] == "tune":
        from raytsystem.storage.sqlite_tuning import tune_process
        tuned = tune_process()
    elif sys.argv[1] == "cli":
        from raytsystem.cli import main
        # As the console script calls it (sys.argv holds the command); it ends the process,
        # after the exit handlers: the report is one.
        atexit.register(report)
        sys.argv[1:] = sys.argv[2:]  # the command after the probe's mode
        main()
    report()
    """
)


def _probe(mode: str, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_memory_statistics_are_off_in_the_sqlite_python_uses() -> None:
    plain = _probe("plain")
    assert plain["counted"] > 0  # SQLite counts by default
    tuned = _probe("tune")
    if tuned["tuned"] is False:
        pytest.skip("this Python's SQLite cannot be reached through _sqlite3 (no settings)")
    assert tuned["tuned"] is True
    assert tuned["counted"] == 0  # the same copy of SQLite: it stopped counting
    assert tuned["rows"] == plain["rows"] == [500, 124750]  # and works as before


def test_the_command_line_tunes_only_as_the_process_command() -> None:
    as_process = _probe("cli", "--version")
    assert as_process["counted"] == 0 or _probe("tune")["tuned"] is False
    # main(argv), as tests and embedders call it in a process that may hold connections,
    # leaves this process's SQLite as it is (shutting it down under open connections would
    # be undefined behaviour).
    import _sqlite3
    import ctypes
    import sqlite3

    from raytsystem.cli import main

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x)")
    with pytest.raises(SystemExit):
        main(["--version"])
    lib = ctypes.CDLL(_sqlite3.__file__)
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    assert lib.sqlite3_memory_used() > 0
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
