"""A local cache of file stats, so a re-ingest reads only files that may have changed.

Like git's index: a file whose size, mtime and inode match the cache is taken as unchanged and
is not read. An entry is trusted only when the file's mtime is safely older than the moment the
cache was written (a write within the same clock tick could otherwise go unseen: "racily clean"
in git's words), and only for the generation the cache was written for; anything else is read
and hashed. The cache lives in `.raytsystem/` and can be deleted at any time.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

RACY_NS: Final = 2_000_000_000


class StatCache:
    def __init__(self, path: Path, generation_hash: str | None) -> None:
        self.path = path
        self._entries: dict[str, tuple[int, int, int, str]] = {}
        self._written_ns = 0
        try:
            conn = sqlite3.connect(path)
            try:
                meta = dict(conn.execute("SELECT key, value FROM meta"))
                if meta.get("generation_hash") == (generation_hash or ""):
                    self._written_ns = int(meta.get("written_ns", "0"))
                    for p, size, mtime, ino, rev in conn.execute(
                        "SELECT path, size, mtime_ns, ino, revision_id FROM entries"
                    ):
                        self._entries[p] = (size, mtime, ino, rev)
            finally:
                conn.close()
        except sqlite3.Error:
            self._entries = {}  # a missing or damaged cache only costs re-reading files

    def fresh(self, path: str, st: os.stat_result, revision_id: str) -> bool:
        entry = self._entries.get(path)
        return (
            entry is not None
            and entry == (st.st_size, st.st_mtime_ns, st.st_ino, revision_id)
            and st.st_mtime_ns < self._written_ns - RACY_NS
        )

    def save(
        self,
        generation_hash: str | None,
        entries: Iterable[tuple[str, os.stat_result, str]],
        keep: Callable[[str], bool] | None = None,
    ) -> None:
        """Replace the cache with `entries` (path, stat, revision) for `generation_hash`, and
        this cache's entries for the paths `keep` accepts (an ingest of some folders keeps what
        it knew of the others, which it did not look at and did not change)."""
        rows = [(p, st.st_size, st.st_mtime_ns, st.st_ino, rev) for p, st, rev in entries]
        kept = [(p, *entry) for p, entry in self._entries.items() if keep and keep(p)]
        # One write time serves every entry: with kept entries it stays the time they were
        # trusted from (a later one would trust a file changed just before that time); the new
        # entries are then at worst read once more.
        written = self._written_ns if kept else time.time_ns()
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
            conn.executemany("INSERT OR REPLACE INTO entries VALUES (?,?,?,?,?)", kept + rows)
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [("generation_hash", generation_hash or ""), ("written_ns", str(written))],
            )
            conn.commit()
        finally:
            conn.close()
        os.replace(tmp, self.path)
