"""HTML (built documentation: Sphinx, MkDocs, rustdoc; saved pages) on lxml's HTML parser.

Only the main content is read: the first element with `role="main"`, else `<main>`, else
`<article>`, else `<body>`; inside it navigation, sidebars, footers, scripts, styles, forms and
hidden elements are dropped (outside `<main>`-like roots, page headers too). Headings `h1`-`h6`
give the heading path; `pre` is code; `p`, `li`, `blockquote`, table rows and the text directly
inside other blocks are prose; a definition term (`dt`, such as an API signature) is a heading
segment that does not enter the path. Inline `code`, `kbd`, `samp`, `tt` and `var` are protected
spans; a fragment link whose text has no letter or digit (a permalink `¶`, a back-reference `↩`)
is decoration and dropped.

Lines: every text node keeps its newlines, and at each element the line count is moved up to
the line libxml2 reports for it (where its start tag ends), so the newlines that markup swallows
(a start tag written over several lines, a dropped element) are put back: segment line k is raw
line `line_start + k`. libxml2's HTML parser counts lines up to 65,535; past that, lines are
counted from the text alone. Horizontal whitespace is collapsed and lines are trimmed, as a
browser shows them; code keeps its text as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from ..text import Finding
from .base import Adapter, AdapterRefused, Normalized, SegmentBuilder

if TYPE_CHECKING:
    from lxml.html import HtmlElement

HEADINGS: Final = {f"h{n}": n for n in range(1, 7)}
# Never content, wherever they are.
_DROPPED: Final = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "nav",
        "aside",
        "footer",
        "form",
        "button",
        "select",
        "textarea",
        "input",
        "label",
        "svg",
        "math",
        "iframe",
        "object",
        "embed",
        "canvas",
        "audio",
        "video",
        "map",
        "head",
        "title",
        "meta",
        "link",
        "dialog",
    }
)
_DROPPED_ROLES: Final = frozenset(
    {"navigation", "search", "banner", "contentinfo", "complementary", "menu", "menubar"}
)
_BLOCKS: Final = frozenset(
    {
        "html",
        "body",
        "main",
        "article",
        "section",
        "div",
        "header",
        "address",
        "blockquote",
        "center",
        "details",
        "summary",
        "dir",
        "menu",
        "dl",
        "dt",
        "dd",
        "fieldset",
        "legend",
        "figure",
        "figcaption",
        "hgroup",
        "hr",
        "li",
        "ol",
        "ul",
        "p",
        "pre",
        "table",
        "caption",
        "thead",
        "tbody",
        "tfoot",
        "tr",
        "td",
        "th",
        "colgroup",
        "col",
        *HEADINGS,
    }
)
_CODE_INLINE: Final = frozenset({"code", "kbd", "samp", "tt", "var"})
_CONTAINER_KIND: Final = {"li": "list_item", "blockquote": "quote"}
_HAS_WORD: Final = re.compile(r"[^\W_]")
_BLANK_LINES: Final = re.compile(r"\n(?:[ \t]*\n)+")
_TERMINATORS: Final = frozenset(".!?:;。！？")
# libxml2's HTML parser stores line numbers in 16 bits: this one means "this line or later".
_LINE_CAP: Final = 65535


class _Run:
    """The text of one segment being gathered, with its protected spans."""

    __slots__ = ("kind", "line", "parts", "protected", "size", "words")

    def __init__(self, kind: str, line: int) -> None:
        self.kind = kind
        self.line = line  # raw line of its first character
        self.parts: list[str] = []
        self.protected: list[tuple[int, int]] = []
        self.size = 0
        self.words = False  # has a letter or digit outside protected spans

    def put(self, text: str, protected: bool = False) -> None:
        if protected:
            self.protected.append((self.size, self.size + len(text)))
        elif not self.words and _HAS_WORD.search(text):
            self.words = True
        self.parts.append(text)
        self.size += len(text)


def _tidy(text: str, protected: Iterable[tuple[int, int]]) -> tuple[str, list[tuple[int, int]]]:
    """Collapse horizontal whitespace and trim every line, keeping the newlines (and so the
    line mapping); protected spans are moved with the text."""
    out: list[str] = []
    where = [0] * (len(text) + 1)
    pending = False
    line_has_text = False
    for i, ch in enumerate(text):
        if ch == "\n":
            where[i] = len(out)
            out.append("\n")
            pending = line_has_text = False
        elif ch in " \t\r\f\v":
            where[i] = len(out)
            pending = line_has_text
        else:
            if pending:
                out.append(" ")
                pending = False
            where[i] = len(out)
            out.append(ch)
            line_has_text = True
    where[len(text)] = len(out)
    spans = [(where[s], where[e]) for s, e in protected]
    return "".join(out), [(s, e) for s, e in spans if s < e]


class _Walker:
    def __init__(self, builder: SegmentBuilder, inside_main: bool) -> None:
        self.builder = builder
        self.line = 1
        self.headings: list[tuple[int, str]] = []
        self.run: _Run | None = None
        self.inside_main = inside_main  # a <header> there is the content's own

    # --- lines -------------------------------------------------------------------------------

    def sync(self, el: HtmlElement) -> None:
        """Move the line count up to the line libxml2 gives `el` (newlines inside markup)."""
        line = el.sourceline
        if line is not None and self.line < line < _LINE_CAP:
            if self.run is not None:
                self.run.put("\n" * (line - self.line))
            self.line = line

    def text(self, text: str | None, protected: bool = False) -> None:
        """Text that belongs to the current run (or to none: it only moves the line count)."""
        if not text:
            return
        if self.run is not None:
            self.run.put(text, protected)
        self.line += text.count("\n")

    def consume(self, el: HtmlElement) -> None:
        """Skip `el` and everything inside it, counting its lines."""
        run, self.run = self.run, None
        self.sync(el)
        self.text(el.text)
        for child in el:
            self.consume(child)
            self.text(child.tail)
        self.run = run

    # --- segments ----------------------------------------------------------------------------

    def path(self) -> tuple[str, ...]:
        return tuple(title for _, title in self.headings)

    def start(self, kind: str) -> None:
        if self.run is None:
            self.run = _Run(kind, self.line)

    def flush(self) -> str:
        """End the current run as a segment; returns its text."""
        run, self.run = self.run, None
        if run is None:
            return ""
        raw = "".join(run.parts)
        if run.kind == "code":
            body, protected = raw, list[tuple[int, int]]()
        else:
            body, protected = _tidy(raw, run.protected)
        kind = run.kind
        if kind != "code":
            protected = _glue_blank_lines(body, protected)
        if kind not in ("code", "heading") and not run.words:
            if not run.protected:
                return ""  # no letter or digit: punctuation left by dropped markup
            kind = "code"  # only inline code
        self.builder.add(kind, body, run.line, self.path(), protected=tuple(protected))
        return body

    # --- the tree ----------------------------------------------------------------------------

    def dropped(self, el: HtmlElement) -> bool:
        tag = el.tag
        if not isinstance(tag, str):  # comments, processing instructions
            return True
        tag = tag.lower()
        if tag in _DROPPED or (tag == "header" and not self.inside_main):
            return True
        attrib = el.attrib
        if "hidden" in attrib or attrib.get("aria-hidden") == "true":
            return True
        if (attrib.get("role") or "").lower() in _DROPPED_ROLES:
            return True
        return tag == "a" and _is_decoration(el)

    def block(self, el: HtmlElement, kind: str) -> None:
        """A block element: its own text and inline children make runs of `kind`, its block
        children are visited in turn."""
        self.sync(el)
        tag = el.tag.lower()
        if tag in HEADINGS:
            self.heading(el, HEADINGS[tag])
            return
        if tag == "pre":
            self.flush()
            self.start("code")
            self.flat(el, keep_code=False)
            self.flush()
            return
        if tag == "table":
            self.flush()
            self.table(el)
            return
        if tag == "dt":
            self.flush()
            self.start("heading")
            self.flat(el)
            self.flush()
            return
        kind = _CONTAINER_KIND.get(tag, kind)
        self.flush()
        self.mixed(el, kind)
        self.flush()

    def mixed(self, el: HtmlElement, kind: str) -> None:
        if el.text and el.text.strip():
            self.start(kind)
        self.text(el.text)
        for child in el:
            if self.dropped(child):
                self.consume(child)
            elif isinstance(child.tag, str) and child.tag.lower() in _BLOCKS:
                self.block(child, kind)
            else:
                self.start(kind)
                self.inline(child)
            if child.tail and child.tail.strip():
                self.start(kind)
            self.text(child.tail)

    def inline(self, el: HtmlElement) -> None:
        self.sync(el)
        tag = el.tag.lower() if isinstance(el.tag, str) else ""
        if tag == "br":
            # A line break on screen, not in the file: a newline here would shift the lines.
            self.text(" ")
        elif tag == "img":
            self.text(el.get("alt"))
        elif tag in _CODE_INLINE:
            run, self.run = self.run, None  # gather the code's text on its own
            self.start("code")
            self.flat(el, keep_code=False)
            inner, self.run = self.run, run
            assert inner is not None
            if self.run is not None:
                self.run.put("".join(inner.parts), protected=True)
            return
        self.text(el.text)
        for child in el:
            if self.dropped(child):
                self.consume(child)
            else:
                self.inline(child)
            self.text(child.tail)

    def flat(self, el: HtmlElement, keep_code: bool = True) -> None:
        """All the text inside `el`, blocks included, into the current run."""
        self.text(el.text)
        for child in el:
            self.sync(child)
            if self.dropped(child):
                self.consume(child)
            elif keep_code:
                self.inline(child) if child.tag.lower() not in _BLOCKS else self.flat(child)
            else:
                self.flat(child, keep_code=False)
            self.text(child.tail)

    def heading(self, el: HtmlElement, level: int) -> None:
        self.flush()
        while self.headings and self.headings[-1][0] >= level:
            self.headings.pop()  # a heading's path is its ancestors, not its siblings
        self.start("heading")
        self.flat(el)
        title = " ".join(self.flush().split())
        if title:
            self.headings.append((level, title))

    def table(self, table: HtmlElement) -> None:
        self.text(table.text)
        for child in table:
            if self.dropped(child):
                self.consume(child)
            else:
                self.sync(child)
                tag = child.tag.lower()
                if tag == "tr":
                    self.row(child, head=False)
                elif tag in ("thead", "tbody", "tfoot"):
                    self.text(child.text)
                    for tr in child:
                        if self.dropped(tr) or tr.tag.lower() != "tr":
                            self.consume(tr)
                        else:
                            self.sync(tr)
                            self.row(tr, head=tag == "thead")
                        self.text(tr.tail)
                elif tag == "caption":
                    self.mixed(child, "paragraph")
                    self.flush()
                else:
                    self.consume(child)
            self.text(child.tail)

    def row(self, tr: HtmlElement, head: bool) -> None:
        cells = [c for c in tr if isinstance(c.tag, str) and c.tag.lower() in ("td", "th")]
        head = head or (bool(cells) and all(c.tag.lower() == "th" for c in cells))
        self.flush()
        self.text(tr.text)
        self.start("table_header" if head else "table_row")
        first = True
        for child in tr:
            if child in cells and not self.dropped(child):
                self.sync(child)
                if not first:
                    assert self.run is not None
                    self.run.put(" | ")
                first = False
                self.flat(child)
            else:
                self.consume(child)
            self.text(child.tail)
        self.flush()


def _glue_blank_lines(body: str, protected: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """A blank line inside one HTML block is not a paragraph break (a browser shows none): it
    is there to keep lines on their raw lines (a line that held only markup). Each is covered
    by a protected span so no sentence ends there, unless a sentence ends right before it."""
    spans = list(protected)
    for m in _BLANK_LINES.finditer(body):
        start, end = m.span()
        if start > 0 and end < len(body) and body[start - 1] not in _TERMINATORS:
            spans.append((start - 1, end + 1))
    return sorted(spans)


def _is_decoration(a: HtmlElement) -> bool:
    """A link to a fragment whose text has no letter or digit: a permalink or back-reference."""
    return (a.get("href") or "").startswith("#") and not _HAS_WORD.search(a.text_content())


def _main(root: HtmlElement) -> HtmlElement:
    for query in ('.//*[@role="main"]', ".//main", ".//article"):
        found = root.xpath(query)
        if found:
            return found[0]
    body = root.find("body")
    return body if body is not None else root


def normalize_html(text: str) -> Normalized:
    import lxml.etree
    import lxml.html

    builder = SegmentBuilder()
    if not text.strip():
        return builder.normalized()
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_blank_text=False)
    try:
        root = lxml.html.document_fromstring(text.encode("utf-8"), parser=parser)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise AdapterRefused("html_unreadable", f"lxml cannot parse it: {exc}") from None
    main = _main(root)
    findings: list[Finding] = []
    try:
        _Walker(builder, main.tag not in ("body", "html")).block(main, "paragraph")
        if not builder.segments and main.tag not in ("body", "html"):
            # An empty <main> (content drawn by a script, or outside it): read the whole body.
            builder = SegmentBuilder()
            body = root.find("body")
            _Walker(builder, False).block(body if body is not None else root, "paragraph")
            if builder.segments:
                findings.append(
                    Finding(
                        "html_main_empty",
                        "document",
                        f"the <{main.tag}> main content holds no text: the whole page is read",
                    )
                )
    except RecursionError:
        raise AdapterRefused("html_unreadable", "elements nested too deep to read") from None
    return builder.normalized(findings)


ADAPTER = Adapter(
    name="html",
    version=1,
    run=normalize_html,
    config={"main": ["[role=main]", "main", "article", "body"], "parser": "lxml"},
)
