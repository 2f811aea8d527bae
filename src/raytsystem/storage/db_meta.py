"""Constants of the ledger schema, and reading its recorded ID scheme: importable without
SQLAlchemy (the query's sqlite3 reader uses them)."""

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
