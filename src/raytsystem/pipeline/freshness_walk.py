"""The FRESHNESS walk (ADR 0039): the workspace's selected files compared with the stat cache
(`storage.statcache`), by discovery's rules, until a deadline.

`observe` walks in this process; `observe_forked` walks in a forked child beside the answer
(a one-shot process, the CLI). What the walk finds (`Observation`) is judged against a
generation by `pipeline.freshness`.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from ..discovery import Selection, StatKey, stat_key
from ..forked import in_child
from ..storage.statcache import Entry, read_entries
from ..workspace import Workspace

BOUND_S: Final = 1.0  # seconds: the walk stops this long after the check began
STATCACHE: Final = "statcache.sqlite3"


@dataclass
class Observation:
    """The workspace's selected files compared with the stat cache."""

    cache_generation: str | None  # the generation the cache is for (None: no usable cache)
    entries: dict[str, Entry]
    seen: set[str] = field(default_factory=set)  # selected files found
    suspects: dict[str, str] = field(default_factory=dict)  # path -> disk path: not vouched for
    keys: dict[str, StatKey] = field(default_factory=dict)  # the suspects' stats
    removed: set[str] = field(default_factory=set)  # cached sources not found
    complete: bool = True  # the walk saw every file
    sources_cached: int = 0  # entries that name a revision

    def __post_init__(self) -> None:
        self.sources_cached = sum(1 for e in self.entries.values() if e[3])

    def put(self, path: str, key: StatKey | None, disk: str = "") -> None:
        """Record what is at `path` now (`key` None: nothing selected is there)."""
        entry = self.entries.get(path)
        if key is None:
            self.seen.discard(path)
            self.suspects.pop(path, None)
            if entry is not None and entry[3]:
                self.removed.add(path)
            return
        self.seen.add(path)
        self.removed.discard(path)
        if entry is None or entry[:3] != key:
            self.suspects[path] = disk
            self.keys[path] = key
        else:
            self.suspects.pop(path, None)


def observe(ws: Workspace, deadline: float) -> Observation:
    """Walk the workspace (until `deadline`, a `time.monotonic()` value) and compare it with
    the stat cache.

    The walk is discovery's (`discovery.Selection` decides what is selected and which folders
    are not entered, with its rules for names, symlinks and `.gitignore`s) with a shortcut for the common file: one whose path and
    stat match its cache entry was selected when that entry was written, and is as it was."""
    snapshot = read_entries(ws.state_dir / STATCACHE)
    if snapshot is None:
        return Observation(None, {})
    generation, entries = snapshot
    obs = Observation(generation, entries)
    seen, suspects, keys = obs.seen, obs.suspects, obs.keys
    selection = Selection(ws)
    root = str(ws.root)
    prefix = root if root.endswith(os.sep) else root + os.sep
    pending = [root]
    matched = 0  # cached sources found
    while pending:
        if time.monotonic() > deadline:
            obs.complete = False
            return obs
        folder = pending.pop()
        rel_dir = "" if folder == root else folder[len(prefix) :].replace(os.sep, "/") + "/"
        try:
            with os.scandir(folder) as listing:
                found = list(listing)
        except OSError:
            continue
        selection.enter(rel_dir[:-1], found)
        for entry in found:
            name = entry.name
            try:
                is_folder = entry.is_dir()  # follows a symlink, as discovery does
            except OSError:
                is_folder = False
            if is_folder:
                if entry.is_symlink() or selection.pruned(rel_dir + name):
                    continue
                pending.append(entry.path)
                continue
            rel = rel_dir + name
            cached = entries.get(rel)
            if cached is not None:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    st = None
                if st is not None and cached[:3] == (st.st_size, st.st_mtime_ns, st.st_ino):
                    seen.add(rel)
                    matched += 1 if cached[3] else 0
                    continue
            c = selection.candidate_of(rel, entry)
            if c is None:
                continue
            seen.add(c.path)
            key = keys[c.path] = c.key
            cached = entries.get(c.path)
            if cached is not None and cached[3]:
                matched += 1
            if cached is None or cached[:3] != key:
                suspects[c.path] = c.disk
    if matched != obs.sources_cached:
        obs.removed = {p for p, e in entries.items() if e[3] and p not in seen}
    return obs


def observe_forked(ws: Workspace, bound: float = BOUND_S) -> Callable[[float], Observation] | None:
    """Start the walk now in a forked child (`forked.in_child`), so that it runs on another
    core beside the answer instead of sharing this process's GIL; the function returned
    waits for its result (the probe calls it in a thread). None where there is no fork."""
    deadline = time.monotonic() + bound  # the same clock in the child

    def walk() -> Observation:
        obs = observe(ws, deadline)
        slim = copy.copy(obs)  # what `judge` reads: the suspects' entries, not all
        slim.entries = {p: obs.entries[p] for p in obs.suspects if p in obs.entries}
        return slim

    child = in_child(walk)
    return None if child is None else lambda _deadline: child.result()


def cache_key(ws: Workspace) -> StatKey | None:
    """The stat of the stat cache file: when it moves, an ingest wrote it."""
    try:
        return stat_key(os.stat(ws.state_dir / STATCACHE))
    except OSError:
        return None
