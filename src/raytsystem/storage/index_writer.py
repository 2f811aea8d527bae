"""Writing a generation's index file: `IndexWriter` starts from the parent's rows (a recycled
older index patched to them, or a copy of the parent's file) or from nothing, replaces the
changed sources' rows, and publishes the file under the generation's name once complete
(ADR 0013, ADR 0032).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ..errors import IntegrityError
from .index_file import (
    FORMAT,
    FTS_TABLES,
    SCHEMA,
    TERMS_AT,
    block_of,
    read_meta,
    read_source_rows,
    ro_uri,
    rows_digest,
    source_rows_digest,
)
from .index_folder import copy_file


def _connect(path: Path, timeout: float = 5.0) -> sqlite3.Connection:
    # Used by one thread at a time, not always the one that opened it (`IndexWriter.settle`).
    conn = sqlite3.connect(path, isolation_level=None, timeout=timeout, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")  # the finished file is fsynced once, before publish
    conn.execute("PRAGMA cache_size=-65536")  # 64 MiB: an index build touches pages all over
    return conn


class _NotRecyclable(Exception):
    pass


# A spare is patched only when at most 1/RECYCLE_SHARE of the sources (and at least 100)
# differ from the parent's; beyond that, re-inserting their rows is estimated to cost more
# than copying the file (not measured precisely: a copy of 0.9 GB takes 1-3 s here).
RECYCLE_SHARE: Final = 20


RECYCLE_CHUNK: Final = 200


def _check_parent(meta: Mapping[str, str], parent: Path, parent_hash: str | None) -> None:
    if meta.get("format") != FORMAT:
        raise IntegrityError("parent index has another format", code="index_format")
    if meta.get("generation_hash") != parent_hash:
        raise IntegrityError(
            f"parent index {parent.name} records generation "
            f"{meta.get('generation_hash')}, not {parent_hash}",
            code="index_generation_mismatch",
        )


# A row's rowid, then its IndexRow fields (`check_rows` reads rowids; the others drop them).
def _insert(
    conn: sqlite3.Connection, rows_by_source: Mapping[str, Sequence[tuple[Any, ...]]]
) -> None:
    """Each source's rows (with the fields of `IndexRow`, as IndexRows or plain tuples from
    workers), numbered after the index's last rowid in one pass: a source's rows take one range
    of rowids, its block."""
    (top,) = conn.execute("SELECT coalesce(max(rowid), 0) FROM docs").fetchone()
    n = top
    docs: list[tuple[Any, ...]] = []
    fts: dict[str, list[tuple[Any, ...]]] = {kind: [] for kind in FTS_TABLES}
    blocks: list[tuple[str, int | None, int, int]] = []
    for source_id, rows in rows_by_source.items():
        low, own = n + 1, None
        for r in rows:
            n += 1
            if r[3] != source_id:
                raise ValueError(f"a row of source {r[3]} is among the rows of {source_id}")
            docs.append((n, *r[:TERMS_AT]))
            fts[r[0]].append((n, *r[TERMS_AT:]))
            if r[0] == "source":
                own = n
        if n >= low:
            blocks.append((source_id, own, low, n))
    conn.executemany(
        "INSERT INTO docs (rowid, kind, object_id, object_hash, source_id, source_path, "
        "heading_path, segment_kind, authority, status, text, stands_for, role, record_status) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        docs,
    )
    for kind, table in FTS_TABLES.items():
        conn.executemany(
            f"INSERT INTO {table} (rowid, terms, heading, path) VALUES (?,?,?,?)", fts[kind]
        )
    conn.executemany(
        "INSERT INTO blocks (source_id, source_rowid, low, high) VALUES (?,?,?,?)", blocks
    )


def _delete_sources(conn: sqlite3.Connection, source_ids: Iterable[str]) -> None:
    """Delete these sources' rows: each source's rows are exactly its block's rowids (`_insert`
    writes them together; `check_rows` checks it), and every rowid is in one full-text table.
    A block that holds another source's row is refused, never trusted: the index is corrupt."""
    for source_id in source_ids:
        block = block_of(conn, source_id)
        if block is not None:
            low, high = block
            ours = "SELECT rowid FROM docs WHERE rowid BETWEEN ? AND ? AND source_id = ?"
            for table in FTS_TABLES.values():
                conn.execute(f"DELETE FROM {table} WHERE rowid IN ({ours})", (*block, source_id))
            gone = conn.execute(
                "DELETE FROM docs WHERE rowid BETWEEN ? AND ? AND source_id = ?",
                (*block, source_id),
            ).rowcount
            # Fewer than the block's rowids: some are another source's (or missing).
            if gone != high - low + 1:
                raise IntegrityError(
                    f"the index block of source {source_id} does not hold exactly its rows: "
                    "the index this one starts from is damaged (`raytsystem index rebuild` "
                    "makes the current generation's again from the ledger)",
                    code="index_corrupt",
                )
            conn.execute("DELETE FROM blocks WHERE source_id = ?", (source_id,))
        conn.execute("DELETE FROM source_digests WHERE source_id = ?", (source_id,))


class IndexWriter:
    """Writes the index file of a new generation incrementally, then publishes it atomically.

    It starts from the parent generation's rows, takes the rows of sources as they come
    (`replace`, `delete`), and `finish` records the generation and the rows digest, fsyncs and
    renames the file into place. Until then the file has a temp name no reader looks for;
    `abandon` removes it. Only per-source digests stay in memory.

    The parent's rows come, cheapest first, from a `spare`: an older generation's index that
    is about to be pruned, patched with the sources whose rows differ from the parent's (per
    source digests), so a small change writes a few pages instead of the whole file; or from
    a copy of the parent's file; or, without a parent, from nothing (an empty schema).
    """

    def __init__(
        self,
        directory: Path,
        *,
        parent: Path | None = None,
        parent_hash: str | None = None,
        spare: Path | None = None,
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        # One writer at a time holds the workspace's lock: any other build file is a leftover.
        for leftover in directory.glob(".building-*.sqlite3"):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        self.tmp = directory / f".building-{os.getpid()}.sqlite3"
        self._fresh = parent is None
        self._digests: dict[str, str | None] = {}  # None: the source's rows were deleted
        self.recycled = False
        try:
            if parent is None:
                self.conn = _connect(self.tmp)
                self.conn.executescript(SCHEMA)
                self.conn.execute("BEGIN")
            elif spare is not None and self._recycle(spare, parent, parent_hash):
                self.recycled = True  # `_recycle` left its connection in an exclusive transaction
            else:
                copy_file(parent, self.tmp)
                self.conn = _connect(self.tmp)
                self.conn.execute("BEGIN")
                _check_parent(read_meta(self.conn), parent, parent_hash)
        except BaseException:
            self.abandon()
            raise

    def _recycle(self, spare: Path, parent: Path, parent_hash: str | None) -> bool:
        """Take the spare file and bring it to the parent's rows; False (and no file: the
        spare is lost, as pruning would have lost it) when it cannot be: renamed away, another
        format, a reader still in it, too far from the parent, or any error on the way."""
        try:
            os.replace(spare, self.tmp)  # from now on no reader can open it by its name
        except OSError:
            return False
        try:
            self.conn = _connect(self.tmp, timeout=0)
            # A query that opened it before the rename holds a shared lock until it is done.
            self.conn.execute("BEGIN EXCLUSIVE")
            if read_meta(self.conn).get("format") != FORMAT:
                raise _NotRecyclable
            theirs_conn = sqlite3.connect(ro_uri(parent), uri=True)
            try:
                theirs_conn.execute("BEGIN")
                _check_parent(read_meta(theirs_conn), parent, parent_hash)
                theirs = dict(theirs_conn.execute("SELECT source_id, digest FROM source_digests"))
                ours = dict(self.conn.execute("SELECT source_id, digest FROM source_digests"))
                gone = sorted(s for s in ours if s not in theirs)
                differ = sorted(s for s, d in theirs.items() if ours.get(s) != d)
                if len(gone) + len(differ) > max(100, len(theirs) // RECYCLE_SHARE):
                    raise _NotRecyclable  # too far behind: copying the parent is cheaper
                self.delete(gone)
                for i in range(0, len(differ), RECYCLE_CHUNK):  # memory: a chunk at a time
                    self.replace(read_source_rows(theirs_conn, differ[i : i + RECYCLE_CHUNK]))
            finally:
                theirs_conn.close()
            if any(self._digests[s] != theirs[s] for s in differ):
                raise _NotRecyclable  # the parent's rows do not match its own digests
            return True
        except Exception:
            self.abandon()
            self._digests.clear()
            return False

    @property
    def built_from(self) -> str:
        """Where the parent's rows came from: "spare", "parent" (a copy) or "ledger" (none)."""
        return "ledger" if self._fresh else "spare" if self.recycled else "parent"

    def replace(
        self,
        rows_by_source: Mapping[str, Sequence[tuple[Any, ...]]],
        digests: Mapping[str, str] | None = None,
    ) -> None:
        """Put these sources' rows in place of whatever rows they had. `digests` may give
        `source_rows_digest` of some of them, computed where the rows were made."""
        if not self._fresh:
            _delete_sources(self.conn, [s for s in rows_by_source])
        else:
            _delete_sources(self.conn, [s for s in rows_by_source if s in self._digests])
        _insert(self.conn, rows_by_source)
        known = digests or {}
        for source_id, rows in rows_by_source.items():
            self._digests[source_id] = known.get(source_id) or source_rows_digest(rows)

    def digest_of(self, source_id: str) -> str | None:
        """The rows digest of a source this writer replaced (None: not replaced, or deleted)."""
        return self._digests.get(source_id)

    def delete(self, source_ids: Iterable[str]) -> None:
        ids = list(source_ids)
        _delete_sources(self.conn, ids)
        self._digests.update(dict.fromkeys(ids))

    def settle(self) -> None:
        """Write out what the rows so far left in memory (FTS5's pending terms, up to
        FTS_HASH_BYTES per table, and SQLite's dirty pages): a commit, which `finish` would
        otherwise do. Ingest runs it on a thread of its own while the ledger commits, once the
        workers are done and a core is free; nothing else may use this writer meanwhile.
        A recycled spare is left as it is: its exclusive transaction keeps out a reader that
        opened the file before it was renamed (and a patched spare has little to write)."""
        if self.recycled:
            return
        self.conn.execute("COMMIT")
        self.conn.execute("BEGIN")

    def finish(self, path: Path, generation_hash: str, generation_number: int) -> str:
        """Record the generation, publish the file at `path`; returns the rows digest."""
        try:
            self.conn.executemany(
                "INSERT OR REPLACE INTO source_digests (source_id, digest) VALUES (?, ?)",
                [(s, d) for s, d in self._digests.items() if d is not None],
            )
            self.conn.executemany(
                "DELETE FROM source_digests WHERE source_id = ?",
                [(s,) for s, d in self._digests.items() if d is None],
            )
            total = rows_digest(
                dict(self.conn.execute("SELECT source_id, digest FROM source_digests"))
            )
            # The sources with a row of their own (blocks is a small table; `docs` has a million
            # rows at 10,000 files).
            (sources,) = self.conn.execute("SELECT count(source_rowid) FROM blocks").fetchone()
            meta = {
                "format": FORMAT,
                "generation_hash": generation_hash,
                "generation_number": str(generation_number),
                "rows_digest": total,
                "built_from": self.built_from,
                "source_count": str(sources),  # the N of query-time IDF
            }
            self.conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", meta.items()
            )
            self.conn.execute("COMMIT")
            self.conn.close()
            with open(self.tmp, "rb+") as handle:
                os.fsync(handle.fileno())
            os.replace(self.tmp, path)
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            return total
        finally:
            self.abandon()

    def abandon(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        with contextlib.suppress(FileNotFoundError):
            self.tmp.unlink()
