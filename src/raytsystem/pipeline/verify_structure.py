"""VERIFY's check of the ledger as a database file, before its rows are read: SQLite's own
check of every page (`ledger_corrupt`), the settings every ID depends on (`settings_missing`),
and what the rest of the checks do when they meet a damaged page all the same: they stop, and
say so in the report, instead of the command failing with the database's error.

A ledger that cannot even be opened is no report at all: the command fails with
`database_corrupt` (exit 6, `errors.database_corrupt`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import database_corrupt
from ..ids import IdScheme
from ..storage import damage, integrity
from .verify_report import VerifyReport

if TYPE_CHECKING:
    from sqlalchemy import Connection

SHOWN_PROBLEMS = 5  # lines of SQLite's check quoted in the finding


def check_structure(conn: Connection, report: VerifyReport) -> None:
    """SQLite's check of every page of the ledger file (`damage.ledger_structure`)."""
    problems = damage.ledger_structure(conn)
    if problems:
        shown = "; ".join(problems[:SHOWN_PROBLEMS])
        more = len(problems) - SHOWN_PROBLEMS
        report.add(
            "error",
            "ledger_corrupt",
            "ledger",
            f"SQLite finds the ledger file damaged: {shown}"
            + (f" (and {more} more problems)" if more > 0 else ""),
        )


def check_settings(conn: Connection, ids: IdScheme, report: VerifyReport) -> None:
    """A ledger that holds sources records the ID scheme they were derived by: without it,
    every command derives IDs by the newest scheme, whatever the ledger's are."""
    if integrity.recorded_setting(conn, "id_scheme") is None and integrity.has_sources(conn):
        report.add(
            "error",
            "settings_missing",
            "settings:id_scheme",
            "the ledger holds sources but records no ID scheme (its settings row is gone): "
            f"its IDs were checked by scheme {ids.number}",
        )


@dataclass
class Reading:
    """Which check is reading the ledger (`stops_at_damage`)."""

    check: str = ""


@contextlib.contextmanager
def stops_at_damage(report: VerifyReport) -> Iterator[Reading]:
    """Run the checks that read the ledger; if one meets a damaged page, the rest are skipped
    and the report says which check met it (`ledger_corrupt`). Set `Reading.check` as each
    check starts."""
    reading = Reading()
    try:
        yield reading
    except Exception as exc:
        damaged = database_corrupt(exc, ledger=True)
        if damaged is None:
            raise
        report.add(
            "error",
            "ledger_corrupt",
            "ledger",
            f"reading the ledger to check {reading.check} met a damaged page "
            f"({damaged.details['said']}): that check and those after it were not finished",
        )
