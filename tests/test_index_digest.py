"""A query hashes a cited source's rows as the bytes SQLite holds (`stored_rows_digest`); the
digest must be the one ingest computes from the rows' fields (`source_rows_digest`)."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from raytsystem.storage import index_file
from raytsystem.storage.index_file import IndexRow

SOURCE = "src_0001"
# Any text SQLite stores as UTF-8: surrogates cannot be encoded, so none are drawn.
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
# Mostly short and alike, so rows often share a prefix and the order is decided late.
_FIELD = st.one_of(st.sampled_from(["", "a", "ab", "a b", "é", "語", "\U0001f600"]), _TEXT)


@st.composite
def _rows(draw: st.DrawFn) -> list[tuple[str, ...]]:
    rows = []
    kinds = draw(st.lists(st.sampled_from(sorted(index_file.FTS_TABLES)), max_size=12))
    for kind in kinds:
        fields = [draw(_FIELD) for _ in IndexRow._fields]
        fields[0], fields[IndexRow._fields.index("source_id")] = kind, SOURCE
        rows.append(tuple(fields))
    return rows


def _index(rows: list[tuple[str, ...]]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.executescript(index_file.SCHEMA)
    columns = ", ".join(IndexRow._fields[: index_file.TERMS_AT])
    marks = ", ".join("?" for _ in range(index_file.TERMS_AT + 1))
    for rowid, row in enumerate(rows, start=1):
        conn.execute(f"INSERT INTO docs (rowid, {columns}) VALUES ({marks})", (rowid, *row[:13]))
        table = index_file.FTS_TABLES[row[0]]
        conn.execute(
            f"INSERT INTO {table} (rowid, terms, heading, path) VALUES (?, ?, ?, ?)",
            (rowid, *row[index_file.TERMS_AT :]),
        )
    if rows:
        conn.execute("INSERT INTO blocks VALUES (?, NULL, 1, ?)", (SOURCE, len(rows)))
    return conn


@settings(max_examples=300, deadline=None)
@given(_rows())
def test_the_stored_rows_hash_as_their_fields_do(rows: list[tuple[str, ...]]) -> None:
    conn = _index(rows)
    assert index_file.stored_rows_digest(conn, SOURCE) == index_file.source_rows_digest(rows)


def test_a_field_holding_nul_is_hashed_from_the_fields() -> None:
    """Rows whose fields hold NUL cannot be joined unambiguously: both ways hash them as
    JSON, and two such sets of rows that would join alike still differ."""
    base = ["claim", "id", "h", SOURCE] + ["x"] * (len(IndexRow._fields) - 4)
    first = [(*base[:-1], "a\x00b"), tuple(base)]
    second = [(*base[:-1], "a"), (*base[:-1], "b\x00x")]
    digests = []
    for rows in (first, second):
        conn = _index(rows)
        digests.append(index_file.stored_rows_digest(conn, SOURCE))
        assert digests[-1] == index_file.source_rows_digest(rows)
    assert digests[0] != digests[1]


def test_a_source_without_rows_hashes_as_no_rows() -> None:
    assert index_file.stored_rows_digest(_index([]), SOURCE) == index_file.source_rows_digest(())


def test_a_field_that_is_not_text_matches_no_digest() -> None:
    rows = [tuple(["claim", "id", "h", SOURCE] + ["x"] * (len(IndexRow._fields) - 4))]
    conn = _index(rows)
    conn.execute("UPDATE claims_fts_content SET c1 = 7")
    assert index_file.stored_rows_digest(conn, SOURCE) == ""
    conn.execute("UPDATE claims_fts_content SET c1 = NULL")
    assert index_file.stored_rows_digest(conn, SOURCE) == ""
