"""`.gitignore` decisions: the one-regex shortcut per file decides as asking every line does."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pathspec import GitIgnoreSpec

from raytsystem.gitignore import GitIgnores

LINES = [
    "*.log",
    "!keep.log",
    "build/",
    "/dist",
    "docs/**/draft-*.md",
    "**/cache",
    "# a comment",
    "",
    "a?c",
    "[ab]*.txt",
    "!important/",
    "\\#hash.md",
    "secret*",
    "!secret-ok.md",
    "nested/deep/",
]
PARTS = ["docs", "build", "dist", "cache", "nested", "deep", "important", "src", "a"]
NAMES = [
    "x.log",
    "keep.log",
    "draft-1.md",
    "abc",
    "b1.txt",
    "#hash.md",
    "secret.md",
    "secret-ok.md",
    "note.md",
    "cache",
]


def asked_line_by_line(specs: dict[str, list[str]], rel: str, folder: bool) -> bool:
    """The decision without the shortcut: the deepest `.gitignore` with a matching line."""
    target = rel + "/" if folder else rel
    parts = rel.split("/")
    for depth in range(len(parts) - 1, -1, -1):
        base = "/".join(parts[:depth])
        if base not in specs:
            continue
        result = GitIgnoreSpec.from_lines(specs[base]).check_file(
            target[len(base) + 1 :] if base else target
        )
        if result.include is not None:
            return bool(result.include)
    return False


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    root=st.lists(st.sampled_from(LINES), max_size=8),
    nested=st.lists(st.sampled_from(LINES), max_size=5),
    paths=st.lists(
        st.tuples(
            st.lists(st.sampled_from(PARTS), max_size=3), st.sampled_from(NAMES), st.booleans()
        ),
        min_size=1,
        max_size=20,
    ),
)
def test_the_shortcut_decides_as_every_line_does(
    root: list[str], nested: list[str], paths: list[tuple[list[str], str, bool]]
) -> None:
    specs = {"": root, "docs": nested}
    ignores = GitIgnores()
    with tempfile.TemporaryDirectory() as tmp:
        for folder, lines in specs.items():
            path = Path(tmp) / (folder or "root") / ".gitignore"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            ignores.load(folder, str(path))
    kept = {f: lines for f, lines in specs.items() if GitIgnoreSpec.from_lines(lines).patterns}
    for folders, name, is_folder in paths:
        rel = "/".join([*folders, name])
        assert ignores.ignored(rel, folder=is_folder) == asked_line_by_line(kept, rel, is_folder), (
            rel,
            specs,
        )
