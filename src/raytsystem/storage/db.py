"""Opening the ledger database: engines, pragmas, migrations and the schema-version guard.

The ledger is any SQLAlchemy database: an embedded SQLite file by default
(`.raytsystem/ledger.sqlite3`, WAL, foreign keys, a busy timeout) or PostgreSQL. Its schema is
created and upgraded only by the Alembic migrations in `migrations/`, run from code. Alembic is
imported only when the schema is behind, because importing it costs about a second here and
most commands find the schema current.

A database whose schema revision this code does not know was written by a newer raytsystem:
opening it raises `SchemaTooNew` instead of running anything against it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.pool import NullPool

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

INSERT_CHUNK = 5000  # rows per executemany


def migrations_dir() -> Path:
    """The Alembic script directory: packaged in the wheel, or top-level in a source checkout."""
    here = Path(__file__).resolve()
    for candidate in (here.parent.parent / "_migrations", here.parents[3] / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise DatabaseError("the ledger migrations are missing from this installation")


SQLITE_PAGE_SIZE: Final = 16384
READ_CACHE_MIB: Final = 64  # each ledger connection's page cache (ingest's writer sets more)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # journal_mode=WAL is set once by open_ledger, after the schema check: it writes to the
    # file, and a ledger from a newer raytsystem must be left byte for byte as it was.
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if cursor.execute("PRAGMA page_count").fetchone()[0] == 0:
        # A new file: its page size holds from its first write on (nothing changes it later
        # short of a VACUUM, which raytsystem never runs). Rows of random-keyed IDs went in
        # Faster than SQLite's 4 KiB for ingest's wide rows (ADR 0032).
        cursor.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")
    # FULL: a generation whose head moved must survive power loss, not only a process crash.
    cursor.execute("PRAGMA synchronous=FULL")
    # Reads join IDs that are hashes, so they hop between pages all over each index: with
    # SQLite's 2 MiB default the pages of one query evict each other (ADR 0023).
    # Pages are allocated as they are read.
    cursor.execute(f"PRAGMA cache_size=-{READ_CACHE_MIB * 1024}")
    cursor.close()


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


@dataclass
class Ledger:
    """An open ledger database. `transaction()` is the one way to write.

    `id_scheme`: the scheme the ledger's IDs are derived by (None until its first ingest
    records one: `record_id_scheme`); `ids` derives by it."""

    engine: Engine
    url: str
    id_scheme: int | None = None

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def ids(self) -> IdScheme:
        """The ledger's ID scheme; the newest while it records none (it holds no ID yet)."""
        return scheme(self.id_scheme or NEWEST_SCHEME)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except OperationalError as exc:
            raise translate_error(exc) from exc

    @contextlib.contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection for reads; with SQLite, one consistent snapshot for its whole life."""
        try:
            with self.engine.connect() as conn:
                if self.dialect == "sqlite":
                    conn.exec_driver_sql("BEGIN")
                yield conn
                conn.rollback()
        except OperationalError as exc:
            raise translate_error(exc) from exc

    def close(self) -> None:
        self.engine.dispose()


def insert_rows(
    conn: Connection,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    existing: str = "fail",
    fixed: Mapping[str, int] | None = None,
) -> None:
    """Insert rows given as tuples in `columns` order, straight through the driver's
    executemany: several times faster than row dictionaries through SQLAlchemy's statement
    layer, for the hundreds of thousands of rows of a cold ingest. `existing="skip"` ignores
    rows whose key is already there (`ON CONFLICT DO NOTHING`, the same on SQLite and
    PostgreSQL): immutable, content-addressed rows written twice are one row. `fixed` gives
    integer columns the same value in every row, written into the statement (rows that would
    each be copied to add it go as they are)."""
    if not rows:
        return
    mark = "%s" if conn.dialect.paramstyle in ("format", "pyformat") else "?"
    fixed = fixed or {}
    quoted = ", ".join(f'"{c}"' for c in [*columns, *fixed])
    marks = ", ".join([mark for _ in columns] + [str(int(v)) for v in fixed.values()])
    sql = f"INSERT INTO {table} ({quoted}) VALUES ({marks})"
    if existing == "skip":
        sql += " ON CONFLICT DO NOTHING"
    for i in range(0, len(rows), INSERT_CHUNK):
        conn.exec_driver_sql(sql, list(rows[i : i + INSERT_CHUNK]))


def translate_error(exc: OperationalError, url: str | None = None) -> DatabaseError | Locked:
    """Ours for an error of the ledger database; `url`: the ledger's, when it was being
    opened (an embedded one that SQLite cannot open is explained, `cannot_open`)."""
    message = str(exc.orig) if exc.orig is not None else str(exc)
    if "locked" in message or "busy" in message:
        return Locked(f"the ledger database is locked by another process: {message}")
    path = sqlite_path(url) if url is not None else None
    if path is not None and "unable to open database file" in message:
        return DatabaseError(cannot_open(path, message))
    return DatabaseError(f"ledger database error: {message}")


def schema_revision(conn: Connection) -> str | None:
    try:
        row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    except SQLAlchemyError as exc:
        if database_corrupt(exc) is not None:
            raise  # a damaged file is not an empty ledger (and must never be migrated)
        conn.rollback()
        return None
    return None if row is None else str(row[0])


def ledger_engine(url: str) -> Engine:
    """An engine for the ledger at `url`, its connections set up as every command's are; no
    schema check (`open_ledger` does that): for a helper process of a command that has."""
    if url.startswith("sqlite"):
        engine = create_engine(url, poolclass=NullPool)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


def open_ledger(url: str, *, create: bool = True) -> Ledger:
    """Open (and, when behind, migrate) the ledger at `url`.

    `create=False` refuses to make a new schema in an empty database, for read-only commands.
    """
    try:
        engine = ledger_engine(url)
        with engine.connect() as conn:
            current = schema_revision(conn)
            recorded = _recorded_scheme(conn) if current == SCHEMA_HEAD else None
    except OperationalError as exc:
        raise translate_error(exc, url) from exc
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        raise DatabaseError(f"cannot open the ledger at {redact(url)}: {exc}") from exc
    if current is not None and current not in SCHEMA_REVISIONS:
        engine.dispose()
        raise SchemaTooNew(
            f"the ledger schema is at revision {current}, newer than this raytsystem "
            f"(which knows up to {SCHEMA_HEAD}); upgrade raytsystem, never downgrade the ledger",
            found=current,
            supported=SCHEMA_HEAD,
        )
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")
    if current != SCHEMA_HEAD:
        if current is None and not create:
            engine.dispose()
            raise DatabaseError(
                "the ledger is empty: run `raytsystem ingest` first", code="no_ledger"
            )
        upgrade(engine)
        try:
            with engine.connect() as conn:
                recorded = _recorded_scheme(conn)
        except OperationalError as exc:
            raise translate_error(exc) from exc
    try:
        id_scheme = recorded_id_scheme(recorded)
    except DatabaseError:
        engine.dispose()
        raise
    return Ledger(engine=engine, url=url, id_scheme=id_scheme)


def _recorded_scheme(conn: Connection) -> str | None:
    row = conn.exec_driver_sql(ID_SCHEME_SQL).first()
    return None if row is None else str(row[0])


def record_id_scheme(ledger: Ledger, wanted: int) -> int | None:
    """Record `wanted` as the ledger's ID scheme if it has derived no ID yet (it has no
    source: new, or its first ingest failed or found no file), and return the ledger's scheme,
    which the caller checks against `wanted`."""
    if ledger.id_scheme != wanted:
        with ledger.transaction() as conn:
            found = _recorded_scheme(conn)  # another process may have recorded one meanwhile
            if found != str(wanted) and conn.execute(_ANY_SOURCE).first() is None:
                conn.execute(_FORGET_SCHEME)
                insert_rows(conn, "settings", ("name", "value"), [("id_scheme", str(wanted))])
                found = str(wanted)
        ledger.id_scheme = recorded_id_scheme(found)
    return ledger.id_scheme


_ANY_SOURCE: Final = text("SELECT 1 FROM sources LIMIT 1")
_FORGET_SCHEME: Final = text("DELETE FROM settings WHERE name = 'id_scheme'")


def upgrade(engine: Engine) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    except OperationalError as exc:
        raise translate_error(exc) from exc


def redact(url: str) -> str:
    """Hide a password in a database URL before it appears in a message."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparsable database URL>"
