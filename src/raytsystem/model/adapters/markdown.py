"""Markdown on markdown-it-py: CommonMark plus tables, strikethrough, front matter, footnotes.

Prose loses its markup and keeps what a person reads: `**x**` becomes `x`, a link keeps its
text, an image its alt text, inline code its content (marked `protected` so no sentence ends
inside `config.yaml`), and `[[Name]]` or `[[target|alias]]` its display text (recorded as a link).
Markup that is dropped keeps the newlines it contained, so segment lines still map onto raw
lines. Footnote references are dropped from the text and recorded with their offset: in manual
notes they are citations.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin

from ..text import Finding
from . import Adapter, Normalized, SegmentBuilder

_WIKI: Final = re.compile(r"\[\[([^\[\]\n|]+?)(?:\|([^\[\]\n]+?))?\]\]")
_CONTAINER_KIND: Final = {
    "list_item_open": "list_item",
    "blockquote_open": "quote",
    "footnote_open": "footnote",
}
_CLOSERS: Final = {"list_item_close", "blockquote_close", "footnote_close"}


def make_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True})
    md.enable(["table", "strikethrough"])
    md.use(front_matter_plugin)
    md.use(footnote_plugin)
    return md


_PARSER: Final = make_parser()


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


def _fence_closed(token: Token, lines: list[str]) -> bool:
    assert token.map is not None
    last = token.map[1] - 1
    if last <= token.map[0] or last >= len(lines):
        return False
    closing = lines[last].strip()
    return closing.startswith(token.markup) and set(closing) <= {token.markup[0]}


def normalize_markdown(text: str) -> Normalized:
    tokens = _PARSER.parse(text)
    lines = text.split("\n")
    builder = SegmentBuilder()
    findings: list[Finding] = []
    headings: list[tuple[int, str]] = []  # (level, text)
    containers: list[str] = []
    front_matter: str | None = None
    footnote_label: str | None = None
    row: list[str] = []
    row_line = 0
    in_table_head = False

    def path() -> tuple[str, ...]:
        return tuple(h for _, h in headings)

    i = 0
    while i < len(tokens):
        token = tokens[i]
        kind = token.type
        if kind in _CONTAINER_KIND:
            containers.append(_CONTAINER_KIND[kind])
            if kind == "footnote_open":
                footnote_label = str(token.meta.get("label", token.meta.get("id")))
        elif kind in _CLOSERS:
            containers.pop()
            if kind == "footnote_close":
                footnote_label = None
        elif kind == "front_matter":
            assert token.map is not None
            front_matter = token.content
            builder.add("front_matter", token.content, token.map[0] + 2)
        elif kind == "heading_open":
            inline = tokens[i + 1]
            level = int(token.tag[1:])
            rendered = _Inline()
            rendered.render(inline.children or ())
            assert token.map is not None
            builder.add("heading", rendered.text(), token.map[0] + 1, path())
            while headings and headings[-1][0] >= level:
                headings.pop()
            title = " ".join(rendered.text().split())
            if title:
                headings.append((level, title))
            i += 2
        elif kind == "paragraph_open":
            inline = tokens[i + 1]
            rendered = _Inline()
            rendered.render(inline.children or ())
            assert token.map is not None
            in_footnote = "footnote" in containers
            seg_kind = containers[-1] if containers else "paragraph"
            if rendered.only_code and rendered.protected:
                seg_kind = "code"
            builder.add(
                seg_kind,
                rendered.text(),
                token.map[0] + 1,
                () if in_footnote else path(),
                protected=tuple(rendered.protected),
                refs=tuple(rendered.refs),
                links=tuple(rendered.links),
                label=footnote_label if in_footnote else None,
            )
            i += 2
        elif kind in ("fence", "code_block"):
            assert token.map is not None
            first = token.map[0] + (1 if kind == "fence" else 0)
            if kind == "fence" and not _fence_closed(token, lines):
                findings.append(
                    Finding(
                        "unclosed_code_fence",
                        f"line {token.map[0] + 1}",
                        "a code fence is never closed: the rest of the file is code, not claims",
                    )
                )
            builder.add("code", token.content.rstrip("\n"), first + 1, path())
        elif kind == "html_block":
            assert token.map is not None
            stripped = re.sub(r"<[^>]*>", lambda m: "\n" * m.group(0).count("\n"), token.content)
            builder.add("html", stripped.rstrip("\n"), token.map[0] + 1, path())
        elif kind == "thead_open":
            in_table_head = True
        elif kind == "thead_close":
            in_table_head = False
        elif kind == "tr_open":
            row = []
            row_line = (token.map[0] + 1) if token.map else 0
        elif kind == "inline" and tokens[i - 1].type in ("th_open", "td_open"):
            rendered = _Inline()
            rendered.render(token.children or ())
            row.append(" ".join(rendered.text().split()))
        elif kind == "tr_close":
            text_row = " | ".join(row)
            if text_row.replace("|", "").strip():
                builder.add(
                    "table_header" if in_table_head else "table_row", text_row, row_line, path()
                )
        i += 1
    return Normalized(
        text=builder.text(),
        segments=tuple(builder.segments),
        front_matter=front_matter,
        findings=tuple(findings),
    )


ADAPTER = Adapter(name="markdown", version=1, run=normalize_markdown)
