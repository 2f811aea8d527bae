"""The adapter contract: what an adapter returns and the helper that builds it.

An adapter is a plain function `(text) -> Normalized` registered by media type, with a name and
a version that go into the Normalization ID (with a hash of its config). Bump the version when
the output for some input changes: the next ingest then makes new normalizations beside the old
ones, never over them.

The normalized text is the segments' texts joined by blank lines, so every segment span is a
slice of it and every newline inside a segment stands for a newline of the raw file: a segment
that starts on raw line L has its k-th line on raw line L + k. Line numbers are 1-based.

This module imports nothing from the adapters themselves, so each adapter module imports its
contract from here and the package's registry (`__init__`) imports the adapters.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from ...canonical import digest
from ..text import Finding

# Segment kinds whose sentences become claims; the others are context or searchable only.
PROSE_KINDS: Final = frozenset({"paragraph", "list_item", "quote", "table_row", "footnote"})
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


@dataclass(frozen=True)
class Normalized:
    text: str
    segments: tuple[SegmentDraft, ...]
    front_matter: str | None = None
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class Adapter:
    name: str
    version: int
    run: Callable[[str], Normalized]
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    @functools.cached_property
    def config_hash(self) -> str:
        return digest({"adapter": self.name, "config": self.config}, length=32)


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
    ) -> None:
        # Trim the segment without breaking the line mapping or the relative offsets.
        body = text.strip()
        if not body:
            return
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
            )
        )

    def text(self) -> str:
        return "".join(self._parts)


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


def media_type_for(path: str) -> str:
    """Media type by file name; everything that decodes as text and is not Markdown is plain."""
    suffix = posixpath.splitext(path)[1].lower()
    return "text/markdown" if suffix in MARKDOWN_SUFFIXES else "text/plain"
