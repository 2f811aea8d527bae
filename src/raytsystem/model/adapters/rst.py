"""reStructuredText on docutils: sections, paragraphs, lists, tables, literal blocks, directives.

The document is parsed by docutils' own reStructuredText parser with everything that could
reach outside the text turned off (no `include`, no `raw`, no configuration files) and its
reports silenced. Sections give the heading path; paragraphs, list items, block quotes, table
rows, footnotes and the prose inside admonitions (`note`, `warning`, ...) are prose; literal
and doctest blocks are code; definition terms, field names, rubrics and the titles of topics
and admonitions are heading segments that do not enter the path. Inline literals are protected.

Directives docutils does not know (Sphinx's) are not errors (the parser of `rst_sphinx.py`):
those named in the config's `object_directives` (Sphinx's object descriptions such as
`function` or `py:class`) hold prose under their signature (a heading segment), those in
`prose_directives` (`versionchanged`, `seealso`, ...) hold prose after their first argument
line; any other unknown directive (`toctree`, `testcode`, ...) keeps its content as code:
searchable, never a claim. An unknown interpreted-text role (`:func:`x``) shows its text as
Sphinx would (`title <target>` shows the title) as a protected span.

Lines: docutils' line numbers are not uniform across node types, so each segment is placed on
the raw line, near the one docutils gives, that holds its first words; its later lines follow
the raw lines (newlines lost with dropped markup are put back as the Markdown adapter does).
"""

from __future__ import annotations

import io
import re
import warnings
from typing import TYPE_CHECKING, Any, Final

from ..text import Finding
from .base import Adapter, AdapterRefused, Normalized, SegmentBuilder
from .markdown import restore_newlines
from .rst_sphinx import OBJECT_DIRECTIVES, PROSE_DIRECTIVES, parser_class

if TYPE_CHECKING:
    from docutils import nodes

LINE_LENGTH_LIMIT: Final = 10_000  # docutils' default: a longer line stops its parser
_WORD: Final = re.compile(r"[^\W_]{2,}")
_SETTINGS: Final = {
    "_disable_config": True,
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "report_level": 5,
    "halt_level": 5,
    "warning_stream": None,  # set per call
    "traceback": True,  # an exception reaches us instead of ending in sys.exit
    "doctitle_xform": False,
    "docinfo_xform": False,
    "sectsubtitle_xform": False,
    "syntax_highlight": "none",
    "smart_quotes": False,
    "trim_footnote_reference_space": True,
    "line_length_limit": LINE_LENGTH_LIMIT,
    "input_encoding": "unicode",
}


class _Walker:
    def __init__(self, builder: SegmentBuilder, raw_lines: list[str]) -> None:
        from docutils import nodes

        self.nodes = nodes
        self.builder = builder
        self.raw = raw_lines
        self.path: list[str] = []
        self.last_line = 1

    # --- lines -------------------------------------------------------------------------------

    def locate(self, node: nodes.Node, body: str) -> int:
        """The raw line of `body`'s first line: near the line docutils gives (which is not
        uniform across node types), the one that holds that line as written, else its words;
        else the first such line after the previous segment."""
        lines = [line.strip() for line in body.split("\n", 4)[:4]]
        first = lines[0]
        words = [w.casefold() for w in _WORD.findall(first)]
        hint = node.line
        parent = node.parent
        while hint is None and parent is not None:
            hint, parent = parent.line, parent.parent
        hint = hint or self.last_line
        raw = self.raw

        def exact(n: int) -> bool:  # its first lines as written (a literal block's)
            return bool(first) and all(
                n + k <= len(raw) and line in raw[n - 1 + k] for k, line in enumerate(lines)
            )

        def similar(n: int) -> bool:
            folded = raw[n - 1].casefold()
            return bool(words) and all(w in folded for w in words)

        near = [
            hint + d
            for d in (0, -1, 1, -2, 2, -3, 3, -4, 4, -5, 5)
            if self.last_line <= hint + d <= len(raw)
        ]
        # docutils' line can be past the node (a code-block's), rarely before it.
        between = range(self.last_line, min(max(hint + 6, self.last_line + 60), len(raw) + 1))
        after = range(self.last_line, len(raw) + 1)
        for candidates, test in (
            (near, exact),
            (between, exact),
            (near, similar),
            (after, similar),
        ):
            for n in candidates:
                if test(n):
                    return n
        return max(min(hint, len(raw)), 1)

    def add(
        self,
        kind: str,
        node: nodes.Node,
        body: str,
        protected: tuple[tuple[int, int], ...] = (),
        label: str | None = None,
        line: int | None = None,
    ) -> None:
        stripped = body.strip()
        if not stripped:
            return
        lead = body[: len(body) - len(body.lstrip())]
        if lead.count("\n"):  # place the first line that has text
            protected = tuple((s - len(lead), e - len(lead)) for s, e in protected)
            body = body[len(lead) :]
        start = line if line is not None else self.locate(node, body)
        raw_span = self.raw[start - 1 : start + str(getattr(node, "rawsource", "")).count("\n")]
        if kind != "code" and body.count("\n") < len(raw_span) - 1:
            body = restore_newlines(body, raw_span)
        seg = self.builder.add(
            kind, body, start, tuple(self.path), protected=protected, label=label
        )
        if seg is not None:
            self.last_line = seg.line_start

    # --- inline ------------------------------------------------------------------------------

    def inline(self, node: nodes.Node) -> tuple[str, tuple[tuple[int, int], ...]]:
        nodes = self.nodes
        parts: list[str] = []
        protected: list[tuple[int, int]] = []
        size = 0

        def put(text: str) -> None:
            nonlocal size
            parts.append(text)
            size += len(text)

        def walk(n: Any) -> None:
            for child in n.children:
                if isinstance(child, nodes.Text):
                    put(child.astext())
                    continue
                if isinstance(child, nodes.target) and not child.astext():
                    continue  # the target of `text <url>`_: its reference has the text
                if isinstance(
                    child,
                    nodes.footnote_reference
                    | nodes.citation_reference
                    | nodes.raw
                    | nodes.generated  # section numbers added by `sectnum`
                    | nodes.system_message,
                ):
                    text = ""
                elif isinstance(child, nodes.literal | nodes.math):
                    text = child.astext()
                    protected.append((size, size + len(text)))
                    put(text)
                elif isinstance(child, nodes.image):
                    text = str(child.get("alt", ""))
                    put(text)
                else:
                    before = size
                    walk(child)
                    text = "".join(parts)[before:] if child.rawsource.count("\n") else ""
                # Markup written over several lines (`text\n<url>`_) keeps its line count.
                missing = child.rawsource.count("\n") - text.count("\n")
                if missing > 0:
                    put("\n" * missing)

        walk(node)
        return "".join(parts), tuple(protected)

    # --- blocks ------------------------------------------------------------------------------

    def children(self, node: nodes.Node, kind: str, label: str | None = None) -> None:
        for child in node.children:
            self.visit(child, kind, label)

    def visit(self, node: nodes.Node, kind: str, label: str | None = None) -> None:
        n = self.nodes
        if isinstance(
            node,
            n.system_message
            | n.comment
            | n.substitution_definition
            | n.target
            | n.raw
            | n.pending
            | n.transition
            | n.image
            | n.decoration
            | n.Text,
        ):
            return
        if isinstance(node, n.topic) and "contents" in node["classes"]:
            return  # a table of contents made by docutils, not text of the file
        if isinstance(node, n.section):
            titles = [c for c in node.children if isinstance(c, n.title)]
            title = " ".join(self.inline(titles[0])[0].split()) if titles else ""
            if titles:
                self.heading(titles[0])
            if title:
                self.path.append(title)
            for child in node.children:
                if not isinstance(child, n.title):
                    self.visit(child, "paragraph")
            if title:
                self.path.pop()
        elif isinstance(
            node,
            n.title | n.subtitle | n.rubric | n.term | n.field_name | n.classifier,
        ):
            self.heading(node)
        elif isinstance(node, n.paragraph | n.attribution | n.caption):
            body, protected = self.inline(node)
            seg_kind = kind
            if protected and not _WORD.search(_outside(body, protected)):
                seg_kind = "code"
            self.add(seg_kind, node, body, protected, label=label if kind == "footnote" else None)
        elif isinstance(node, n.literal_block | n.doctest_block | n.math_block):
            self.add("code", node, node.astext())
        elif isinstance(node, n.line_block):
            self.line_block(node, kind)
        elif isinstance(node, n.bullet_list | n.enumerated_list):
            self.children(node, "list_item")
        elif isinstance(node, n.block_quote):
            self.children(node, "quote")
        elif isinstance(node, n.option_list_item):
            for child in node.children:
                if isinstance(child, n.option_group):
                    self.add("code", child, child.astext())
                else:
                    self.visit(child, "list_item")
        elif isinstance(node, n.table):
            self.table(node)
        elif isinstance(node, n.footnote | n.citation):
            labels = [c for c in node.children if isinstance(c, n.label)]
            name = labels[0].astext() if labels else None
            for child in node.children:
                if not isinstance(child, n.label):
                    self.visit(child, "footnote", name)
        elif isinstance(node, n.definition | n.field_body | n.description):
            self.children(node, "paragraph" if kind != "footnote" else kind, label)
        else:
            self.children(node, kind, label)

    def heading(self, node: nodes.Node) -> None:
        body, protected = self.inline(node)
        self.add("heading", node, body, protected)

    def line_block(self, node: nodes.Node, kind: str) -> None:
        lines = [c for c in node.findall(self.nodes.line) if not c.children or c.astext()]
        for line in lines:
            body, protected = self.inline(line)
            self.add(kind, line, body, protected)

    def table(self, table: nodes.Node) -> None:
        n = self.nodes
        for title in (c for c in table.children if isinstance(c, n.title)):
            self.heading(title)
        for part in table.findall(n.thead):
            for row in part.children:
                self.row(row, "table_header")
        for part in table.findall(n.tbody):
            for row in part.children:
                self.row(row, "table_row")

    def row(self, row: nodes.Node, kind: str) -> None:
        """A table row: the cells' lines joined raw line by raw line, so that a cell written
        over several lines of a grid table keeps each of its lines on its own raw line."""
        by_line: dict[int, list[str]] = {}
        n = self.nodes
        for entry in row.children:
            for cell_block in entry.children:
                if isinstance(cell_block, n.system_message | n.comment):
                    continue
                # Each paragraph (of a list or a directive in the cell, too) on its own lines.
                leaves = (
                    [cell_block]
                    if isinstance(cell_block, n.TextElement)
                    else [
                        x
                        for x in cell_block.findall(n.TextElement)
                        if not isinstance(x.parent, n.TextElement)
                        and not isinstance(x, n.system_message | n.comment | n.label)
                    ]
                )
                for block in leaves:
                    if isinstance(block, n.literal_block | n.doctest_block):
                        body = block.astext()
                    else:
                        body, _ = self.inline(block)
                    body = body.strip()
                    if not body:
                        continue
                    first = self.locate(block, body)
                    for k, text in enumerate(body.split("\n")):
                        if text.strip():
                            by_line.setdefault(first + k, []).append(text.strip())
        if not by_line:
            return
        top, bottom = min(by_line), max(by_line)
        text = "\n".join(" | ".join(by_line.get(line, [])) for line in range(top, bottom + 1))
        self.add(kind, row, text, line=top)


def _outside(body: str, protected: tuple[tuple[int, int], ...]) -> str:
    out, last = [], 0
    for s, e in protected:
        out.append(body[last:s])
        last = e
    out.append(body[last:])
    return "".join(out)


def normalize_rst(text: str) -> Normalized:
    from docutils.core import publish_doctree

    raw_lines = text.split("\n")
    for number, line in enumerate(raw_lines, start=1):
        if len(line) > LINE_LENGTH_LIMIT:
            raise AdapterRefused(
                "rst_unreadable",
                f"line {number} is longer than {LINE_LENGTH_LIMIT} characters (docutils' limit)",
            )
    builder = SegmentBuilder()
    findings: list[Finding] = []
    settings = dict(_SETTINGS, warning_stream=io.StringIO())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            document = publish_doctree(text, parser=parser_class()(), settings_overrides=settings)
        _Walker(builder, raw_lines).children(document, "paragraph")
    except RecursionError:
        raise AdapterRefused("rst_unreadable", "blocks nested too deep to read") from None
    return builder.normalized(findings)


ADAPTER = Adapter(
    name="rst",
    version=1,
    run=normalize_rst,
    config={
        "parser": "docutils",
        "object_directives": list(OBJECT_DIRECTIVES),
        "prose_directives": list(PROSE_DIRECTIVES),
    },
)
