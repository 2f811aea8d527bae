"""The ledger's index digests and the index format they are of (ADR 0041, pipeline/rebuild.py):
a ledger whose digests were recorded by another format still answers (with the weaker check of
a ledger that records none), and `index rebuild` of the current generation records this
format's digests, after which every check is whole again. End to end through the CLI."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from conftest import Backend, run_cli, write

from raytsystem.storage import index_file


def test_digests_of_another_format_are_not_compared_until_a_rebuild_records_them(
    workspace: Path, backend: Backend
) -> None:
    write(workspace, "docs/a.md", "# Retries\n\nRetries stop after five attempts.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    question = ("query", "How many retry attempts?", "--json")
    with backend.db(workspace) as db:
        assert db.execute("SELECT value FROM settings WHERE name = 'index_format'") == [
            (index_file.FORMAT,)
        ]
        # What a ledger of index format 9 looks like to this raytsystem: no `index_format`,
        # digests of other rows.
        db.execute("DELETE FROM settings WHERE name = 'index_format'")
        db.execute("UPDATE generations SET index_digest = ?", ("0" * 64,))
        db.execute("UPDATE source_states SET index_digest = ?", ("0" * 64,))
    answered = run_cli(*question, cwd=workspace)
    assert answered.code == 0, answered.stdout
    assert answered.json()["status"] == "answered"

    rebuilt = run_cli("index", "rebuild", "--json", cwd=workspace)
    assert rebuilt.code == 0, rebuilt.stdout
    report = rebuilt.json()
    assert report["digests_recorded"] is True
    with backend.db(workspace) as db:
        assert db.execute("SELECT value FROM settings WHERE name = 'index_format'") == [
            (index_file.FORMAT,)
        ]
        (recorded,) = db.execute("SELECT index_digest FROM generations")
        states = db.execute("SELECT index_digest FROM source_states")
    assert recorded == (report["rows_digest"],)
    with sqlite3.connect(index_file.ro_uri(Path(report["path"])), uri=True) as conn:
        assert {d for (d,) in states} == set(index_file.recorded_digests(conn).values())
    assert run_cli(*question, cwd=workspace).code == 0
    again = run_cli("index", "rebuild", "--json", cwd=workspace)
    assert again.json()["digests_recorded"] is False

    # The check is whole again: a recorded digest that does not match fails closed.
    with backend.db(workspace) as db:
        db.execute("UPDATE source_states SET index_digest = ?", ("0" * 64,))
    failed = run_cli(*question, cwd=workspace)
    assert failed.code != 0 and failed.json()["error"]["code"] == "index_row_mismatch"
