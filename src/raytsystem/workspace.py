"""The workspace: its layout, its configuration, and the path policy (`discovery.py` finds
the files to ingest).

Every path raytsystem stores is workspace-relative, POSIX-separated and NFC-normalized, so the
same tree gives the same Source IDs on every machine. The policy refuses anything that could
reach outside the workspace or into raytsystem's own state: absolute paths, `..`, symlinks whose
target leaves the workspace, and anything under `_raw/`, `.raytsystem/` or `.git/`.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Sequence
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
RESERVED_TOP: Final = frozenset({RAW_DIR, STATE_DIR})
RESERVED_ANY: Final = frozenset({".git"})
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


_UNDECODED: Final = re.compile("[\udc80-\udcff]")


def shown_path(path: str) -> str:
    """A path as it can be shown and stored: a byte of its name that is no UTF-8 (which
    Python holds as a surrogate escape) written as `\\xff`."""
    if not _UNDECODED.search(path):
        return path
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def check_rel_path(path: str) -> str:
    """Validate a workspace-relative path and return its canonical (NFC, POSIX) form."""
    if _PLAIN.fullmatch(path) and path.partition("/")[0] not in RESERVED_TOP:
        return path
    if not path or path.strip() != path:
        raise PathRefused(path, "empty, or starts or ends with whitespace")
    if _CONTROL.search(path):
        raise PathRefused(path, "contains control characters")
    if _UNDECODED.search(path):
        # Bytes that are no UTF-8, as the file system hands them over (surrogate escapes): no
        # path of the ledger, no JSON and no terminal can carry them as they are.
        raise PathRefused(shown_path(path), "its name is not valid UTF-8")
    if path.startswith("/") or _DRIVE.match(path):
        raise PathRefused(path, "absolute paths are not workspace-relative")
    if "\\" in path:
        raise PathRefused(path, "use / as the separator")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise PathRefused(path, "'..', '.' and empty components are not allowed")
    if parts[0] in RESERVED_TOP:
        raise PathRefused(path, f"{parts[0]}/ holds raytsystem's own state")
    if any(p in RESERVED_ANY for p in parts):
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
    def named(cls, root: Path) -> Workspace:
        """The workspace a user named (`--workspace`): a folder that holds a raytsystem.toml.
        Only `init` makes one, so a folder without it is refused before anything is made."""
        root = root.resolve()
        if not root.is_dir():
            what = "is not a folder" if root.exists() else "does not exist"
            raise WorkspaceError(f"the workspace {root} {what}", code="workspace_not_found")
        if not (root / CONFIG_NAME).is_file():
            raise WorkspaceError(
                f"{root} is no workspace: it holds no {CONFIG_NAME} "
                f"(run `raytsystem init {root}` to make it one)",
                code="workspace_not_found",
            )
        return cls.open(root)

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
