"""A read-only SQL runner for the hot read paths (query, search).

Importing SQLAlchemy costs more than the whole latency budget of a `raytsystem query`
process. So the read paths of query and search are
written as plain, portable SQL (named `:params`, quoted `"start"`/`"end"`) and run through this
runner: on the embedded SQLite ledger, by the standard library's sqlite3 module opened
read-only; on any other database, through a SQLAlchemy connection. The SQL text is the same for
both, and the tests run it on both. Writes always go through SQLAlchemy (`db.py`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import DatabaseError, Locked, SchemaTooNew, database_corrupt
from ..ids import NEWEST_SCHEME, IdScheme, scheme
from .db_meta import (
    BUSY_TIMEOUT_MS,
    ID_SCHEME_SQL,
    SCHEMA_HEAD,
    SCHEMA_REVISIONS,
    cannot_open,
    recorded_id_scheme,
    sqlite_path,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection


class Reader(Protocol):
    """A read-only snapshot of the ledger: `rows` runs plain SQL in it."""

    dialect: str
    ids: IdScheme  # the ledger's ID scheme

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]: ...

    def refresh(self) -> None:
        """End the current snapshot, so the next read sees what committed meanwhile."""

    def close(self) -> None: ...


def expand(name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """`IN (...)` placeholders for a list: (":n0, :n1", {"n0": .., "n1": ..})."""
    if not values:
        return "NULL", {}
    params = {f"{name}{i}": v for i, v in enumerate(values)}
    return ", ".join(f":{k}" for k in params), params


class SqliteReader:
    dialect = "sqlite"

    def __init__(self, path: str) -> None:
        self._path = path
        try:
            self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
            self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            self._conn.execute("BEGIN")  # one snapshot for the whole read
            self._check_schema()
            recorded = self._conn.execute(ID_SCHEME_SQL).fetchone()
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise Locked(f"the ledger database is locked: {exc}") from exc
            raise DatabaseError(f"cannot open the ledger {path}: {exc}", code="no_ledger") from exc
        except sqlite3.DatabaseError as exc:
            if (damaged := database_corrupt(exc, ledger=True)) is not None:
                raise damaged from exc
            raise
        try:  # as open_ledger does
            number = recorded_id_scheme(None if recorded is None else str(recorded[0]))
        except DatabaseError:
            self._conn.close()
            raise
        self.ids = scheme(number or NEWEST_SCHEME)

    def _check_schema(self) -> None:
        try:
            row = self._conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise DatabaseError(cannot_open(self._path, exc)) from exc
            row = None
        current = row[0] if row else None
        if current is None:
            raise DatabaseError(
                "the ledger is empty: run `raytsystem ingest` first", code="no_ledger"
            )
        if current not in SCHEMA_REVISIONS:
            raise SchemaTooNew(
                f"the ledger schema is at revision {current}, newer than this raytsystem "
                f"(which knows up to {SCHEMA_HEAD}); upgrade raytsystem",
                found=current,
                supported=SCHEMA_HEAD,
            )
        if current != SCHEMA_HEAD:
            raise DatabaseError(
                f"the ledger schema is at revision {current}: run `raytsystem ingest` to upgrade it",
                code="schema_outdated",
            )

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        try:
            return self._conn.execute(sql, dict(params or {})).fetchall()
        except sqlite3.DatabaseError as exc:
            if (damaged := database_corrupt(exc, ledger=True)) is not None:
                raise damaged from exc
            raise

    def refresh(self) -> None:
        self._conn.execute("ROLLBACK")
        self._conn.execute("BEGIN")

    def close(self) -> None:
        self._conn.close()


class AlchemyReader:
    def __init__(self, url: str) -> None:
        from .db import open_ledger

        self._ledger = open_ledger(url, create=False)
        self.dialect = self._ledger.dialect
        self.ids = self._ledger.ids
        self._conn = self._ledger.engine.connect()
        if self.dialect == "postgresql":
            self._conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        from sqlalchemy import text

        return [tuple(r) for r in self._conn.execute(text(sql), dict(params or {}))]

    def refresh(self) -> None:
        self._conn.rollback()
        if self.dialect == "postgresql":
            self._conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def close(self) -> None:
        self._conn.close()
        self._ledger.close()


def open_reader(url: str) -> Reader:
    path = sqlite_path(url)
    return SqliteReader(path) if path is not None else AlchemyReader(url)


class Rows(Protocol):
    """What reads plain SQL: a `Reader`, or a SQLAlchemy connection through `as_rows`."""

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]: ...


class ConnectionRows:
    """A SQLAlchemy connection read as `Rows`, in its current transaction."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        from sqlalchemy import text

        return [tuple(r) for r in self.conn.execute(text(sql), dict(params or {}))]


def as_rows(source: Rows | Connection) -> Rows:
    """`source` as `Rows`: a reader as it is, a SQLAlchemy connection wrapped."""
    if hasattr(source, "rows"):
        return source
    return ConnectionRows(source)
