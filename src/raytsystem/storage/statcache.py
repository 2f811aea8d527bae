"""A local cache of file stats, so a re-ingest reads only files that may have changed.

Like git's index: a file whose size, mtime and inode match its entry is taken as unchanged and
is not read. The cache holds entries for one generation (the one its ingest made or found
current); any other generation's ingest reads and hashes everything. The cache lives in
`.raytsystem/` and can be deleted at any time (ADR 0010).

"Racily clean" files (git's term) are never recorded: a file whose mtime was less than
`RACY_NS` before the ingest looked at it could be written again within the same clock tick,
after it was read, without its stat changing. Such a file is simply read again next time. So
every entry stays trustworthy for as long as its generation is current, and a new generation's
cache is the old one with the changed entries written over: one small transaction, however
large the workspace.

The cache also remembers the files the ingest's screen refused (ADR 0040), with the screen's
fingerprint and the findings it made: while both the file's stat and the fingerprint are
unchanged, the file is refused again with the same findings without being read or scanned.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterable
from operator import itemgetter
from pathlib import Path
from typing import Final

from ..discovery import StatKey

RACY_NS: Final = 2_000_000_000
# Caches of the earlier format trusted entries by the time the whole cache was written, not
# by when each file was looked at: they are not read (the next ingest reads every file once).
FORMAT: Final = "2"

Entry = tuple[int, int, int, str]  # size, mtime_ns, inode, revision ID ("": not a source)
# A file the screen refused (ADR 0040): its stat, the screen's fingerprint, and the findings
# (as the ingest serialized them) that an ingest reports again without reading the file.
Held = tuple[int, int, int, str, str]  # size, mtime_ns, inode, screen fingerprint, findings
_HELD_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS held (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER,"
    " ino INTEGER, screen TEXT, findings TEXT)"
)


def read_entries(path: Path) -> tuple[str | None, dict[str, Entry]] | None:
    """(the generation hash the cache's entries are for, path -> entry), or None when there
    is no usable cache (missing, damaged, of another format). For readers that only compare
    (the freshness check); an ingest uses `StatCache`.

    An entry whose revision is "" records a file the ingest looked at that made no source
    (binary, too large, undecodable): its stat says the file is as that ingest saw it."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta"))
            if meta.get("format") != FORMAT:
                return None
            rows = conn.execute(
                "SELECT path, size, mtime_ns, ino, revision_id FROM entries"
            ).fetchall()
            # Built by C-level maps: at 10,000 entries, a comprehension costs twice as much.
            entries: dict[str, Entry] = dict(
                zip(map(itemgetter(0), rows), map(itemgetter(1, 2, 3, 4), rows), strict=True)
            )
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return meta.get("generation_hash") or None, entries


class StatCache:
    def __init__(self, path: Path, generation_hash: str | None) -> None:
        self.path = path
        self._entries: dict[str, Entry] = {}
        self._held: dict[str, Held] = {}
        self._current = False  # whether the file holds this generation's entries
        try:
            conn = sqlite3.connect(path)
            try:
                meta = dict(conn.execute("SELECT key, value FROM meta"))
                if meta.get("format") == FORMAT and meta.get("generation_hash") == (
                    generation_hash or ""
                ):
                    for p, size, mtime, ino, rev in conn.execute(
                        "SELECT path, size, mtime_ns, ino, revision_id FROM entries"
                    ):
                        self._entries[p] = (size, mtime, ino, rev)
                    self._current = True
                    self._held = _read_held(conn)
            finally:
                conn.close()
        except sqlite3.Error:
            self._entries, self._held = {}, {}  # a missing or damaged cache costs re-reading

    def fresh(self, path: str, key: StatKey, revision_id: str) -> bool:
        return self._entries.get(path) == (*key, revision_id)

    def held(self, path: str, key: StatKey, screen: str) -> str | None:
        """The findings recorded for a file the screen with fingerprint `screen` refused,
        when the file's stat is still the one it had then (None: it must be read)."""
        held = self._held.get(path)
        if held is None or held[:4] != (*key, screen):
            return None
        return held[4]

    def save(
        self,
        generation_hash: str | None,
        entries: Iterable[tuple[str, StatKey, str]],
        scanned_ns: int,
        keep: Callable[[str], bool] | None = None,
        held: Iterable[tuple[str, StatKey, str, str]] = (),
    ) -> None:
        """Record `entries` (path, stat taken after `scanned_ns`, revision) for
        `generation_hash`, and this cache's entries for the paths `keep` accepts (an ingest of
        some folders keeps what it knew of the others, which it did not look at and did not
        change); nothing else. Likewise `held`: (path, stat, screen fingerprint, findings) of
        the files the screen refused. A file modified less than `RACY_NS` before
        `scanned_ns` is left out (see the module's docstring)."""
        limit = scanned_ns - RACY_NS
        wanted: dict[str, Entry] = (
            {p: e for p, e in self._entries.items() if keep(p)} if keep else {}
        )
        for p, (size, mtime_ns, ino), rev in entries:
            if mtime_ns < limit:
                wanted[p] = (size, mtime_ns, ino, rev)
            else:
                wanted.pop(p, None)
        wanted_held = {p: h for p, h in self._held.items() if keep(p)} if keep else {}
        for p, (size, mtime_ns, ino), screen, findings in held:
            if mtime_ns < limit:
                wanted_held[p] = (size, mtime_ns, ino, screen, findings)
        meta = [("format", FORMAT), ("generation_hash", generation_hash or "")]
        try:
            if self._current:
                self._update(wanted, wanted_held, meta)
            else:
                self._rewrite(wanted, wanted_held, meta)
        except sqlite3.Error:
            # The cache is a shortcut, never the truth: one that cannot be written is dropped.
            with contextlib.suppress(OSError):
                self.path.unlink()
            return
        self._entries, self._held, self._current = wanted, wanted_held, True

    def _update(
        self, wanted: dict[str, Entry], held: dict[str, Held], meta: list[tuple[str, str]]
    ) -> None:
        """Write over the entries that differ, in one transaction."""
        gone = [(p,) for p in self._entries if p not in wanted]
        changed = [(p, *e) for p, e in wanted.items() if self._entries.get(p) != e]
        conn = sqlite3.connect(self.path)
        try:
            with conn:
                conn.executemany("DELETE FROM entries WHERE path = ?", gone)
                conn.executemany("INSERT OR REPLACE INTO entries VALUES (?,?,?,?,?)", changed)
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta)
                if held != self._held:
                    _write_held(conn, held)
        finally:
            conn.close()

    def _rewrite(
        self, wanted: dict[str, Entry], held: dict[str, Held], meta: list[tuple[str, str]]
    ) -> None:
        """A new file in place of whatever was there (another generation's, damaged, none)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + f".tmp-{os.getpid()}")
        tmp.unlink(missing_ok=True)
        conn = sqlite3.connect(tmp)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
            conn.execute(
                "CREATE TABLE entries (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER,"
                " ino INTEGER, revision_id TEXT)"
            )
            conn.executemany(
                "INSERT INTO entries VALUES (?,?,?,?,?)", [(p, *e) for p, e in wanted.items()]
            )
            conn.executemany("INSERT INTO meta VALUES (?, ?)", meta)
            _write_held(conn, held)
            conn.commit()
        finally:
            conn.close()
        os.replace(tmp, self.path)


def _read_held(conn: sqlite3.Connection) -> dict[str, Held]:
    try:
        rows = conn.execute(
            "SELECT path, size, mtime_ns, ino, screen, findings FROM held"
        ).fetchall()
    except sqlite3.OperationalError:  # a cache written before refusals were recorded
        return {}
    return {
        p: (size, mtime, ino, screen, findings) for p, size, mtime, ino, screen, findings in rows
    }


def _write_held(conn: sqlite3.Connection, held: dict[str, Held]) -> None:
    conn.execute(_HELD_TABLE)
    conn.execute("DELETE FROM held")
    conn.executemany("INSERT INTO held VALUES (?,?,?,?,?,?)", [(p, *h) for p, h in held.items()])
