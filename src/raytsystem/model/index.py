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
order cost 8% of an index's writing). `docs` holds what a hit needs to be displayed and then
checked against the ledger.

A new generation's index starts from the parent's rows (an older index about to be pruned,
patched to them, or else a copy of the parent's file; see `IndexWriter`) and takes the changed
sources' rows, so its cost follows the change; without a parent it writes everything.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import mmap
import os
import re
import shutil
import sqlite3
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any, Final, NamedTuple

import blake3

from ..canonical import digest
from ..errors import IntegrityError, NotFound

FORMAT: Final = "9"
_TOKENIZE: Final = "unicode61 remove_diacritics 0"

_TABLES: Final = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE docs (
    rowid INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
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
    terms: str
    heading_terms: str
    path_terms: str


Row = tuple[str, ...]  # an IndexRow's fields as a plain tuple, as workers make them
# A row's fields up to here go to `docs`, the rest (the analyzed terms) to its full-text table.
_TERMS_AT: Final = IndexRow._fields.index("terms")

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
    if ordered and joined.count(_SEP) != len(ordered) * len(IndexRow._fields) - 1:
        joined = json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))
    return blake3.blake3(joined.encode("utf-8")).hexdigest()


def rows_digest(source_digests: Mapping[str, str]) -> str:
    return digest(sorted(source_digests.items()), length=32)


def index_path(index_dir: Path, number: int, generation_hash: str) -> Path:
    return index_dir / f"{number:06d}-{generation_hash[:16]}.sqlite3"


def index_number(path: Path) -> int:
    """The generation number an index file's name carries."""
    return int(path.name.split("-")[0])


def index_files(index_dir: Path) -> list[Path]:
    """The generations' index files, newest generation first."""
    found = [p for p in index_dir.glob("*.sqlite3") if _NAME.fullmatch(p.name)]
    return sorted(found, key=lambda p: (index_number(p), p.name), reverse=True)


_NAME: Final = re.compile(r"[0-9]{6,}-[0-9a-f]{16}\.sqlite3")


def _prunable(files: list[Path], keep: int, first: list[Path]) -> list[Path]:
    """What pruning to `keep` deletes: the files of `first` (the new index, its parent) take
    the first places, the newest of the others the rest."""
    order = [p for p in dict.fromkeys(first) if p in files] + [p for p in files if p not in first]
    return order[keep:]


SPARE_NAME: Final = ".spare.sqlite3"


def spare_for(index_dir: Path, parent: Path, keep: int) -> Path | None:
    """The file a new index is best made from: the spare copy `make_spare` left, or the newest
    index file that pruning will delete once the next generation exists (it keeps the new
    index, then the parent, then the newest others). Never the parent itself, which the new
    index is made from."""
    if keep >= 2 and (index_dir / SPARE_NAME).is_file():
        return index_dir / SPARE_NAME
    prunable = _prunable(index_files(index_dir), keep - 1, [parent])
    others = [p for p in prunable if p != parent]
    return others[0] if others else None


def wants_spare(index_dir: Path, keep: int) -> bool:
    """Whether to copy the new index as the spare the next change patches (that change then
    writes a few pages instead of copying the whole file): there is room for another index
    (fewer than `keep` files, e.g. after the first ingest) and no spare yet."""
    return (
        keep >= 2 and not (index_dir / SPARE_NAME).exists() and len(index_files(index_dir)) < keep
    )


def make_spare(index_dir: Path, current: Path) -> bool:
    """Copy `current` as the spare. The copy is fsynced before it takes the spare's name: a
    spare is trusted for every source whose rows it does not patch (`IndexWriter` checks
    which by the sources' digests, so a spare is good whatever generation it was copied for).
    True if one was made."""
    spare = index_dir / SPARE_NAME
    tmp = index_dir / f".building-spare-{os.getpid()}.sqlite3"
    try:
        if not _copy_direct(current, tmp):
            _copy(current, tmp)
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, spare)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def prune(index_dir: Path, keep: int, first: list[Path]) -> list[Path]:
    """Delete index files so that `keep` remain: those of `first` (the current generation's,
    then its parent's) before the newest others, whatever their numbers (a file left by
    another ledger may carry a higher one). Returns what was deleted; a file that cannot be
    deleted is left for the next ingest.

    An index is derived: `raytsystem index rebuild N` makes a pruned one again.
    """
    removed = _prunable(index_files(index_dir), keep, first)
    if keep < 2 and (index_dir / SPARE_NAME).exists():
        removed.append(index_dir / SPARE_NAME)  # no room for a spare any more
    for path in removed:
        with contextlib.suppress(OSError):
            path.unlink()
    return removed


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


def ro_uri(path: Path) -> str:
    """A read-only SQLite URI for a file (the path quoted: `?`, `#`, `%` are data)."""
    return f"file:{urllib.parse.quote(str(path))}?mode=ro"


def _copy(source: Path, target: Path) -> None:
    """Copy a file; `copy_file_range` lets copy-on-write filesystems (XFS, Btrfs) share the
    blocks instead of writing them."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        size = os.fstat(src.fileno()).st_size
        done = 0
        try:
            while done < size:
                sent = os.copy_file_range(src.fileno(), dst.fileno(), size - done)
                if sent == 0:
                    break  # some filesystems stop early: finish the plain way
                done += sent
        except (AttributeError, OSError):
            done = 0
        if done < size:
            src.seek(0)
            dst.seek(0)
            dst.truncate()
            shutil.copyfileobj(src, dst, 1 << 20)
        if os.fstat(dst.fileno()).st_size != size:
            raise OSError(f"copying {source.name} gave a file of another size")


_DIRECT_CHUNK: Final = 8 << 20  # bytes per write: a multiple of any logical block size
_BLOCK: Final = 4096


def _copy_direct(source: Path, target: Path) -> bool:
    """Copy `source` to a new file `target` around the page cache (`O_DIRECT`), fsynced.

    For a copy nobody reads soon (the spare): it puts no page of the copy in memory, which
    costs a fraction of a copy through the cache where fresh memory is slow to touch (a VM
    copied 784 MiB in 0.35 s this way against 0.5-2.2 s). False, and no file, where the
    system or the filesystem does not do direct writes; the caller then copies as usual."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | flag, 0o644)
    except OSError:
        return False
    copied = False
    try:
        # An anonymous mapping is page-aligned, as direct writes need their buffer to be.
        with mmap.mmap(-1, _DIRECT_CHUNK) as buf, open(source, "rb", buffering=0) as src:
            size = os.fstat(src.fileno()).st_size
            _write_blocks(fd, src, buf)
        os.ftruncate(fd, size)  # the last block was padded
        os.fsync(fd)
        copied = True
    except (OSError, BufferError):  # BufferError: the buffer could not be unmapped
        pass
    finally:
        os.close(fd)
        if not copied:
            target.unlink(missing_ok=True)
    return copied


def _write_blocks(fd: int, src: Any, buf: mmap.mmap) -> None:
    """Everything `src` holds, read through `buf` and written to `fd` in whole blocks."""
    view = memoryview(buf)
    try:
        while got := _fill(src, view):
            # A buffer not filled is the end of the file: its last block is padded.
            part = view[: got if got == len(buf) else -(-got // _BLOCK) * _BLOCK]
            try:
                while part:
                    part = part[os.write(fd, part) :]
            finally:
                part.release()
    finally:
        view.release()


def _fill(src: Any, view: memoryview) -> int:
    """Read into `view` until it is full or the file ends; the bytes read."""
    got = 0
    while got < len(view) and (n := src.readinto(view[got:])):
        got += n
    return got


def _check_parent(meta: Mapping[str, str], parent: Path, parent_hash: str | None) -> None:
    if meta.get("format") != FORMAT:
        raise IntegrityError("parent index has another format", code="index_format")
    if meta.get("generation_hash") != parent_hash:
        raise IntegrityError(
            f"parent index {parent.name} records generation "
            f"{meta.get('generation_hash')}, not {parent_hash}",
            code="index_generation_mismatch",
        )


def read_source_rows(
    conn: sqlite3.Connection, source_ids: Iterable[str]
) -> dict[str, list[IndexRow]]:
    """The rows of these sources as an index holds them, in their order."""
    out: dict[str, list[IndexRow]] = {}
    for source_id in source_ids:
        rows = out.setdefault(source_id, [])
        block = _block(conn, source_id)
        if block is None:
            continue
        for kind, table in FTS_TABLES.items():
            rows += [
                IndexRow(*r[1:])
                for r in conn.execute(
                    _ROWS.format(table=table)
                    + " AND d.rowid BETWEEN ? AND ? AND d.source_id = ? ORDER BY d.rowid",
                    (kind, *block, source_id),
                )
            ]
    return out


_ROWID, _SOURCE_ID = itemgetter(0), itemgetter(1 + IndexRow._fields.index("source_id"))


def _block(conn: sqlite3.Connection, source_id: str) -> tuple[int, int] | None:
    """The lowest and highest rowid of a source's rows, None if it has none."""
    found = conn.execute("SELECT low, high FROM blocks WHERE source_id = ?", (source_id,))
    row = found.fetchone()
    return (row[0], row[1]) if row else None


# A row's rowid, then its IndexRow fields (`check_rows` reads rowids; the others drop them).
_ROWS = """
    SELECT d.rowid, d.kind, d.object_id, d.object_hash, d.source_id, d.source_path, d.heading_path,
           d.segment_kind, d.authority, d.status, d.text, d.stands_for, f.terms, f.heading,
           f.path
    FROM docs d JOIN {table} f ON f.rowid = d.rowid WHERE d.kind = ?"""


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
            docs.append((n, *r[:_TERMS_AT]))
            fts[r[0]].append((n, *r[_TERMS_AT:]))
            if r[0] == "source":
                own = n
        if n >= low:
            blocks.append((source_id, own, low, n))
    conn.executemany(
        "INSERT INTO docs (rowid, kind, object_id, object_hash, source_id, source_path, "
        "heading_path, segment_kind, authority, status, text, stands_for) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
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
        block = _block(conn, source_id)
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
                _copy(parent, self.tmp)
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


@contextlib.contextmanager
def open_index(path: Path, generation_hash: str) -> Iterator[sqlite3.Connection]:
    """Open a generation's index read-only, refusing one recorded for another generation.

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
