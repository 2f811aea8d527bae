"""The workspace: its layout, the path policy, and discovery of the files to ingest.

Every path raytsystem stores is workspace-relative, POSIX-separated and NFC-normalized, so the
same tree gives the same Source IDs on every machine. The policy refuses anything that could
reach outside the workspace or into raytsystem's own state: absolute paths, `..`, symlinks whose
target leaves the workspace, and anything under `_raw/`, `.raytsystem/` or `.git/`.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Final

from .config import CONFIG_NAME, DEFAULT_CONFIG_TEXT, Config, load_config
from .errors import PathRefused, WorkspaceError

STATE_DIR: Final = ".raytsystem"
RAW_DIR: Final = "_raw"
MANUAL_DIR: Final = "knowledge/manual"
REVIEWS_DIR: Final = "ops/reviews"
# Top-level folders that hold raytsystem's own state or another tool's: never sources.
_RESERVED_TOP: Final = frozenset({RAW_DIR, STATE_DIR})
_RESERVED_ANY: Final = frozenset({".git"})
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE: Final = re.compile(r"[A-Za-z]:[\\/]")

GITIGNORE_LINES: Final = ("/_raw/blake3/", "/_raw/.staging/", "/.raytsystem/")

RAW_README: Final = """\
# _raw/ — the content-addressed raw store

Every file raytsystem ingests is stored here once, byte for byte, under its BLAKE3 hash, and
so is every normalized text. Ingest writes the new blobs of a few files as one pack,
`_raw/blake3/packs/<64 hex digits>.pack` (named by the BLAKE3 of the pack itself: a table of
addresses, offsets and lengths, then the blobs); a blob stored on its own is
`_raw/blake3/<first 2 hex digits>/<64 hex digits>`.

- Blobs and packs are write-once and read-only: nothing ever edits or replaces one.
- `raytsystem verify` re-hashes every blob and pack; a blob whose bytes no longer match its
  address makes every answer that cites it fail closed.
- The blobs are git-ignored (`/_raw/blake3/` in .gitignore); this README is not.
- `_raw/.staging/` exists only while an ingest runs (or until the next one, after a kill): it
  holds new packs until they are synced to disk and published under their names.
"""


def is_note(path: str) -> bool:
    """Whether a workspace path is a manual note: the only place people write knowledge."""
    return path.startswith(MANUAL_DIR + "/")


# The common case, settled by one match: ASCII names of letters, digits, `_`, `-` and `.` that
# do not start with a dot (so no `.`, `..` or `.git`), joined by single slashes. Such a path is
# NFC already and passes every rule below but the top-level one (`_raw/`).
_PLAIN: Final = re.compile(r"[\w-][\w.-]*(?:/[\w-][\w.-]*)*", re.ASCII)


def check_rel_path(path: str) -> str:
    """Validate a workspace-relative path and return its canonical (NFC, POSIX) form."""
    if _PLAIN.fullmatch(path) and path.partition("/")[0] not in _RESERVED_TOP:
        return path
    if not path or path.strip() != path:
        raise PathRefused(path, "empty, or starts or ends with whitespace")
    if _CONTROL.search(path):
        raise PathRefused(path, "contains control characters")
    if path.startswith("/") or _DRIVE.match(path):
        raise PathRefused(path, "absolute paths are not workspace-relative")
    if "\\" in path:
        raise PathRefused(path, "use / as the separator")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise PathRefused(path, "'..', '.' and empty components are not allowed")
    if parts[0] in _RESERVED_TOP:
        raise PathRefused(path, f"{parts[0]}/ holds raytsystem's own state")
    if any(p in _RESERVED_ANY for p in parts):
        raise PathRefused(path, ".git/ is never ingested")
    return unicodedata.normalize("NFC", path)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a workspace glob: `**` crosses folders, `*` and `?` stay inside one."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("^" + "".join(out) + "$")


def _any_of(globs: Sequence[str]) -> re.Pattern[str] | None:
    """One pattern matching any of the globs (one match per path instead of one per glob)."""
    if not globs:
        return None
    return re.compile("|".join(f"(?:{glob_regex(g).pattern})" for g in globs))


@dataclass(frozen=True)
class Candidate:
    """A file discovery found: its canonical relative path and where it is on disk."""

    path: str
    disk: str  # a string: discovery makes one per file, and Path objects cost more than the stat
    stat: os.stat_result


@dataclass(frozen=True)
class Refusal:
    path: str
    code: str
    message: str


@dataclass
class Workspace:
    root: Path

    @classmethod
    def open(cls, root: Path) -> Workspace:
        return cls(root=root.resolve())

    @cached_property
    def config(self) -> Config:
        # Loaded on first use: the read commands (query, search, show) never need it.
        return load_config(self.root)

    def reload_config(self) -> None:
        """Read raytsystem.toml again on next use (a long-running watch saw it change)."""
        for name in ("config", "_includes", "_excludes"):
            self.__dict__.pop(name, None)

    @classmethod
    def find(cls, start: Path) -> Workspace:
        """The nearest folder at or above `start` that holds a raytsystem.toml."""
        start = start.resolve()
        for folder in (start, *start.parents):
            if (folder / CONFIG_NAME).is_file():
                return cls.open(folder)
        raise WorkspaceError(
            f"no {CONFIG_NAME} in {start} or any folder above it: run `raytsystem init` there "
            "or pass --workspace",
            code="workspace_not_found",
        )

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def raw_dir(self) -> Path:
        return self.root / RAW_DIR

    @property
    def index_dir(self) -> Path:
        return self.state_dir / "indexes"

    @property
    def default_database_url(self) -> str:
        return f"sqlite:///{self.state_dir / 'ledger.sqlite3'}"

    @cached_property
    def _includes(self) -> re.Pattern[str] | None:
        return _any_of(self.config.ingest.include)

    @cached_property
    def _excludes(self) -> re.Pattern[str] | None:
        return _any_of(self.config.ingest.exclude)

    def selected(self, rel: str) -> bool:
        include, exclude = self._includes, self._excludes
        return (
            include is not None
            and include.match(rel) is not None
            and (exclude is None or exclude.match(rel) is None)
        )

    def rel_from_cli(self, arg: str, cwd: Path) -> str:
        """Turn a path typed by a user (relative to `cwd` or absolute) into a workspace path."""
        absolute = Path(os.path.abspath(cwd / arg))
        try:
            rel = absolute.relative_to(self.root)
        except ValueError:
            raise PathRefused(arg, f"outside the workspace {self.root}") from None
        text = rel.as_posix()
        return "" if text == "." else check_rel_path(text)

    def discover(self, scope: Sequence[str] = ()) -> Iterator[Candidate | Refusal]:
        """Yield the files selected by the config (within `scope`, if given), sorted by path.

        A symlinked file is followed only when its target stays inside the workspace; symlinked
        folders are not walked (their targets are ingested under their own paths), and one that
        points outside the workspace is reported.
        """
        real_root = self.root.resolve()
        found: dict[str, tuple[os.DirEntry[str] | str, bool]] = {}
        refusals: list[Refusal] = []

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
                        rel,
                        "path_collision",
                        f"{_shown(disk, self.root)} is {rel} once NFC-normalized, as "
                        f"{_shown(kept_disk, self.root)} is, which is ingested instead",
                    )
                )
                return
            found[rel] = (where, explicit)

        for start in sorted(set(scope)) or [""]:
            base = self.root / start if start else self.root
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
            for rel, entry in self._walk(base, real_root, refusals):
                put(rel, entry, False)
        items: list[Candidate | Refusal] = list(refusals)
        for rel, (where, explicit) in found.items():
            item = self._candidate(rel, where, real_root, explicit=explicit)
            if item is not None:
                items.append(item)
        items.sort(key=lambda item: item.path)
        yield from items

    def candidate_of(self, rel: str, entry: os.DirEntry[str]) -> Candidate | None:
        """What discovery makes of the file `entry` found at `rel` (not NFC-normalized yet)
        while walking: a Candidate, or None (not selected, refused). For readers that walk
        the workspace themselves to compare stats (the freshness check)."""
        item = self._candidate(
            unicodedata.normalize("NFC", rel), entry, self.real_root, explicit=False
        )
        return item if isinstance(item, Candidate) else None

    @cached_property
    def real_root(self) -> Path:
        return self.root.resolve()

    def candidate(self, rel: str) -> Candidate | None:
        """The selected file at workspace path `rel` as discovery would find it, or None (not
        there, not selected, refused)."""
        if not rel:
            return None
        real_root = self.real_root
        disk = os.path.join(real_root, *rel.split("/"))
        # Discovery walks no symlinked folder: every folder on the way must be a real one.
        if os.path.realpath(os.path.dirname(disk)) != os.path.dirname(disk):
            return None
        item = self._candidate(rel, disk, real_root, explicit=False)
        return item if isinstance(item, Candidate) else None

    def _walk(
        self, base: Path, real_root: Path, refusals: list[Refusal]
    ) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """(relative path, directory entry) of every file under `base`, in no set order.

        Folders are read with `os.scandir`, whose entries know their type without a system
        call; reserved folders are not entered, nor symlinked ones (one that leaves the
        workspace is reported). A folder that cannot be read is skipped."""
        root = str(self.root)
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
                name = entry.name
                rel = f"{rel_dir}/{name}" if rel_dir else name
                try:
                    is_folder = entry.is_dir()  # follows a symlink, as os.walk does
                except OSError:
                    is_folder = False
                if not is_folder:
                    yield unicodedata.normalize("NFC", rel), entry
                elif name in _RESERVED_ANY or (rel_dir == "" and name in _RESERVED_TOP):
                    continue
                elif not entry.is_symlink():
                    pending.append(entry.path)
                elif not _inside(Path(entry.path), real_root):
                    refusals.append(
                        Refusal(
                            unicodedata.normalize("NFC", rel),
                            "symlink_outside",
                            "symlinked folder leaves the workspace",
                        )
                    )

    def _candidate(
        self, rel: str, entry: os.DirEntry[str] | str, real_root: Path, *, explicit: bool
    ) -> Candidate | Refusal | None:
        """What discovery makes of one path: `entry` is its directory entry from `_walk`, or
        its path on disk when it was named explicitly."""
        try:
            canonical = check_rel_path(rel)
        except PathRefused as exc:
            return Refusal(rel, "path_refused", exc.reason)
        if not self.selected(canonical):
            if explicit:
                return Refusal(canonical, "not_selected", "not matched by the include globs")
            return None
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
        return Candidate(canonical, disk, st)


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
    return os.path.relpath(disk, root).replace(os.sep, "/")


def init_workspace(root: Path) -> tuple[Workspace, list[str]]:
    """Create the layout in `root` (idempotent). Returns the workspace and what was created."""
    root = root.resolve()
    created: list[str] = []
    if not root.is_dir():
        raise WorkspaceError(f"{root} is not a folder", code="workspace_not_found")

    def ensure_dir(rel: str) -> None:
        path = root / rel
        if not path.is_dir():
            path.mkdir(parents=True)
            created.append(rel + "/")

    def ensure_file(rel: str, text: str) -> None:
        path = root / rel
        if not path.exists():
            path.write_text(text, encoding="utf-8")
            created.append(rel)

    ensure_file(CONFIG_NAME, DEFAULT_CONFIG_TEXT)
    for rel in (RAW_DIR, MANUAL_DIR, "ops/decisions", STATE_DIR):
        ensure_dir(rel)
    ensure_file(f"{RAW_DIR}/README.md", RAW_README)
    gitignore = root / ".gitignore"
    existing = gitignore.read_text(encoding="utf-8").splitlines() if gitignore.exists() else []
    missing = [line for line in GITIGNORE_LINES if line not in existing]
    if missing:
        with gitignore.open("a", encoding="utf-8") as handle:
            if existing and existing[-1] != "":
                handle.write("\n")
            handle.write("# raytsystem: raw blobs and local state\n")
            handle.write("\n".join(missing) + "\n")
        created.append(".gitignore (" + ", ".join(missing) + ")")
    return Workspace.open(root), created
