"""The `.gitignore` files of a workspace, as git reads them: what they ignore is never
knowledge (a build's output, a virtual environment, a local database).

Each folder's `.gitignore` applies to the paths under it; the deepest file with a pattern that
matches a path decides (a `!pattern` re-includes), and a folder that is ignored is not entered,
as git does not look inside one. Patterns are matched by `pathspec`'s implementation of git's
rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

NAME = ".gitignore"


class GitIgnores:
    """The `.gitignore` files found so far, by the folder they are in ("" for the root)."""

    def __init__(self) -> None:
        self._specs: dict[str, GitIgnoreSpec] = {}

    def load(self, folder: str, disk_path: str) -> None:
        """Read the `.gitignore` of `folder` (a workspace path) at `disk_path`; one that
        cannot be read or decoded ignores nothing."""
        from pathspec import GitIgnoreSpec

        try:
            with open(disk_path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except (OSError, UnicodeDecodeError):
            return
        spec = GitIgnoreSpec.from_lines(lines)
        if spec.patterns:
            self._specs[folder] = spec

    def ignored(self, rel: str, *, folder: bool = False) -> bool:
        """Whether the workspace path `rel` (a folder's, when `folder`) is ignored."""
        if not self._specs:
            return False
        target = rel + "/" if folder else rel
        parts = rel.split("/")
        for depth in range(len(parts) - 1, -1, -1):
            base = "/".join(parts[:depth])
            spec = self._specs.get(base)
            if spec is None:
                continue
            result = spec.check_file(target[len(base) + 1 :] if base else target)
            if result.include is not None:
                return bool(result.include)
        return False
