"""One SQLite FTS5 index file per generation.

The index is a derived, local, deletable file (`.raytsystem/indexes/<number>-<hash16>.sqlite3`)
built from the ledger. It records the generation hash it was built for and a digest of its rows
(a digest of per-source digests, so a delta never re-reads the whole index), and QUERY refuses
an index whose recorded generation is not the one it answers from.

Three FTS5 tables hold pre-analyzed terms (see `terms.py`): `claims_fts` has the confirmed
claims QUERY answers from; `segments_fts` has the segments `search` browses, except a prose
segment whose terms are exactly its confirmed claims' terms: its claims stand for it (their
`stands_for` names it), which spares indexing the same words twice (ADR 0021); `sources_fts`
has one row per source with all its text, which QUERY uses as the context of a claim (is this
document about the question at all?). `blocks` records the rowid range of each
source's rows, which are always written together, so QUERY can search one source's claims, and
an ingest finds the rows of a source it replaces (`docs` has no index by source: keeping one in
order would cost every write for a B-tree no read needs). `docs` holds what a hit needs to be displayed and then
checked against the ledger.

A new generation's index starts from the parent's rows (an older index about to be pruned,
patched to them, or else a copy of the parent's file; `index_writer.IndexWriter`) and takes
the changed sources' rows, so its cost follows the change; without a parent it writes
everything. The folder of index files (naming, pruning, the spare) is `index_folder`.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import os
import sqlite3
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from operator import itemgetter
from pathlib import Path
from typing import Any, Final, NamedTuple

import blake3

from ..canonical import digest
from ..errors import IntegrityError, NotFound

# 11: a source's claim rows are its claims in text order (the ranking reads adjacent rows as
# adjacent sentences, ADR 0012); the rows themselves are format 10's.
FORMAT: Final = "11"
# The ledger records the rows digests of the index format named by its `index_format` setting
# (none: format 9, the first whose digests it recorded, migration 0004). A digest recorded for
# another format says nothing about this format's rows: it reads as not recorded (ADR 0041).
DIGESTS_OF_THIS_FORMAT: Final = (
    "EXISTS (SELECT 1 FROM settings WHERE name = 'index_format' AND value = '" + FORMAT + "')"
)
_TOKENIZE: Final = "unicode61 remove_diacritics 0"

_TABLES: Final = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE docs (
    rowid INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    role TEXT NOT NULL,  -- before the long columns: ranking reads it for whole blocks
    record_status TEXT NOT NULL,
    object_id TEXT NOT NULL,
    object_hash TEXT NOT NULL,
    source_id TEXT NOT NULL,
    source_path TEXT NOT NULL,
    heading_path TEXT NOT NULL,
    segment_kind TEXT NOT NULL,
    authority TEXT NOT NULL,
    status TEXT NOT NULL,
    text TEXT NOT NULL,
    stands_for TEXT NOT NULL
);
CREATE TABLE source_digests (source_id TEXT PRIMARY KEY, digest TEXT NOT NULL);
CREATE TABLE blocks (
    source_id TEXT PRIMARY KEY,
    source_rowid INTEGER UNIQUE,  -- the source's own row; NULL if it has none
    low INTEGER NOT NULL,
    high INTEGER NOT NULL
);
CREATE VIRTUAL TABLE claims_fts USING fts5(terms, heading, path, tokenize="{_TOKENIZE}");
CREATE VIRTUAL TABLE segments_fts USING fts5(terms, heading, path, tokenize="{_TOKENIZE}");
CREATE VIRTUAL TABLE sources_fts USING fts5(terms, heading, path, tokenize="{_TOKENIZE}");
"""
# FTS5 gathers new rows' terms in memory and writes them out as a segment when this much has
# gathered (default 1 MiB), then merges segments; bigger segments mean fewer merges: 25% less
# FTS5 time for 3,000 files at 32 MiB. Up to this much memory per table while an index is
# written; stored in each table's config, so a patched copy keeps it.
FTS_HASH_BYTES: Final = 32 * 1024 * 1024
SCHEMA: Final = _TABLES + "".join(
    f"INSERT INTO {table}({table}, rank) VALUES ('hashsize', {FTS_HASH_BYTES});\n"
    for table in ("claims_fts", "segments_fts", "sources_fts")
)
# Which FTS5 table holds the rows of each kind of document.
FTS_TABLES: Final = {"claim": "claims_fts", "segment": "segments_fts", "source": "sources_fts"}


class IndexRow(NamedTuple):
    """One document of the index (a tuple: cheap to build in workers and to send to the parent)."""

    kind: str  # "claim" | "segment" | "source"
    object_id: str
    object_hash: str
    source_id: str
    source_path: str
    heading_path: str  # canonical JSON array
    segment_kind: str
    authority: str  # "" for segments
    status: str  # "" for segments
    text: str
    stands_for: str  # a claim's segment when the claim stands for it in `search`, else ""
    # Decision records (model/records.py): a claim's or segment's role in its record, "record"
    # on a record's source row, "" outside records; the record's status ("" when none).
    role: str
    record_status: str
    terms: str
    heading_terms: str
    path_terms: str


Row = tuple[str, ...]  # an IndexRow's fields as a plain tuple, as workers make them
# A row's fields up to here go to `docs`, the rest (the analyzed terms) to its full-text table.
TERMS_AT: Final = IndexRow._fields.index("terms")

_SEP: Final = "\x00"  # never in a row: decoded text refuses NUL, terms and IDs cannot hold it


def source_rows_digest(rows: Iterable[tuple[Any, ...]]) -> str:
    """BLAKE3 of a source's rows, sorted, every field joined by NUL (an integrity digest, not
    an ID: the texts are hashed as they are, not NFC-normalized).

    Rows have a fixed number of fields and no field holds a NUL, so the joined form is
    unambiguous; a row that did hold one is hashed as exact JSON instead. (Format 5 hashed
    exact JSON always, at four times the cost: it runs for every file an ingest takes.)
    """
    ordered = sorted(rows)
    joined = _SEP.join(itertools.chain.from_iterable(ordered))
    if not _unambiguous(joined.count(_SEP), len(ordered)):
        joined = json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))
    return blake3.blake3(joined.encode("utf-8")).hexdigest()


def _unambiguous(separators: int, rows: int) -> bool:
    """Whether rows joined by NUL hold exactly the NULs that join them: then no field holds
    one, and the joined form gives back each row and field."""
    return rows == 0 or separators == rows * len(IndexRow._fields) - 1


def rows_digest(source_digests: Mapping[str, str]) -> str:
    return digest(sorted(source_digests.items()), length=32)


def index_path(index_dir: Path, number: int, generation_hash: str) -> Path:
    return index_dir / f"{number:06d}-{generation_hash[:16]}.sqlite3"


def index_number(path: Path) -> int:
    """The generation number an index file's name carries."""
    return int(path.name.split("-")[0])


def ro_uri(path: Path) -> str:
    """A read-only SQLite URI for a file (the path quoted: `?`, `#`, `%` are data)."""
    return f"file:{urllib.parse.quote(str(path))}?mode=ro"


_DOC_COLUMNS = """d.kind, d.object_id, d.object_hash, d.source_id, d.source_path,
           d.heading_path, d.segment_kind, d.authority, d.status, d.text, d.stands_for, d.role,
           d.record_status"""
_ROWS = f"""
    SELECT d.rowid, {_DOC_COLUMNS}, f.terms, f.heading, f.path
    FROM docs d JOIN {{table}} f ON f.rowid = d.rowid WHERE d.kind = ?"""
# The fields of an IndexRow (no rowid), with the FTS columns read from FTS5's content table
# (`id`, `c0`..`c2`): the same values as through the virtual table, at a fraction of the cost.
_FIELDS = f"""
    SELECT {_DOC_COLUMNS}, f.c0, f.c1, f.c2
    FROM docs d JOIN {{table}}_content f ON f.id = d.rowid WHERE d.kind = ?"""


def read_source_rows(
    conn: sqlite3.Connection, source_ids: Iterable[str]
) -> dict[str, list[IndexRow]]:
    """The rows of these sources as an index holds them, in their order."""
    return {sid: [IndexRow(*r) for r in rows] for sid, rows in _source_row_tuples(conn, source_ids)}


def _source_row_tuples(
    conn: sqlite3.Connection, source_ids: Iterable[str]
) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
    """(source ID, its rows as plain tuples in `IndexRow`'s field order), each source's rows
    in their order; made by SQLite's own row objects, with no Python work per row."""
    for source_id in source_ids:
        rows: list[tuple[Any, ...]] = []
        block = block_of(conn, source_id)
        if block is None:
            yield source_id, rows
            continue
        for kind, table in FTS_TABLES.items():
            rows += conn.execute(
                _FIELDS.format(table=table)
                + " AND d.rowid BETWEEN ? AND ? AND d.source_id = ? ORDER BY d.rowid",
                (kind, *block, source_id),
            ).fetchall()
        yield source_id, rows


def stored_rows_digest(conn: sqlite3.Connection, source_id: str) -> str:
    """`source_rows_digest` of the rows this index holds of a source (`_source_row_tuples`).

    A query checks every source it cites this way (ADR 0037), so the rows are read as the
    UTF-8 bytes SQLite holds, never decoded: bytes sort as their code points do, so sorting
    and joining them is hashing what `source_rows_digest` hashes. A row whose fields do not
    join unambiguously (a field holding NUL) is hashed from its decoded fields instead; a
    field that is not text at all gives "", which no recorded digest is.
    """
    factory = conn.text_factory
    conn.text_factory = bytes
    try:
        ((_, rows),) = _source_row_tuples(conn, [source_id])
    finally:
        conn.text_factory = factory
    try:
        ordered = sorted(rows)
        joined = b"\x00".join(itertools.chain.from_iterable(ordered))
    except TypeError:  # a number or NULL where the writer writes text: no digest matches
        return ""
    if not _unambiguous(joined.count(b"\x00"), len(ordered)):
        ((_, decoded),) = _source_row_tuples(conn, [source_id])
        return source_rows_digest(decoded)
    return blake3.blake3(joined).hexdigest()


def altered_sources(conn: sqlite3.Connection, expected: Mapping[str, str | None]) -> list[str]:
    """The sources of `expected` whose rows in this index do not hash to the digest given
    (None: to the digest the index itself records for the source)."""
    altered = []
    for sid, wanted in expected.items():
        if wanted is None:
            found = conn.execute(
                "SELECT digest FROM source_digests WHERE source_id = ?", (sid,)
            ).fetchone()
            wanted = found[0] if found else None
        if stored_rows_digest(conn, sid) != wanted:
            altered.append(sid)
    return sorted(altered)


_ROWID, _SOURCE_ID = itemgetter(0), itemgetter(1 + IndexRow._fields.index("source_id"))


def block_of(conn: sqlite3.Connection, source_id: str) -> tuple[int, int] | None:
    """The lowest and highest rowid of a source's rows, None if it has none."""
    found = conn.execute("SELECT low, high FROM blocks WHERE source_id = ?", (source_id,))
    row = found.fetchone()
    return (row[0], row[1]) if row else None


def usable(path: Path, generation_hash: str) -> bool:
    """Whether `path` is an index of this format recorded for `generation_hash`."""
    if not path.is_file():
        return False
    try:
        conn = sqlite3.connect(ro_uri(path), uri=True)
        try:
            meta = read_meta(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False
    return meta.get("format") == FORMAT and meta.get("generation_hash") == generation_hash


def read_meta(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta"))


def recorded_digests(conn: sqlite3.Connection) -> dict[str, str]:
    """source ID -> the rows digest the index records for it."""
    return dict(conn.execute("SELECT source_id, digest FROM source_digests"))


@contextlib.contextmanager
def open_index(
    path: Path, generation_hash: str, rows_digest: str | None = None
) -> Iterator[sqlite3.Connection]:
    """Open a generation's index read-only, refusing one recorded for another generation, or
    whose rows digest is not `rows_digest` (the ledger's, when it records one).

    Everything read through the connection is one read transaction, so an ingest that wants to
    recycle this file as a spare (`IndexWriter`) cannot lock it and copies its parent instead.
    The file must still be the one at `path` once that transaction holds its lock: otherwise
    an ingest took it in between, and it is reported missing, never read.
    """
    number = index_number(path)
    missing = NotFound(
        f"the index of generation {number} ({generation_hash[:16]}) is missing (old indexes "
        f"are pruned, see [index] keep): run `raytsystem index rebuild {number}`",
        code="index_missing",
    )
    try:
        before = os.stat(path).st_ino
    except FileNotFoundError:
        raise missing from None
    try:
        # No waiting: published files are never written, so a lock on one means an ingest
        # has taken it as a spare and it is about to become another generation's.
        conn = sqlite3.connect(ro_uri(path), uri=True, timeout=0)
    except sqlite3.OperationalError as exc:
        raise missing from exc
    try:
        try:
            conn.execute("BEGIN")
            meta = read_meta(conn)  # the shared lock is held from here on
            still = os.stat(path).st_ino == before
        except FileNotFoundError:
            still = False
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "unable to open" not in str(exc):
                raise IntegrityError(
                    f"index {path.name} is unreadable: {exc}", code="index_corrupt"
                ) from exc
            still = False  # an ingest holds it: it is becoming another generation's
        except sqlite3.DatabaseError as exc:
            raise IntegrityError(
                f"index {path.name} is unreadable: {exc}", code="index_corrupt"
            ) from exc
        if not still:
            raise missing
        if meta.get("format") != FORMAT:
            raise NotFound(
                f"index {path.name} has format {meta.get('format')}, this raytsystem reads "
                f"format {FORMAT}: run `raytsystem index rebuild`",
                code="index_missing",
            )
        if meta.get("generation_hash") != generation_hash:
            raise IntegrityError(
                f"index {path.name} records generation {meta.get('generation_hash')}, "
                f"not {generation_hash}",
                code="index_generation_mismatch",
                expected=generation_hash,
                got=meta.get("generation_hash"),
            )
        if rows_digest is not None and meta.get("rows_digest") != rows_digest:
            raise IntegrityError(
                f"index {path.name} holds other rows than the ledger records for generation "
                f"{generation_hash[:16]}",
                code="index_generation_mismatch",
                expected=rows_digest,
                got=meta.get("rows_digest"),
            )
        yield conn
    finally:
        conn.close()


def check_rows(conn: sqlite3.Connection) -> list[str]:
    """Full check of an index against its own records: per-source digests and the total.

    The rows are read in rowid order, where each source's rows are together (its block), one
    source at a time: memory follows a source, not the index (2 GB at 10,000 files)."""
    problems = []
    meta = read_meta(conn)
    recorded = dict(conn.execute("SELECT source_id, digest FROM source_digests"))
    in_order = heapq.merge(
        *(
            conn.execute(_ROWS.format(table=table) + " ORDER BY d.rowid", (kind,))
            for kind, table in FTS_TABLES.items()
        ),
        key=_ROWID,
    )
    seen: set[str] = set()
    for source_id, rows in itertools.groupby(in_order, key=_SOURCE_ID):
        if source_id in seen:
            problems.append(f"rows of source {source_id} are not all in its block")
            continue
        seen.add(source_id)
        got = source_rows_digest(row[1:] for row in rows)
        if recorded.get(source_id) != got:
            problems.append(f"rows of source {source_id} do not match their recorded digest")
    for source_id in sorted(set(recorded) - seen):
        if recorded[source_id] != source_rows_digest(()):
            problems.append(f"rows of source {source_id} do not match their recorded digest")
    if rows_digest(recorded) != meta.get("rows_digest"):
        problems.append("the recorded rows digest does not match the per-source digests")
    docs = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
    fts = sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in FTS_TABLES.values())
    if docs != fts:
        problems.append(f"{docs} documents but {fts} full-text rows")
    return problems + _check_blocks(conn)


def _check_blocks(conn: sqlite3.Connection) -> list[str]:
    """Each source's block must be exactly the contiguous rowids of its rows, and name its own
    row (QUERY looks for a source's claims only there; an ingest deletes a source's rows by
    it)."""
    problems = []
    spans = {
        source_id: (first, last, count)
        for source_id, first, last, count in conn.execute(
            "SELECT source_id, min(rowid), max(rowid), count(*) FROM docs GROUP BY source_id"
        )
    }
    own = dict(conn.execute("SELECT source_id, rowid FROM docs WHERE kind = 'source'"))
    for source_id, source_rowid, low, high in conn.execute(
        "SELECT source_id, source_rowid, low, high FROM blocks"
    ):
        span = spans.pop(source_id, None)
        if span is None:
            problems.append(f"the block of source {source_id} has no rows")
        elif (low, high) != span[:2] or span[2] != high - low + 1:
            problems.append(f"the block of source {source_id} does not span its rows")
        elif source_rowid != own.get(source_id):
            problems.append(f"the block of source {source_id} does not name its source row")
    problems += [f"the rows of source {source_id} have no block" for source_id in sorted(spans)]
    return problems
