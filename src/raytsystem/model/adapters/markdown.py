"""Markdown on markdown-it-py: CommonMark plus tables, strikethrough, front matter, footnotes.

Prose loses its markup and keeps what a person reads: `**x**` becomes `x`, a link keeps its
text, an image its alt text, inline code its content (marked `protected` so no sentence ends
inside `config.yaml`), and `[[Name]]` or `[[target|alias]]` its display text (recorded as a link).
Markup that is dropped keeps the newlines it contained, so segment lines still map onto raw
lines. Footnote references are dropped from the text and recorded with their offset: in manual
notes they are citations.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from ..text import Finding
from .base import Adapter, Normalized, SegmentBuilder

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

_WIKI: Final = re.compile(r"\[\[([^\[\]\n|]+?)(?:\|([^\[\]\n]+?))?\]\]")
_CONTAINER_KIND: Final = {
    "list_item_open": "list_item",
    "blockquote_open": "quote",
    "footnote_open": "footnote",
}
_CLOSERS: Final = {"list_item_close", "blockquote_close", "footnote_close"}


# Blocks nested deeper than this are dropped by markdown-it; a finding says so. 100 levels
# parse without approaching Python's recursion limit.
MAX_NESTING: Final = 100


def make_parser() -> MarkdownIt:
    # Imported here: a command that parses nothing (a re-ingest that finds no change) does not
    # pay for importing the parser and compiling its rules.
    from markdown_it import MarkdownIt
    from mdit_py_plugins.footnote import footnote_plugin
    from mdit_py_plugins.front_matter import front_matter_plugin

    md = MarkdownIt("commonmark", {"html": True, "maxNesting": MAX_NESTING})
    md.enable(["table", "strikethrough"])
    md.use(front_matter_plugin)
    # Reference footnotes only: inline `^[...]` notes have no source position and are not
    # part of the citation grammar, so they stay literal text.
    md.use(footnote_plugin, inline=False)
    return md


_parser = functools.cache(make_parser)  # the adapter's one parser, made on first use


class _Inline:
    """Plain text of an inline token, with protected spans, footnote refs and wiki links."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.protected: list[tuple[int, int]] = []
        self.refs: list[tuple[int, str]] = []
        self.links: list[tuple[int, int, str]] = []
        self.only_code = True

    def put(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    def render(self, children: Sequence[Token]) -> None:
        for child in children:
            kind = child.type
            if kind in ("text", "text_special"):
                if child.content.strip():
                    self.only_code = False
                self._text(child.content)
            elif kind in ("softbreak", "hardbreak"):
                self.put("\n")
            elif kind == "code_inline":
                start = self.length
                self.put(child.content)
                self.protected.append((start, self.length))
            elif kind == "image":
                self.only_code = False
                self.render(child.children or ())
            elif kind == "footnote_ref":
                self.refs.append((self.length, str(child.meta.get("label", child.meta.get("id")))))
            elif kind == "html_inline":
                # Tags are markup; only the newlines inside them are kept.
                self.put("\n" * child.content.count("\n"))
            elif child.children:
                self.render(child.children)
            # Other tokens (em/strong/link/s open and close) are pure markup.

    def _text(self, content: str) -> None:
        last = 0
        for m in _WIKI.finditer(content):
            self.put(content[last : m.start()])
            target = m.group(1).strip()
            shown = (m.group(2) or m.group(1)).strip()
            start = self.length
            self.put(shown)
            self.links.append((start, self.length, target))
            last = m.end()
        self.put(content[last:])

    def text(self) -> str:
        return "".join(self.parts)


_CONTAINER_PREFIX: Final = re.compile(r"^[\s>]*")
_WORDS: Final = re.compile(r"[^\W_]+")


def _fence_runs_to_end(token: Token, lines: list[str]) -> bool:
    """A fence that is never closed and swallows the rest of the file.

    (A fence left open inside a list item or quote ends with its container: no harm done.)
    """
    assert token.map is not None
    last = token.map[1] - 1
    total = len(lines) - (1 if lines and lines[-1] == "" else 0)  # as markdown-it counts
    if token.map[1] < total or last <= token.map[0]:
        return False
    closing = _CONTAINER_PREFIX.sub("", lines[last]).strip()
    return not (closing.startswith(token.markup) and set(closing) <= {token.markup[0]})


def restore_newlines(text: str, raw_lines: list[str]) -> str:
    """Put back, as newlines, the line breaks that dropped markup swallowed.

    Link destinations and titles, and code spans (where markdown-it turns a newline into a
    space), can span raw lines without leaving a newline in the rendered text; the segment's
    later words would then map to an earlier raw line. Walk the rendered words through the raw
    lines and turn the spaces before a word that starts a later raw line into newlines (same
    length, so protected spans stay valid). At most the missing number of newlines is added.
    """
    raw_words = [[w.casefold() for w in _WORDS.findall(line)] for line in raw_lines]
    remaining = len(raw_lines) - 1 - text.count("\n")
    out = list(text)
    line, pos, last_end = 0, 0, 0
    for m in _WORDS.finditer(text):
        if remaining <= 0:
            break
        crossed = text.count("\n", last_end, m.start())  # newlines the rendering kept
        if crossed:
            line, pos = line + crossed, 0
        last_end = m.end()
        if line >= len(raw_words):
            break
        word = m.group().casefold()
        if word in raw_words[line][pos:]:
            pos = raw_words[line].index(word, pos) + 1
            continue
        for ahead in range(line + 1, min(len(raw_words), line + 1 + remaining)):
            if word in raw_words[ahead]:
                turned, k = 0, m.start() - 1
                # Past punctuation that opens the word on the raw line too: "(If", "“quote".
                while k >= 0 and not out[k].isspace() and not out[k].isalnum():
                    k -= 1
                while turned < ahead - line and k >= 0 and out[k] == " ":
                    out[k] = "\n"
                    turned += 1
                    k -= 1
                remaining -= turned
                line += turned
                pos = raw_words[line].index(word) + 1 if line == ahead else 0
                break
    return "".join(out)


def normalize_markdown(text: str) -> Normalized:
    builder = SegmentBuilder()
    findings: list[Finding] = []
    front_matter = markdown_into(text, builder, [], findings)
    return Normalized(
        text=builder.text(),
        segments=tuple(builder.segments),
        front_matter=front_matter,
        findings=tuple(findings),
    )


def markdown_into(
    text: str,
    builder: SegmentBuilder,
    headings: list[tuple[int, str]],
    findings: list[Finding],
    *,
    line_offset: int = 0,
    cell: int | None = None,
) -> str | None:
    """Add the segments of Markdown `text` to `builder`; returns its front matter.

    `headings` is the (level, title) stack the text starts under, updated in place (a notebook
    carries it from one Markdown cell to the next); `line_offset` is added to every line
    number and `cell` given to every segment.
    """
    tokens = _parser().parse(text)
    blocks = _Blocks(builder, headings, findings, text.split("\n"), line_offset, cell)
    blocks.walk(tokens)
    if max((t.level for t in tokens), default=0) >= MAX_NESTING - 1:
        findings.append(
            Finding(
                "nesting_too_deep",
                "document",
                f"blocks nested more than {MAX_NESTING - 1} levels deep are dropped",
            )
        )
    return blocks.front_matter


class _Blocks:
    """The segments of one Markdown text, made from its block tokens in one pass: what is
    open around the current block (list items, quotes, a footnote), the heading path, and
    the table row being read."""

    def __init__(
        self,
        builder: SegmentBuilder,
        headings: list[tuple[int, str]],
        findings: list[Finding],
        lines: list[str],
        line_offset: int,
        cell: int | None,
    ) -> None:
        self.builder = builder
        self.headings = headings
        self.findings = findings
        self.lines = lines
        self.line_offset = line_offset
        self.cell = cell
        self.containers: list[str] = []
        self.front_matter: str | None = None
        self.footnote_label: str | None = None
        self.row: list[str] = []
        self.row_line = 0
        self.in_table_head = False

    def add(
        self, kind: str, body: str, line: int, path: tuple[str, ...] = (), **extra: Any
    ) -> None:
        self.builder.add(kind, body, line + self.line_offset, path, cell=self.cell, **extra)

    def path(self) -> tuple[str, ...]:
        return tuple(h for _, h in self.headings)

    def walk(self, tokens: Sequence[Token]) -> None:
        i = 0
        while i < len(tokens):
            token = tokens[i]
            kind = token.type
            if kind in _CONTAINER_KIND:
                self.containers.append(_CONTAINER_KIND[kind])
                if kind == "footnote_open":
                    self.footnote_label = str(token.meta.get("label", token.meta.get("id")))
            elif kind in _CLOSERS:
                self.containers.pop()
                if kind == "footnote_close":
                    self.footnote_label = None
            elif kind == "front_matter":
                assert token.map is not None
                self.front_matter = token.content
                self.add("front_matter", token.content, token.map[0] + 2)
            elif kind == "heading_open":
                self.heading(token, tokens[i + 1])
                i += 2
            elif kind == "paragraph_open":
                self.paragraph(token, tokens[i + 1])
                i += 2
            elif kind in ("fence", "code_block"):
                self.code(token)
            elif kind == "html_block":
                assert token.map is not None
                stripped = re.sub(
                    r"<[^>]*>", lambda m: "\n" * m.group(0).count("\n"), token.content
                )
                self.add("html", stripped.rstrip("\n"), token.map[0] + 1, self.path())
            elif kind in ("thead_open", "thead_close"):
                self.in_table_head = kind == "thead_open"
            elif kind == "tr_open":
                self.row = []
                self.row_line = (token.map[0] + 1) if token.map else 0
            elif kind == "inline" and tokens[i - 1].type in ("th_open", "td_open"):
                rendered = _Inline()
                rendered.render(token.children or ())
                self.row.append(" ".join(rendered.text().split()))
            elif kind == "tr_close":
                self.table_row()
            i += 1

    def heading(self, token: Token, inline: Token) -> None:
        level = int(token.tag[1:])
        rendered = _Inline()
        rendered.render(inline.children or ())
        assert token.map is not None
        headings = self.headings
        while headings and headings[-1][0] >= level:
            headings.pop()  # a heading's path is its ancestors, not its siblings
        self.add("heading", rendered.text(), token.map[0] + 1, self.path())
        title = " ".join(rendered.text().split())
        if title:
            headings.append((level, title))

    def paragraph(self, token: Token, inline: Token) -> None:
        """A paragraph, of a list item, a quote or a footnote when one is open around it."""
        rendered = _Inline()
        rendered.render(inline.children or ())
        assert token.map is not None
        body = rendered.text()
        raw_span = self.lines[token.map[0] : token.map[1]]
        if body.count("\n") < len(raw_span) - 1:
            body = restore_newlines(body, raw_span)
        in_footnote = "footnote" in self.containers
        seg_kind = self.containers[-1] if self.containers else "paragraph"
        if rendered.only_code and rendered.protected:
            seg_kind = "code"
        self.add(
            seg_kind,
            body,
            token.map[0] + 1,
            () if in_footnote else self.path(),
            protected=tuple(rendered.protected),
            refs=tuple(rendered.refs),
            links=tuple(rendered.links),
            label=self.footnote_label if in_footnote else None,
        )

    def code(self, token: Token) -> None:
        """A fenced or indented code block; a fence never closed gets a finding."""
        assert token.map is not None
        kind = token.type
        first = token.map[0] + (1 if kind == "fence" else 0)
        if kind == "fence" and _fence_runs_to_end(token, self.lines):
            self.findings.append(
                Finding(
                    "unclosed_code_fence",
                    f"line {token.map[0] + 1 + self.line_offset}",
                    "a code fence is never closed: the rest of the file is code, not claims",
                )
            )
        self.add("code", token.content.rstrip("\n"), first + 1, self.path())

    def table_row(self) -> None:
        text_row = " | ".join(self.row)
        if text_row.replace("|", "").strip():
            kind = "table_header" if self.in_table_head else "table_row"
            self.add(kind, text_row, self.row_line, self.path())


ADAPTER = Adapter(name="markdown", version=1, run=normalize_markdown)
