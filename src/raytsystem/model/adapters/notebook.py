"""Jupyter notebooks (`.ipynb`, nbformat 4, and 3's worksheets): Markdown cells as Markdown,
code and raw cells as code, outputs ignored; every segment names its cell (0-based).

Markdown cells go through the Markdown adapter with the heading stack carried from one cell to
the next, so a code cell sits under the headings of the Markdown above it.

Lines: Jupyter writes a cell's source as a JSON array with one string per source line, each on a
line of its own; then a segment's lines are the raw lines of the `.ipynb` file that hold those
strings (found by reading the JSON with positions), and a reader can open the file there. A
notebook written another way (one string per cell, or all on one line) cannot be mapped so:
then every line number in it is the line within its cell's source, and an `info` finding
(`notebook_lines_in_cells`) says so. The choice is made for the whole notebook, so line numbers
never mean two things in one normalization.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from typing import Any, Final

from ..text import Finding, normalize_newlines
from .base import Adapter, AdapterRefused, Normalized, SegmentBuilder
from .markdown import markdown_into

_WS: Final = re.compile(r"[ \t\n\r]*")
_NUMBER: Final = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LITERALS: Final = {"true": True, "false": False, "null": None}


class _JsonWithLines:
    """A JSON reader that also records, for every array of strings, the raw line of each
    string (json.loads keeps no positions)."""

    def __init__(self, text: str) -> None:
        import json.decoder

        self.text = text
        # json's own string scanner (in C): the exact JSON string rules, with the end offset.
        self.scan: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.lines: dict[int, list[int]] = {}  # id(list) -> raw line of each string in it

    def line_of(self, offset: int) -> int:
        return bisect.bisect_left(self.newlines, offset) + 1

    def parse(self) -> Any:
        value, end = self.value(0)
        if _WS.match(self.text, end).end() != len(self.text):  # type: ignore[union-attr]
            raise ValueError(f"extra data at offset {end}")
        return value

    def value(self, i: int) -> tuple[Any, int]:
        s = self.text
        i = _WS.match(s, i).end()  # type: ignore[union-attr]
        ch = s[i : i + 1]
        if ch == '"':
            return self.scan(s, i + 1, True)
        if ch == "{":
            obj: dict[str, Any] = {}
            i = _WS.match(s, i + 1).end()  # type: ignore[union-attr]
            if s[i : i + 1] == "}":
                return obj, i + 1
            while True:
                if s[i : i + 1] != '"':
                    raise ValueError(f"expected a key at offset {i}")
                key, i = self.scan(s, i + 1, True)
                i = _WS.match(s, i).end()  # type: ignore[union-attr]
                if s[i : i + 1] != ":":
                    raise ValueError(f"expected ':' at offset {i}")
                obj[key], i = self.value(i + 1)
                i = _WS.match(s, i).end()  # type: ignore[union-attr]
                if s[i : i + 1] == "}":
                    return obj, i + 1
                if s[i : i + 1] != ",":
                    raise ValueError(f"expected ',' or '}}' at offset {i}")
                i = _WS.match(s, i + 1).end()  # type: ignore[union-attr]
        if ch == "[":
            items: list[Any] = []
            lines: list[int] = []
            i = _WS.match(s, i + 1).end()  # type: ignore[union-attr]
            if s[i : i + 1] == "]":
                return items, i + 1
            while True:
                start = _WS.match(s, i).end()  # type: ignore[union-attr]
                item, i = self.value(start)
                items.append(item)
                lines.append(self.line_of(start))
                i = _WS.match(s, i).end()  # type: ignore[union-attr]
                if s[i : i + 1] == "]":
                    if all(isinstance(x, str) for x in items):
                        self.lines[id(items)] = lines
                    return items, i + 1
                if s[i : i + 1] != ",":
                    raise ValueError(f"expected ',' or ']' at offset {i}")
                i += 1
        for word, literal in _LITERALS.items():
            if s.startswith(word, i):
                return literal, i + len(word)
        m = _NUMBER.match(s, i)
        if m:
            number = m.group()
            return (float(number) if any(c in number for c in ".eE") else int(number)), m.end()
        raise ValueError(f"unexpected {ch!r} at offset {i}" if ch else "unexpected end")


def _cells(notebook: Any) -> list[Any]:
    if not isinstance(notebook, dict):
        raise AdapterRefused("notebook_invalid", "the JSON is not an object")
    cells = notebook.get("cells")
    if isinstance(cells, list):
        return cells
    worksheets = notebook.get("worksheets")  # nbformat 3
    if isinstance(worksheets, list):
        return [c for w in worksheets if isinstance(w, dict) for c in w.get("cells") or ()]
    raise AdapterRefused("notebook_invalid", "no 'cells' (nbformat 4) or 'worksheets' (3)")


def normalize_notebook(text: str) -> Normalized:
    reader = _JsonWithLines(text)
    try:
        notebook = reader.parse()
    except (ValueError, RecursionError) as exc:
        raise AdapterRefused("notebook_invalid", f"not JSON: {exc}") from None
    cells = _cells(notebook)
    findings: list[Finding] = []
    sources: list[tuple[int, str, str, list[int] | None]] = []  # (index, type, source, lines)
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            findings.append(Finding("notebook_cell_invalid", f"cell {index}", "not an object"))
            continue
        kind = cell.get("cell_type")
        source = (
            cell.get("input") if kind == "code" and "source" not in cell else cell.get("source")
        )
        if isinstance(source, str):
            pieces = [source]
        elif isinstance(source, list) and all(isinstance(x, str) for x in source):
            pieces = source
        else:
            findings.append(
                Finding("notebook_cell_invalid", f"cell {index}", "its source is not text")
            )
            continue
        joined = normalize_newlines("".join(pieces))
        if kind == "heading":  # nbformat 3: a heading cell with its level
            level = cell.get("level")
            joined = (
                "#" * (max(1, min(6, level)) if isinstance(level, int) else 1)
                + " "
                + joined.replace("\n", " ")
            )
            kind = "markdown"
        sources.append((index, str(kind), joined, _line_map(pieces, reader.lines.get(id(source)))))
    in_file = all(lines is not None for _, _, _, lines in sources)
    if not in_file:
        findings.append(
            Finding(
                "notebook_lines_in_cells",
                "document",
                "cell sources are not one JSON string per line: line numbers are lines "
                "within each cell",
                "info",
            )
        )
    builder = SegmentBuilder()
    headings: list[tuple[int, str]] = []
    for index, kind, source, lines in sources:
        first = lines[0] if in_file and lines else 1
        if kind == "markdown":
            found: list[Finding] = []
            markdown_into(source, builder, headings, found, line_offset=first - 1, cell=index)
            findings.extend(
                Finding(f.code, f"cell {index} {f.subject}", f.message, f.severity) for f in found
            )
        elif kind in ("code", "raw"):
            builder.add("code", source, first, tuple(title for _, title in headings), cell=index)
    return builder.normalized(findings)


def _line_map(pieces: list[str], lines: list[int] | None) -> list[int] | None:
    """The raw line of each source line, when each source line is one JSON string on a raw
    line of its own (as Jupyter writes them); else None."""
    if lines is None or len(lines) != len(pieces):
        return None if pieces else []
    for k, piece in enumerate(pieces):
        body = piece[:-1] if piece.endswith("\n") else piece
        if "\n" in body or "\r" in body or (k < len(pieces) - 1 and not piece.endswith("\n")):
            return None
        if k and lines[k] != lines[k - 1] + 1:
            return None
    return lines


ADAPTER = Adapter(name="notebook", version=1, run=normalize_notebook)
