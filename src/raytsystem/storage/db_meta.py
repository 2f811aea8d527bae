"""Constants of the ledger schema, importable without SQLAlchemy."""

from typing import Final

# Every migration revision, oldest first. tests/test_ledger.py checks this against Alembic.
SCHEMA_REVISIONS: Final[tuple[str, ...]] = ("0001", "0002")
SCHEMA_HEAD: Final = SCHEMA_REVISIONS[-1]
BUSY_TIMEOUT_MS: Final = 10_000
