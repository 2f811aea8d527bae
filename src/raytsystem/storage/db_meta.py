"""Constants of the ledger schema, and reading its recorded ID scheme: importable without
SQLAlchemy (the query's sqlite3 reader uses them)."""

import os
from pathlib import Path
from typing import Final

from ..errors import DatabaseError
from ..ids import SCHEMES

# Every migration revision, oldest first. tests/test_ledger.py checks this against Alembic.
SCHEMA_REVISIONS: Final[tuple[str, ...]] = ("0001", "0002", "0003", "0004", "0005")
SCHEMA_HEAD: Final = SCHEMA_REVISIONS[-1]
BUSY_TIMEOUT_MS: Final = 10_000

ID_SCHEME_SQL: Final = "SELECT value FROM settings WHERE name = 'id_scheme'"


def recorded_id_scheme(value: str | None) -> int | None:
    """The scheme a ledger records (`value`, what `ID_SCHEME_SQL` found); None when it records
    none yet (an empty ledger, whose first ingest records one)."""
    scheme = None if value is None else _SCHEMES_BY_VALUE.get(value)
    if value is not None and scheme is None:
        raise DatabaseError(
            f"the ledger records ID scheme {value!r}, which this raytsystem does not know "
            f"(it knows {', '.join(map(str, SCHEMES))}): upgrade raytsystem, or, if the "
            "ledger's settings table was edited by hand, restore it",
            code="unknown_id_scheme",
        )
    return scheme


_SCHEMES_BY_VALUE: Final = {str(s): s for s in SCHEMES}


def cannot_open(path: str, reason: object) -> str:
    """Why SQLite could not open the ledger at `path`, as far as the files beside it tell. In
    WAL mode even a reader needs the write-ahead log and its index beside the ledger (made on
    first use): a folder where one should be, or a folder it cannot create them in, stops it
    with SQLite's bare 'unable to open database file'."""
    ledger = Path(path)
    for suffix in ("-wal", "-shm"):
        beside = ledger.with_name(ledger.name + suffix)
        if beside.exists() and not beside.is_file():
            return (
                f"cannot open the ledger {ledger}: {beside.name} beside it, where SQLite keeps "
                "the write-ahead log, is not a file; move it away"
            )
    folder = ledger.parent
    if not os.access(folder, os.W_OK):
        return (
            f"cannot open the ledger {ledger}: its folder {folder} is read-only, and SQLite "
            "needs to create the write-ahead log files there even to read; make it writable"
        )
    return f"cannot open the ledger {ledger}: {reason}"


def sqlite_path(url: str) -> str | None:
    """The file path of a `sqlite:///path` URL, or None for other databases."""
    dialect, sep, rest = url.partition(":///")
    if not sep or dialect.split("+")[0] != "sqlite" or not rest or "?" in rest:
        return None
    return rest
