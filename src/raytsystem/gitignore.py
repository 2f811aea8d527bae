"""The `.gitignore` files of a workspace, as git reads them: what they ignore is never
knowledge (a build's output, a virtual environment, a local database).

Each folder's `.gitignore` applies to the paths under it; the deepest file with a pattern that
matches a path decides (a `!pattern` re-includes), and a folder that is ignored is not entered,
as git does not look inside one. Patterns are matched by `pathspec`'s implementation of git's
rules.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

# pathspec names a group in its patterns' regexes; an alternation of them cannot repeat a name
_NAMED_GROUP = re.compile(r"\(\?P<\w+>")

NAME = ".gitignore"


class GitIgnores:
    """The `.gitignore` files found so far, by the folder they are in ("" for the root)."""

    def __init__(self) -> None:
        self._specs: dict[str, GitIgnoreSpec] = {}
        # Per folder, one pattern any of whose `.gitignore` lines matches: a path it does not
        # match is decided without asking each line (most paths, in most folders).
        self._any: dict[str, re.Pattern[str] | None] = {}
        # (folder, its prefix in paths under it), deepest first: the order of the decision
        self._order: list[tuple[str, str]] = []

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
            self._any[folder] = _any_line(spec)
            self._order = sorted(
                ((f, f + "/" if f else "") for f in self._specs),
                key=lambda item: -item[0].count("/") - bool(item[0]),
            )

    def ignored(self, rel: str, *, folder: bool = False) -> bool:
        """Whether the workspace path `rel` (a folder's, when `folder`) is ignored."""
        if not self._specs:
            return False
        target = rel + "/" if folder else rel
        for base, prefix in self._order:  # the folders above `rel` that have one, deepest first
            if not rel.startswith(prefix) or rel == base:
                continue
            relative = target[len(prefix) :]
            quick = self._any[base]
            if quick is not None and quick.search(relative) is None:
                continue  # no line of this file matches: it decides nothing
            result = self._specs[base].check_file(relative)
            if result.include is not None:
                return bool(result.include)
        return False


def _any_line(spec: GitIgnoreSpec) -> re.Pattern[str] | None:
    """One regex matching where any of the spec's patterns does (None: cannot be made, and
    every path is asked of each line)."""
    sources = []
    for pattern in spec.patterns:
        regex = getattr(pattern, "regex", None)
        if pattern.include is None:
            continue  # a blank or comment line
        if not isinstance(regex, re.Pattern) or regex.flags & ~re.UNICODE:
            return None
        sources.append(f"(?:{_NAMED_GROUP.sub('(?:', regex.pattern)})")
    try:
        return re.compile("|".join(sources)) if sources else None
    except re.error:
        return None
