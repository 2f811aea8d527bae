"""The ledger database: Alembic-made schema, connection pragmas, and the schema-version guard.

Real SQLite files in tmp_path throughout. The models and the migrations describe the same
schema twice; `compare_metadata` proves they agree. A database from a newer raytsystem must be
refused untouched, both by the library and through the CLI. The slow test builds the wheel and
proves the packaged migrations work from an installed copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.config import Config as AlembicConfig
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from conftest import REPO, Backend, run_cli, write

from raytsystem.errors import DatabaseError, SchemaTooNew
from raytsystem.storage.db import (
    SQLITE_PAGE_SIZE,
    Ledger,
    migrations_dir,
    open_ledger,
    sqlite_url,
)
from raytsystem.storage.db_meta import BUSY_TIMEOUT_MS, SCHEMA_HEAD, SCHEMA_REVISIONS
from raytsystem.storage.tables import metadata


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite3"


@pytest.fixture
def ledger(db_path: Path) -> Iterator[Ledger]:
    opened = open_ledger(sqlite_url(db_path))
    yield opened
    opened.close()


def _sql(path: Path, *statements: str) -> list[tuple[object, ...]]:
    """Run statements with the plain sqlite3 module (no pragmas of ours); return the last rows."""
    rows: list[tuple[object, ...]] = []
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for statement in statements:
            rows = conn.execute(statement).fetchall()
    return rows


def _tables(path: Path) -> set[str]:
    rows = _sql(path, "SELECT name FROM sqlite_master WHERE type = 'table'")
    return {str(r[0]) for r in rows if not str(r[0]).startswith("sqlite_")}


def _version(path: Path) -> str:
    return str(_sql(path, "SELECT version_num FROM alembic_version")[0][0])


def _set_version(path: Path, version: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE alembic_version SET version_num = ?", (version,))


def _bare_future_database(path: Path, journal_mode: str) -> None:
    _sql(
        path,
        f"PRAGMA journal_mode={journal_mode}",
        "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)",
        "INSERT INTO alembic_version VALUES ('9999')",
    )


def _fingerprint(path: Path) -> tuple[str, list[str]]:
    """The database file's bytes and its folder's listing: what 'left unchanged' means."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), sorted(os.listdir(path.parent))


def _script_directory() -> ScriptDirectory:
    config = AlembicConfig()
    config.set_main_option("script_location", str(migrations_dir()))
    return ScriptDirectory.from_config(config)


# --- creation and pragmas ----------------------------------------------------------------------


def test_open_ledger_creates_the_schema_with_alembic(ledger: Ledger, db_path: Path) -> None:
    assert db_path.is_file()
    assert set(metadata.tables) | {"alembic_version"} == _tables(db_path)
    assert _version(db_path) == SCHEMA_HEAD
    assert ledger.dialect == "sqlite"


@pytest.mark.parametrize(
    ("pragma", "expected"),
    [
        ("journal_mode", "wal"),
        ("foreign_keys", 1),
        ("busy_timeout", BUSY_TIMEOUT_MS),
        ("synchronous", 2),  # FULL
        ("page_size", SQLITE_PAGE_SIZE),  # set when the ledger was made
    ],
)
def test_every_connection_gets_the_pragmas(ledger: Ledger, pragma: str, expected: object) -> None:
    # NullPool: each connect() is a new SQLite connection, so check more than one.
    for _ in range(2):
        with ledger.engine.connect() as conn:
            assert conn.exec_driver_sql(f"PRAGMA {pragma}").scalar() == expected


def test_an_existing_ledger_keeps_its_page_size(db_path: Path) -> None:
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA page_size=4096")
        conn.execute("CREATE TABLE made_before (x)")
    open_ledger(sqlite_url(db_path), create=True).close()
    assert _sql(db_path, "PRAGMA page_size") == [(4096,)]


def test_foreign_keys_are_enforced(ledger: Ledger) -> None:
    revisions = metadata.tables["revisions"]
    with pytest.raises(sa.exc.IntegrityError), ledger.transaction() as conn:
        conn.execute(
            revisions.insert().values(
                id="rev_x",
                source_id="src_missing",
                blob="a" * 64,
                size=1,
                media_type="text/markdown",
                first_seen_at="2026-01-01T00:00:00Z",
            )
        )


def test_transaction_commits_and_reading_sees_it(ledger: Ledger) -> None:
    sources = metadata.tables["sources"]
    with ledger.transaction() as conn:
        conn.execute(sources.insert().values(id="src_a", path="a.md", first_seen_at="t"))
    with ledger.reading() as conn:
        assert conn.execute(sa.select(sources.c.path)).scalars().all() == ["a.md"]


def test_transaction_rolls_back_on_error(ledger: Ledger) -> None:
    sources = metadata.tables["sources"]
    with pytest.raises(RuntimeError), ledger.transaction() as conn:
        conn.execute(sources.insert().values(id="src_a", path="a.md", first_seen_at="t"))
        raise RuntimeError("boom")
    with ledger.reading() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(sources)).scalar() == 0


def test_reopening_a_current_ledger_keeps_its_rows(ledger: Ledger, db_path: Path) -> None:
    sources = metadata.tables["sources"]
    with ledger.transaction() as conn:
        conn.execute(sources.insert().values(id="src_a", path="a.md", first_seen_at="t"))
    ledger.close()
    again = open_ledger(sqlite_url(db_path), create=False)
    try:
        with again.reading() as conn:
            assert conn.execute(sa.select(sources.c.id)).scalars().all() == ["src_a"]
    finally:
        again.close()
    assert _version(db_path) == SCHEMA_HEAD


# --- migrations agree with the code ------------------------------------------------------------


def test_schema_revisions_match_the_alembic_scripts() -> None:
    script = _script_directory()
    oldest_first = tuple(reversed([rev.revision for rev in script.walk_revisions()]))
    assert oldest_first == SCHEMA_REVISIONS
    assert script.get_heads() == [SCHEMA_HEAD]


def test_migrations_dir_is_the_alembic_script_directory() -> None:
    folder = migrations_dir()
    assert (folder / "env.py").is_file()
    assert sorted(p.name for p in (folder / "versions").glob("*.py"))


def test_migrated_schema_matches_the_models(ledger: Ledger) -> None:
    with ledger.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, metadata) == []


def test_schema_comparison_would_catch_a_model_change(ledger: Ledger) -> None:
    # The negative control for the test above: a model the migrations lack is reported.
    changed = sa.MetaData()
    for table in metadata.tables.values():
        table.to_metadata(changed)
    changed.tables["sources"].append_column(sa.Column("title", sa.Text, nullable=True))
    sa.Table("extra", changed, sa.Column("id", sa.Integer, primary_key=True))
    with ledger.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        kinds = {diff[0] for diff in compare_metadata(context, changed)}
    assert {"add_table", "add_column"} <= kinds


# --- the schema-version guard ------------------------------------------------------------------


def test_unknown_revision_raises_schema_too_new(ledger: Ledger, db_path: Path) -> None:
    ledger.close()
    _set_version(db_path, "9999")
    before = _fingerprint(db_path)
    with pytest.raises(SchemaTooNew) as info:
        open_ledger(sqlite_url(db_path))
    assert info.value.code == "schema_too_new"
    assert info.value.exit_status == 6
    assert info.value.details == {"found": "9999", "supported": SCHEMA_HEAD}
    assert _fingerprint(db_path) == before
    assert _version(db_path) == "9999"


def test_schema_too_new_runs_no_migration_on_a_bare_database(db_path: Path) -> None:
    # Only a version table from "the future": nothing of ours may be created next to it.
    _bare_future_database(db_path, "wal")
    before = _fingerprint(db_path)
    for create in (True, False):
        with pytest.raises(SchemaTooNew):
            open_ledger(sqlite_url(db_path), create=create)
    assert _tables(db_path) == {"alembic_version"}
    assert _fingerprint(db_path) == before


def test_schema_too_new_leaves_a_rollback_journal_database_byte_identical(
    db_path: Path,
) -> None:
    _bare_future_database(db_path, "delete")
    before = _fingerprint(db_path)
    with pytest.raises(SchemaTooNew):
        open_ledger(sqlite_url(db_path))
    assert _fingerprint(db_path) == before


def test_create_false_on_empty_database_is_no_ledger(db_path: Path) -> None:
    with pytest.raises(DatabaseError) as info:
        open_ledger(sqlite_url(db_path), create=False)
    assert info.value.code == "no_ledger"
    assert info.value.exit_status == 6
    assert not db_path.exists() or _tables(db_path) == set()


def test_unopenable_database_is_a_database_error(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError):
        open_ledger(sqlite_url(tmp_path / "missing-folder" / "ledger.sqlite3"))


# --- through the CLI ---------------------------------------------------------------------------


def _too_new_workspace(workspace: Path, backend: Backend) -> Path:
    """Mark the test's ledger (SQLite or PostgreSQL) as written by a future raytsystem."""
    db = workspace / ".raytsystem" / "ledger.sqlite3"
    open_ledger(backend.url or sqlite_url(db)).close()
    with backend.db(workspace) as conn:
        conn.execute("UPDATE alembic_version SET version_num = ?", ("9999",))
    return db


def _backend_version(workspace: Path, backend: Backend) -> str:
    with backend.db(workspace) as conn:
        return str(conn.execute("SELECT version_num FROM alembic_version")[0][0])


def test_cli_status_on_too_new_ledger_exits_6(workspace: Path, backend: Backend) -> None:
    _too_new_workspace(workspace, backend)
    result = run_cli("status", cwd=workspace)
    assert result.code == 6
    assert result.stderr.startswith("error[schema_too_new]: ")
    assert "9999" in result.stderr
    assert result.stdout == ""
    assert _backend_version(workspace, backend) == "9999"


def test_cli_status_json_on_too_new_ledger_prints_error_envelope(
    workspace: Path, backend: Backend
) -> None:
    _too_new_workspace(workspace, backend)
    result = run_cli("status", "--json", cwd=workspace)
    assert result.code == 6
    body = result.json()
    assert body["error"]["code"] == "schema_too_new"
    assert body["error"]["details"] == {"found": "9999", "supported": SCHEMA_HEAD}
    assert "9999" in body["error"]["message"]


def test_cli_ingest_on_too_new_ledger_writes_nothing(workspace: Path, backend: Backend) -> None:
    db = _too_new_workspace(workspace, backend)
    write(workspace, "docs/a.md", "# A\n\nA sentence.\n")
    before = _fingerprint(db)
    result = run_cli("ingest", cwd=workspace)
    assert result.code == 6
    assert "error[schema_too_new]" in result.stderr
    assert not (workspace / "_raw" / "blake3").exists()
    assert _fingerprint(db) == before
    with backend.db(workspace) as conn:
        assert conn.execute("SELECT count(*) FROM sources") == [(0,)]
    assert _backend_version(workspace, backend) == "9999"


# --- the packaged wheel ------------------------------------------------------------------------


@pytest.mark.slow
def test_wheel_carries_working_migrations(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    # A clean environment: nothing may leak the source checkout into the installed copy.
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}

    def run(*args: str | Path, cwd: Path = tmp_path) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, f"{args}\n{proc.stdout}\n{proc.stderr}"
        return proc

    dist = tmp_path / "dist"
    run(uv, "build", "--wheel", "-o", dist, cwd=REPO)
    (wheel,) = dist.glob("raytsystem-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "raytsystem/_migrations/env.py" in names
    assert any(n.startswith("raytsystem/_migrations/versions/") for n in names)

    venv = tmp_path / "venv"
    run(uv, "venv", venv)
    python = venv / "bin" / "python"
    run(uv, "pip", "install", "--python", python, wheel)

    where = run(
        python,
        "-c",
        "import raytsystem.storage.db as d; print(d.__file__); print(d.migrations_dir())",
    ).stdout.split()
    assert Path(where[0]).is_relative_to(venv)
    assert Path(where[1]) == Path(where[0]).parents[1] / "_migrations"

    ws = tmp_path / "ws"
    ws.mkdir()
    write(ws, "docs/payments.md", "# Payments\n\nRetries stop after at most 5 attempts.\n")
    raytsystem = venv / "bin" / "raytsystem"
    run(raytsystem, "init", cwd=ws)
    report = json.loads(run(raytsystem, "ingest", "--json", cwd=ws).stdout)
    assert report["created"] is True
    assert report["counts"]["new_sources"] == 1
    assert _version(ws / ".raytsystem" / "ledger.sqlite3") == SCHEMA_HEAD


def test_row_tuples_have_their_tables_columns_in_order() -> None:
    """Ingest inserts these NamedTuples as they are: a field out of place would write a
    value into the wrong column of an immutable row."""
    from raytsystem.model.objects import ClaimRow, EvidenceRow, SegmentRow
    from raytsystem.storage.tables import Claim, Evidence, Segment

    for row, model in ((SegmentRow, Segment), (ClaimRow, Claim), (EvidenceRow, Evidence)):
        assert row._fields == tuple(c.name for c in model.columns), row.__name__
