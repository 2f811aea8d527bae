"""Source code as segments: what the language adapters (Python, tree-sitter) share.

A language adapter finds the file's definitions (`Definition`: qualified name, kind, raw lines)
and its prose (`Prose`: docstrings and comments that stand on lines of their own, with their
text per raw line, markers removed). `segments_of_code` turns them into segments:

- every raw line is either prose or code; a run of code lines with the same innermost
  definition is one `code` segment (dedented), so a segment never straddles two definitions;
- a prose block is split at its blank lines into `docstring` or `comment` segments; a paragraph
  that is a doctest (`>>>`) is code;
- the heading path is the innermost definition's qualified name, split at its dots
  (`("RetryPolicy", "max_attempts")`); a comment block right above a definition (no blank line
  between) is that definition's documentation and takes its path;
- every definition becomes a `Symbol` whose span runs from its first segment (its leading
  comment included) to its last.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..text import Finding
from .base import Normalized, SegmentBuilder, Symbol


@dataclass(frozen=True)
class Definition:
    name: str  # qualified within the file: `RetryPolicy.max_attempts`
    kind: str  # class, function, method, variable, attribute, interface, struct, type, ...
    line_start: int
    line_end: int


@dataclass
class Prose:
    kind: str  # "docstring" | "comment"
    line_start: int
    # Text of each raw line, comment markers removed, indentation (past one space) kept.
    lines: list[str] = field(default_factory=list)
    leading: bool = False  # a comment that documents the definition right below it

    @property
    def line_end(self) -> int:
        return self.line_start + len(self.lines) - 1


def segments_of_code(
    text: str,
    definitions: Sequence[Definition],
    prose: Sequence[Prose],
    findings: Sequence[Finding] = (),
    is_code: Callable[[str], bool] | None = None,
) -> Normalized:
    raw = text.split("\n")
    total = len(raw)
    owner: list[int] = [-1] * (total + 2)  # innermost definition of each line
    order = sorted(
        range(len(definitions)), key=lambda i: (definitions[i].line_start, -definitions[i].line_end)
    )
    for i in order:
        d = definitions[i]
        for line in range(max(d.line_start, 1), min(d.line_end, total) + 1):
            owner[line] = i
    prose_at: dict[int, int] = {}
    for k, block in enumerate(prose):
        for line in range(block.line_start, block.line_end + 1):
            prose_at[line] = k
    starts = {d.line_start: i for i in reversed(order) for d in (definitions[i],)}

    def path_of(index: int) -> tuple[str, ...]:
        return tuple(definitions[index].name.split(".")) if index >= 0 else ()

    builder = SegmentBuilder()
    first_line: dict[int, int] = {}  # definition -> first raw line of its segments
    run: list[str] = []
    run_start = 1
    run_owner = -1

    def flush() -> None:
        nonlocal run
        if run:
            builder.add("code", textwrap.dedent("\n".join(run)), run_start, path_of(run_owner))
        run = []

    line = 1
    while line <= total:
        if line in prose_at:
            flush()
            block = prose[prose_at[line]]
            who = owner[block.line_start]
            if block.leading:
                below = block.line_end + 1
                if below in starts and below <= total:
                    who = starts[below]
                    first_line.setdefault(who, block.line_start)
            _add_prose(builder, block, path_of(who), is_code)
            line = block.line_end + 1
            continue
        if run and owner[line] != run_owner:
            flush()
        if not run:
            run_start, run_owner = line, owner[line]
        run.append(raw[line - 1])
        line += 1
    flush()
    symbols = []
    segments = builder.segments
    for i, d in enumerate(definitions):
        low = min(first_line.get(i, d.line_start), d.line_start)
        inside = [s for s in segments if low <= s.line_start and s.line_end <= d.line_end]
        if inside:
            symbols.append(
                Symbol(d.name, d.kind, inside[0].start, inside[-1].end, d.line_start, d.line_end)
            )
    return builder.normalized(findings, symbols)


def _indent(line: str) -> int:
    expanded = line.expandtabs(4)
    return len(expanded) - len(expanded.lstrip())


def _add_prose(
    builder: SegmentBuilder,
    block: Prose,
    path: tuple[str, ...],
    is_code: Callable[[str], bool] | None,
) -> None:
    """A prose block's paragraphs (split at blank lines). A paragraph is code when it is a
    doctest (`>>>`), indented past the block's text (an example, as Go, Rust and reST write
    them), or, per the language, code commented out."""
    base = min((_indent(line) for line in block.lines if line.strip()), default=0)
    paragraph: list[str] = []
    start = block.line_start

    def put() -> None:
        if not paragraph:
            return
        body = "\n".join(line.strip() for line in paragraph)
        if (
            body.startswith(">>>")
            or all(_indent(line) >= base + 2 for line in paragraph if line.strip())
            or (is_code is not None and is_code(body))
        ):
            builder.add("code", textwrap.dedent("\n".join(paragraph)), start, path)
        else:
            builder.add(block.kind, body, start, path)

    for k, text in enumerate(block.lines):
        if text.strip():
            if not paragraph:
                start = block.line_start + k
            paragraph.append(text)
        else:
            put()
            paragraph = []
    put()
