"""What `verify` checks of the ledger's and the index files' own form, beside their rows
(`integrity.py`): SQLite's structure check, references no foreign key holds, the evidence-ID
lists of claim states, and an index file's rows against its own records.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import Connection, text
from sqlalchemy.exc import SQLAlchemyError

from ..errors import database_corrupt
from . import index_file

# The references check looks every reference up in its parent's B-tree: with SQLite's default
# 2 MiB page cache that is slower on a 10,000-file ledger as with this one,
# as much as ingest's ledger connection has (staging.py).
REFERENCE_CHECK_CACHE_MIB = 256


QUICK_CHECK_LINES = 20  # problems `ledger_structure` asks SQLite for at most


def ledger_structure(conn: Connection) -> list[str]:
    """What SQLite's own check of the ledger file finds wrong with its structure (`PRAGMA
    quick_check`: every page of every table and index B-tree is read and its format checked,
    without comparing indexes with their tables, which `integrity_check` adds at several times
    the cost); empty when it finds nothing. A page a failing disk overwrote is found here even
    when no read of the rows would touch it. PostgreSQL has no such check without an extension:
    nothing is found there."""
    if conn.dialect.name != "sqlite":
        return []
    try:
        rows = conn.exec_driver_sql(f"PRAGMA quick_check({QUICK_CHECK_LINES})").all()
    except SQLAlchemyError as exc:
        damaged = database_corrupt(exc, ledger=True)
        if damaged is None:
            raise
        return [f"SQLite cannot check it: {damaged.details['said']}"]
    lines = [line for (text,) in rows for line in str(text).splitlines()]
    if lines == ["ok"]:
        return []
    roots = _root_pages(conn)
    return [
        _PAGE.sub(lambda m: f"{m[0]} ({roots[int(m[1])]})" if int(m[1]) in roots else m[0], line)
        for line in lines
        if not line.startswith("*** in database")
    ]


_PAGE = re.compile(r"\b(?:Page|page) ([0-9]+)")


def _root_pages(conn: Connection) -> dict[int, str]:
    """Root page -> "table NAME" / "index NAME": what a damaged page that is a root belongs to
    (empty if even the schema cannot be read)."""
    try:
        rows = conn.exec_driver_sql(
            "SELECT rootpage, type, name FROM sqlite_master WHERE rootpage > 0"
        ).all()
    except SQLAlchemyError:
        return {}
    return {int(page): f"{kind} {name}" for page, kind, name in rows}


class DanglingReference(NamedTuple):
    table: str
    rowid: int
    parent: str  # the table it refers to


def dangling_references(conn: Connection) -> list[DanglingReference]:
    """Rows whose reference leads to no row (`PRAGMA foreign_key_check`). SQLite checks them on
    insert except in an ingest's batches (`Staging.batch`, which checks its rows in memory
    instead); PostgreSQL always enforces them, so there this finds none."""
    if conn.dialect.name != "sqlite":
        return []
    (cache,) = conn.exec_driver_sql("PRAGMA cache_size").one()
    conn.exec_driver_sql(f"PRAGMA cache_size=-{REFERENCE_CHECK_CACHE_MIB * 1024}")
    dangling = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
    # Not in a `finally`: after a failed or interrupted (Ctrl-C) statement SQLAlchemy refuses
    # the connection any further statement, and that refusal would hide what happened.
    conn.exec_driver_sql(f"PRAGMA cache_size={int(cache)}")
    return [DanglingReference(table, rowid, parent) for table, rowid, parent, _fk in dangling]


class StateEvidenceProblem(NamedTuple):
    rowid: int  # of the claim state
    claim_id: str
    evidence_id: str
    owner: str | None  # the claim the evidence belongs to; None: no such evidence row


# The evidence IDs of every claim state, each with the evidence row it names, where there is
# none or it is another claim's. A JSON array is no foreign key, so neither database checks
# these. A text that is no JSON array is read as an empty one (a CASE, which SQLite evaluates
# in order: json_each and json_type raise on malformed JSON). PostgreSQL casts only texts that
# are arrays of plain strings (no escape, no control character: always valid JSON): a cast
# that failed would end the transaction. `verify_rows.check_claims` reports the rest.
_STATE_EVIDENCE_SQLITE = """
    SELECT cs.id, cs.claim_id, j.value, e.claim_id
    FROM claim_states cs, json_each(
        CASE WHEN NOT json_valid(cs.evidence_ids) THEN '[]'
             WHEN json_type(cs.evidence_ids) <> 'array' THEN '[]'
             ELSE cs.evidence_ids END
    ) j
    LEFT JOIN evidence e ON e.id = j.value
    WHERE e.id IS NULL OR e.claim_id <> cs.claim_id
    ORDER BY cs.id
    LIMIT :limit"""
_STATE_EVIDENCE_POSTGRESQL = r"""
    SELECT cs.id, cs.claim_id, j.value, e.claim_id
    FROM claim_states cs
    CROSS JOIN LATERAL jsonb_array_elements_text(
        CASE WHEN cs.evidence_ids ~ '^\[\s*("[^"\\[:cntrl:]]*"\s*(,\s*"[^"\\[:cntrl:]]*"\s*)*)?\]$'
             THEN cs.evidence_ids::jsonb ELSE '[]'::jsonb END
    ) AS j(value)
    LEFT JOIN evidence e ON e.id = j.value
    WHERE e.id IS NULL OR e.claim_id <> cs.claim_id
    ORDER BY cs.id
    LIMIT :limit"""


def state_evidence_problems(conn: Connection, limit: int) -> list[StateEvidenceProblem]:
    """Claim states that list an evidence ID with no evidence row, or another claim's (at
    most `limit`). One pass over the claim states, each evidence ID looked up by its key."""
    sql = _STATE_EVIDENCE_SQLITE if conn.dialect.name == "sqlite" else _STATE_EVIDENCE_POSTGRESQL
    rows = conn.execute(text(sql), {"limit": limit})
    return [StateEvidenceProblem._make(r) for r in rows]


class IndexFileCheck(NamedTuple):
    """An index file read in one snapshot: its records, and what its own check found."""

    meta: dict[str, str]
    current_format: bool  # False: written in another index format, and not checked
    problems: list[str]  # `index_file.check_rows`'s findings
    unreadable: str | None = None  # why the file cannot be read (nothing else is then known)


def check_index_file(path: Path) -> IndexFileCheck:
    """The file's records and its rows checked against them (`index_file.check_rows`)."""
    try:
        conn = sqlite3.connect(index_file.ro_uri(path), uri=True)
        try:
            conn.execute("BEGIN")  # one snapshot of the file
            meta = index_file.read_meta(conn)
            current = meta.get("format") == index_file.FORMAT
            problems = index_file.check_rows(conn) if current else []
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return IndexFileCheck({}, False, [], f"unreadable: {exc}")
    return IndexFileCheck(meta, current, problems)
