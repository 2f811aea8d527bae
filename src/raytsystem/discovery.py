"""Discovery: the files of a workspace an ingest takes, and what it passes over and why.

Every path is checked by the workspace's path policy (`workspace.check_rel_path`); a file is
taken when the include globs select it, no exclude glob, no `.gitignore` (`gitignore.py`)
and no unreadable format (`UNREADABLE_SUFFIXES`) rules it out. What is passed over is a `Skip`
with its reason, counted by the ingest; what cannot be taken is a `Refusal`, a finding.
Folders nothing could be taken from are not walked.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
import time
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple

from .errors import PathRefused
from .forked import Child, in_child
from .gitignore import NAME as GITIGNORE
from .gitignore import GitIgnores
from .workspace import (
    RESERVED_ANY,
    RESERVED_TOP,
    Workspace,
    check_rel_path,
    glob_regex,
    shown_path,
)

# Formats no adapter reads and that are never text: discovery passes over them without reading
# them (`unsupported_type`), instead of reporting a binary file on every ingest.
UNREADABLE_SUFFIXES: Final = frozenset(
    (
        *(".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".icns", ".webp", ".tif", ".tiff"),
        *(".psd", ".heic", ".avif", ".mp3", ".wav", ".flac", ".ogg", ".m4a", ".mp4", ".mov"),
        *(".avi", ".mkv", ".webm", ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar"),
        *(".tar", ".jar", ".war", ".whl", ".egg", ".so", ".dll", ".dylib", ".exe", ".o", ".a"),
        *(".lib", ".obj", ".pyc", ".pyo", ".pyd", ".class", ".wasm", ".bin", ".dat", ".woff"),
        *(".woff2", ".ttf", ".otf", ".eot", ".sqlite", ".sqlite3", ".db", ".docx", ".xlsx"),
        *(".pptx", ".odt", ".ods", ".odp", ".doc", ".xls", ".ppt", ".dmg", ".iso", ".pack"),
    )
)


StatKey = tuple[int, int, int]  # size, mtime_ns, inode: what says a file is as it was


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_size, st.st_mtime_ns, st.st_ino)


class Candidate(NamedTuple):
    """A file discovery found: its canonical relative path, where it is on disk, and its stat
    when it was found."""

    path: str
    disk: str  # a string: discovery makes one per file, and Path objects cost more than the stat
    key: StatKey


@dataclass(frozen=True)
class Refusal:
    path: str
    code: str
    message: str


@dataclass(frozen=True)
class Skip:
    """A file discovery passed over, and why: `not_selected` (the include and exclude
    globs), `ignored_by_gitignore`, `unsupported_type` (a format raytsystem cannot read:
    images, archives, binaries). Counted, not reported one by one."""

    path: str
    reason: str


_SKIP_MESSAGES: Final = {
    "not_selected": "not matched by the include globs",
    "ignored_by_gitignore": "ignored by a .gitignore",
    "unsupported_type": "a format raytsystem cannot read",
}


def _nothing_selected(
    scope: Sequence[str], items: list[Candidate | Refusal | Skip]
) -> list[Refusal]:
    """A refusal for each folder of `scope` from which nothing was taken, with what was
    skipped there and why."""
    out = []
    for start in sorted(set(scope)):
        prefix = start.rstrip("/") + "/"
        under = [i for i in items if i.path.startswith(prefix) or i.path == start]
        if not under or any(not isinstance(i, Skip) for i in under):
            continue
        reasons = Counter(i.reason for i in under if isinstance(i, Skip))
        counts = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
        out.append(Refusal(start, "nothing_selected", f"selects no file to ingest ({counts})"))
    return out


def _inside(path: Path, real_root: Path) -> bool:
    """Whether `path`, every symlink on its way followed, is in the workspace (a symlink loop
    is not)."""
    try:
        path.resolve().relative_to(real_root)
    except (ValueError, OSError, RuntimeError):
        return False
    return True


def _shown(disk: str, root: Path) -> str:
    """A path on disk as the user knows it: relative to the workspace, exact (not NFC)."""
    return shown_path(os.path.relpath(disk, root).replace(os.sep, "/"))


def discover(ws: Workspace, scope: Sequence[str] = ()) -> Iterator[Candidate | Refusal | Skip]:
    """The workspace's files (within `scope`, if given), sorted by path (`Discovery.run`)."""
    return Discovery(ws).run(scope)


@dataclass
class Walk:
    """What discovery found, and when it began: before any file's stat was taken, on the
    clock the stat cache compares modification times with."""

    found: list[Candidate | Refusal | Skip]
    began_ns: int
    scope: tuple[str, ...]  # the paths walked (none: the whole workspace)

    def __getstate__(self) -> tuple[list[Any], int, tuple[str, ...]]:
        # Candidates are pickled as plain tuples (`walk_in_child` hands a walk over): a named
        # tuple each costs the child several times as much to pickle.
        found = [tuple(f) if isinstance(f, Candidate) else f for f in self.found]
        return found, self.began_ns, self.scope

    def __setstate__(self, state: tuple[list[Any], int, tuple[str, ...]]) -> None:
        found, self.began_ns, self.scope = state
        self.found = [Candidate._make(f) if isinstance(f, tuple) else f for f in found]


def walk(ws: Workspace, scope: Sequence[str] = ()) -> Walk:
    began_ns = time.time_ns()
    return Walk(list(discover(ws, scope)), began_ns, tuple(scope))


def walk_in_child(ws: Workspace, scope: Sequence[str] = ()) -> Child[Walk] | None:
    """`walk` started now in a forked child (`forked.in_child`: beside a command that has
    more to import before it needs the files). None where there is no fork.

    The walk may end before the command takes the writer's lock, and that is sound: what
    matters is that every stat is taken before the file is read, so that a change after
    the stat is seen by the next ingest, as with a walk made under the lock."""
    return in_child(lambda: walk(ws, scope))


class Discovery:
    """One walk of a workspace."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        # The folders an exclude glob ending in `/**` names, as one pattern (one match a folder).
        folders = [
            glob_regex(g[:-3]).pattern for g in ws.config.ingest.exclude if g.endswith("/**")
        ]
        self._excluded_folders = (
            re.compile("|".join(f"(?:{f})" for f in folders)) if folders else None
        )

    def run(self, scope: Sequence[str] = ()) -> Iterator[Candidate | Refusal | Skip]:
        """Yield the files selected by the config (within `scope`, if given), sorted by path.

        A symlinked file is followed only when its target stays inside the workspace; symlinked
        folders are not walked (their targets are ingested under their own paths), and one that
        points outside the workspace is reported.
        """
        real_root = self.ws.root.resolve()
        found: dict[str, tuple[os.DirEntry[str] | str, bool]] = {}
        refusals: list[Refusal] = []
        ignores = self._gitignores_above(scope)

        def put(rel: str, where: os.DirEntry[str] | str, explicit: bool) -> None:
            """Keep one file per stored path. Two names that are one path once NFC-normalized
            (`café` written composed and decomposed) cannot both be a source: the one first in
            byte order is, whatever order the folders were read in, and the other is refused."""
            disk = where if isinstance(where, str) else where.path
            if rel in found:
                kept = found[rel][0]
                kept_disk = kept if isinstance(kept, str) else kept.path
                if kept_disk == disk:
                    return  # the same file named twice (a folder and a file in it as scope)
                if disk < kept_disk:
                    found[rel] = (where, explicit)
                    disk, kept_disk = kept_disk, disk
                refusals.append(
                    Refusal(
                        shown_path(rel),
                        "path_collision",
                        f"{_shown(disk, self.ws.root)} is {shown_path(rel)} once NFC-normalized, as "
                        f"{_shown(kept_disk, self.ws.root)} is, which is ingested instead",
                    )
                )
                return
            found[rel] = (where, explicit)

        for start in sorted(set(scope)) or [""]:
            base = self.ws.root / start if start else self.ws.root
            if start and not base.exists() and not base.is_symlink():
                refusals.append(
                    Refusal(start, "path_not_found", "no such file or folder in the workspace")
                )
                continue
            if start and not _inside(base.parent, real_root):
                # A symlinked folder on the way: its files are not the workspace's, whatever
                # path names them. (A symlink named itself is judged as any file is.)
                refusals.append(
                    Refusal(
                        start,
                        "symlink_outside",
                        "a symlinked folder on its way leaves the workspace",
                    )
                )
                continue
            if base.is_file() or (base.is_symlink() and not base.is_dir()):
                put(start, str(base), True)
                continue
            if start and not _inside(base, real_root):
                refusals.append(
                    Refusal(start, "symlink_outside", "symlinked folder leaves the workspace")
                )
                continue
            for rel, entry in self._walk(base, real_root, refusals, ignores):
                put(rel, entry, False)
        items: list[Candidate | Refusal | Skip] = list(refusals)
        for rel, (where, explicit) in found.items():
            item = self._candidate(rel, where, real_root, ignores, explicit=explicit)
            if item is not None:
                items.append(item)
        items.extend(_nothing_selected(scope, items))
        items.sort(key=lambda item: item.path)
        yield from items

    def _gitignores_above(self, scope: Sequence[str]) -> GitIgnores:
        """The `.gitignore` files of the folders above those a walk of `scope` starts in (the
        walk reads the ones it passes itself)."""
        ignores = GitIgnores()
        folders = {""}
        for start in scope:
            parts = start.split("/")
            folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
        for folder in sorted(folders):
            path = self.ws.root / folder / GITIGNORE if folder else self.ws.root / GITIGNORE
            if path.is_file() and not (scope and folder in scope):
                ignores.load(folder, str(path))
        return ignores

    def _pruned(self, rel_dir: str, ignores: GitIgnores) -> bool:
        """Whether no file under the folder `rel_dir` can be selected: a `.gitignore` ignores
        it, or an exclude glob ends in `/**` and names it."""
        excluded = self._excluded_folders
        return (excluded is not None and excluded.match(rel_dir) is not None) or ignores.ignored(
            rel_dir, folder=True
        )

    def _walk(
        self, base: Path, real_root: Path, refusals: list[Refusal], ignores: GitIgnores
    ) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """(relative path, directory entry) of every file under `base`, in no set order.

        Folders are read with `os.scandir`, whose entries know their type without a system
        call; reserved folders are not entered, nor symlinked ones (one that leaves the
        workspace is reported), nor those nothing could be selected from (`_pruned`); each
        folder's `.gitignore` is read before its entries. A folder that cannot be read is
        skipped."""
        root = str(self.ws.root)
        prefix = root if root.endswith(os.sep) else root + os.sep
        pending = [str(base)]
        while pending:
            folder = pending.pop()
            # Every folder is `base` or under it, itself under the root: plain string work.
            rel_dir = "" if folder == root else folder[len(prefix) :].replace(os.sep, "/")
            try:
                with os.scandir(folder) as listing:
                    entries = list(listing)
            except OSError:
                continue
            for entry in entries:
                if entry.name == GITIGNORE:
                    ignores.load(unicodedata.normalize("NFC", rel_dir), entry.path)
            for entry in entries:
                name = entry.name
                rel = f"{rel_dir}/{name}" if rel_dir else name
                try:
                    is_folder = entry.is_dir()  # follows a symlink, as os.walk does
                except OSError:
                    is_folder = False
                if not is_folder:
                    yield unicodedata.normalize("NFC", rel), entry
                elif (
                    name in RESERVED_ANY
                    or (rel_dir == "" and name in RESERVED_TOP)
                    or self._pruned(unicodedata.normalize("NFC", rel), ignores)
                ):
                    continue
                elif not entry.is_symlink():
                    pending.append(entry.path)
                elif not _inside(Path(entry.path), real_root):
                    refusals.append(
                        Refusal(
                            shown_path(unicodedata.normalize("NFC", rel)),
                            "symlink_outside",
                            "symlinked folder leaves the workspace",
                        )
                    )

    def _candidate(
        self,
        rel: str,
        entry: os.DirEntry[str] | str,
        real_root: Path,
        ignores: GitIgnores,
        *,
        explicit: bool,
    ) -> Candidate | Refusal | Skip | None:
        """What discovery makes of one path: `entry` is its directory entry from `_walk`, or
        its path on disk when it was named explicitly (what is skipped is then a refusal,
        with its reason for code)."""
        try:
            canonical = check_rel_path(rel)
        except PathRefused as exc:
            return Refusal(shown_path(rel), "path_refused", exc.reason)
        skip = self._skip_reason(canonical, ignores)
        if skip is not None:
            if explicit:
                return Refusal(canonical, skip, _SKIP_MESSAGES[skip])
            return Skip(canonical, skip)
        disk = entry if isinstance(entry, str) else entry.path
        try:
            # One system call for the common case of a plain file (the entry's lstat).
            st = os.lstat(disk) if isinstance(entry, str) else entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                try:
                    target = Path(disk).resolve()
                except RuntimeError:  # Python 3.11's word for a symlink loop (ELOOP)
                    return Refusal(canonical, "read_error", "a symlink loop: no file at its end")
                try:
                    inside = target.relative_to(real_root).as_posix()
                except ValueError:
                    return Refusal(
                        canonical, "symlink_outside", "symlink target leaves the workspace"
                    )
                try:
                    check_rel_path(inside)
                except PathRefused as exc:
                    return Refusal(canonical, "path_refused", f"symlink target: {exc.reason}")
                st = os.stat(disk)
        except OSError as exc:
            return Refusal(canonical, "read_error", f"cannot stat: {exc.strerror}")
        if not stat.S_ISREG(st.st_mode):
            return None
        return Candidate(canonical, disk, stat_key(st))

    def _skip_reason(self, rel: str, ignores: GitIgnores) -> str | None:
        """Why discovery passes over the file at `rel`, or None when it takes it."""
        if not self.ws.selected(rel):
            return "not_selected"
        if ignores.ignored(rel):
            return "ignored_by_gitignore"
        if posixpath.splitext(rel)[1].lower() in UNREADABLE_SUFFIXES:
            return "unsupported_type"
        return None


class Selection:
    """Discovery's decision one path at a time, for a reader that walks the workspace itself
    to compare stats (the freshness check): the same rules, each folder's `.gitignore` read
    as the walk enters it (`enter`)."""

    def __init__(self, ws: Workspace) -> None:
        self._discovery = Discovery(ws)
        self._real_root = ws.root.resolve()
        self._root = ws.root
        self._ignores = self._discovery._gitignores_above(())

    def enter(self, rel_dir: str, entries: Sequence[os.DirEntry[str]]) -> None:
        """The walk reads the folder `rel_dir` ("" for the root, which is read already)."""
        if rel_dir:
            for entry in entries:
                if entry.name == GITIGNORE:
                    self._ignores.load(unicodedata.normalize("NFC", rel_dir), entry.path)

    def pruned(self, rel_dir: str) -> bool:
        """Whether discovery would not walk the folder `rel_dir` at all."""
        return self._pruned(rel_dir, self._ignores)

    def _pruned(self, rel_dir: str, ignores: GitIgnores) -> bool:
        name = rel_dir.rpartition("/")[2]
        return (
            name in RESERVED_ANY
            or ("/" not in rel_dir and name in RESERVED_TOP)
            or self._discovery._pruned(unicodedata.normalize("NFC", rel_dir), ignores)
        )

    def candidate_of(self, rel: str, entry: os.DirEntry[str]) -> Candidate | None:
        """What discovery makes of the file `entry` met at `rel` (not NFC-normalized yet) by
        a walk that entered its folders: a Candidate, or None (passed over, refused)."""
        item = self._discovery._candidate(
            unicodedata.normalize("NFC", rel), entry, self._real_root, self._ignores, explicit=False
        )
        return item if isinstance(item, Candidate) else None

    def candidate(self, rel: str) -> Candidate | None:
        """The selected file at workspace path `rel` as discovery would find it, or None (not
        there, passed over, refused), with the `.gitignore`s of every folder above it."""
        if not rel:
            return None
        disk = os.path.join(self._real_root, *rel.split("/"))
        # Discovery walks no symlinked folder: every folder on the way must be a real one.
        if os.path.realpath(os.path.dirname(disk)) != os.path.dirname(disk):
            return None
        ignores = self._discovery._gitignores_above([rel])
        folders = rel.split("/")[:-1]
        if any(self._pruned("/".join(folders[: i + 1]), ignores) for i in range(len(folders))):
            return None
        item = self._discovery._candidate(rel, disk, self._real_root, ignores, explicit=False)
        return item if isinstance(item, Candidate) else None
