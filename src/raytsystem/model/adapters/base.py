"""The adapter contract: what an adapter returns and the helper that builds it.

An adapter is a plain function `(text) -> Normalized` registered by media type, with a name and
a version that go into the Normalization ID (with a hash of its config). Bump the version when
the output for some input changes: the next ingest then makes new normalizations beside the old
ones, never over them. An adapter whose format is not text (PDF) reads the file's bytes instead
(`Adapter.reads == "bytes"`); `Adapter.normalize(data)` is the one entry point for both.

The normalized text is the segments' texts joined by blank lines, so every segment span is a
slice of it and every newline inside a segment stands for a newline of the raw file: a segment
that starts on raw line L has its k-th line on raw line L + k. Line numbers are 1-based. Where a
format has pages (PDF) a segment also names its page, and its lines are lines of that page's
extracted text; a notebook's segments name their cell (see each adapter's docstring).

An adapter that cannot make anything meaningful of a file raises `AdapterRefused` with a finding
code (`pdf_no_text`, `pdf_encrypted`, ...); where a partial result still means something (the
comments of a Python file that does not parse) it returns it, with a finding that says what is
missing.

This module imports nothing from the adapters themselves, so each adapter module imports its
contract from here and the package's registry (`__init__`) imports the adapters.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

from ...canonical import digest
from ..text import Finding, decode

# Segment kinds whose sentences become claims; the others are context or searchable only.
# `docstring` and `comment` are the prose of source code.
PROSE_KINDS: Final = frozenset(
    {"paragraph", "list_item", "quote", "table_row", "footnote", "docstring", "comment"}
)
SEGMENT_KINDS: Final = PROSE_KINDS | {"heading", "code", "table_header", "front_matter", "html"}


class SegmentDraft(NamedTuple):
    """One segment as an adapter found it (a tuple: an adapter makes dozens per file)."""

    kind: str
    heading_path: tuple[str, ...]
    start: int
    end: int
    line_start: int
    line_end: int
    # Offsets relative to the segment start.
    protected: tuple[tuple[int, int], ...] = ()
    refs: tuple[tuple[int, str], ...] = ()  # footnote references: (offset, label)
    links: tuple[tuple[int, int, str], ...] = ()  # [[wiki links]]: (start, end, target)
    label: str | None = None  # the label of a footnote definition
    page: int | None = None  # 1-based page of a paged format (PDF); lines are that page's
    cell: int | None = None  # 0-based cell index in a notebook


class Symbol(NamedTuple):
    """A symbol defined in a source file: a class, function, method, variable, type...

    `name` is qualified within the file (`RetryPolicy.max_attempts`), as a citation names it
    after the path (`src/payments.py::RetryPolicy.max_attempts`); `start`/`end` is the span of
    its definition in the normalized text (from its first segment to its last, so it holds its
    docstring and body), `line_start`/`line_end` its raw lines.
    """

    name: str
    kind: str
    start: int
    end: int
    line_start: int
    line_end: int


@dataclass(frozen=True)
class Normalized:
    text: str
    segments: tuple[SegmentDraft, ...]
    front_matter: str | None = None
    findings: tuple[Finding, ...] = ()
    symbols: tuple[Symbol, ...] = ()  # source code only, in order of definition


class AdapterRefused(Exception):
    """The adapter can make nothing meaningful of the file; `code` is the finding code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


Reads = Literal["text", "bytes"]


@dataclass(frozen=True)
class Adapter:
    name: str
    version: int
    # `(str) -> Normalized` on the decoded text, or `(bytes) -> Normalized` when reads == "bytes"
    run: Callable[[Any], Normalized]
    config: dict[str, Any] = field(default_factory=dict)
    reads: Reads = "text"

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    @functools.cached_property
    def config_hash(self) -> str:
        return digest({"adapter": self.name, "config": self.config}, length=32)

    def normalize(self, data: bytes) -> Normalized:
        """The adapter on a file's bytes: decoded first (raising `NotText`) if it reads text.

        Raises `AdapterRefused` for a file it refuses; any other exception is a bug of the
        adapter on that input.
        """
        return self.run(data if self.reads == "bytes" else decode(data))


class SegmentBuilder:
    """Accumulates segment texts into one normalized text with exact spans."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self.segments: list[SegmentDraft] = []

    def add(
        self,
        kind: str,
        text: str,
        line_start: int,
        heading_path: tuple[str, ...] = (),
        *,
        protected: tuple[tuple[int, int], ...] = (),
        refs: tuple[tuple[int, str], ...] = (),
        links: tuple[tuple[int, int, str], ...] = (),
        label: str | None = None,
        page: int | None = None,
        cell: int | None = None,
    ) -> SegmentDraft | None:
        """Add a segment (trimmed); returns it, or None when it is only whitespace."""
        # Trim the segment without breaking the line mapping or the relative offsets.
        body = text.strip()
        if not body:
            return None
        if body is not text:  # str.strip returns the string itself when there is nothing to trim
            lead = len(text) - len(text.lstrip())
            line_start += text[:lead].count("\n")
        else:
            lead = 0
        if protected or refs or links:
            protected, refs, links = _shifted(protected, refs, links, lead, len(body))
        if self._parts:
            self._parts.append("\n\n")
            self._length += 2
        start = self._length
        self._parts.append(body)
        self._length += len(body)
        self.segments.append(
            SegmentDraft(
                kind=kind,
                heading_path=heading_path,
                start=start,
                end=self._length,
                line_start=line_start,
                line_end=line_start + body.count("\n"),
                protected=protected,
                refs=refs,
                links=links,
                label=label,
                page=page,
                cell=cell,
            )
        )
        return self.segments[-1]

    def text(self) -> str:
        return "".join(self._parts)

    def normalized(
        self, findings: Sequence[Finding] = (), symbols: Sequence[Symbol] = ()
    ) -> Normalized:
        return Normalized(
            text=self.text(),
            segments=tuple(self.segments),
            findings=tuple(findings),
            symbols=tuple(symbols),
        )


def _shifted(
    protected: tuple[tuple[int, int], ...],
    refs: tuple[tuple[int, str], ...],
    links: tuple[tuple[int, int, str], ...],
    lead: int,
    length: int,
) -> tuple[
    tuple[tuple[int, int], ...], tuple[tuple[int, str], ...], tuple[tuple[int, int, str], ...]
]:
    """Offsets relative to a segment's text, moved to its trimmed body (`lead` characters
    off the front, `length` long); spans that fall outside it are dropped."""

    def shift(span: tuple[int, int]) -> tuple[int, int] | None:
        s, e = max(span[0] - lead, 0), min(span[1] - lead, length)
        return (s, e) if s < e else None

    return (
        tuple(p for p in (shift(s) for s in protected) if p),
        tuple((min(max(o - lead, 0), length), lab) for o, lab in refs),
        tuple((s - lead, e - lead, t) for s, e, t in links if lead <= s and e - lead <= length),
    )


MARKDOWN_SUFFIXES: Final = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mdx"})

# The media type of each file suffix an adapter reads; any other file is plain text.
MEDIA_TYPES: Final[dict[str, str]] = {
    **dict.fromkeys(MARKDOWN_SUFFIXES, "text/markdown"),
    **dict.fromkeys((".html", ".htm", ".xhtml"), "text/html"),
    **dict.fromkeys((".rst", ".rest"), "text/x-rst"),
    ".pdf": "application/pdf",
    ".ipynb": "application/x-ipynb+json",
    **dict.fromkeys((".py", ".pyi"), "text/x-python"),
    **dict.fromkeys((".js", ".mjs", ".cjs", ".jsx"), "text/javascript"),
    **dict.fromkeys((".ts", ".mts", ".cts"), "text/x-typescript"),
    ".tsx": "text/x-tsx",
    ".go": "text/x-go",
    ".rs": "text/x-rust",
}


def names_a_format(path: str) -> bool:
    """Whether the file name says what the file is (`MEDIA_TYPES`, or `.txt`); any other file
    is read as plain text only in case it is."""
    suffix = posixpath.splitext(path)[1].lower()
    return suffix in MEDIA_TYPES or suffix == ".txt"


def media_type_for(path: str) -> str:
    """Media type by file name (`MEDIA_TYPES`); anything else is plain text. Sphinx copies a
    page's reStructuredText source as `name.rst.txt`: that is reStructuredText too."""
    if path.lower().endswith(".rst.txt"):
        return MEDIA_TYPES[".rst"]
    return MEDIA_TYPES.get(posixpath.splitext(path)[1].lower(), "text/plain")
