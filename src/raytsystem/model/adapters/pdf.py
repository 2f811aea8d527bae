"""PDF through pypdf (pure Python, BSD): the text of each page, paragraphs and headings.

The adapter reads the file's bytes (`reads = "bytes"`). Each page's text is what pypdf extracts
from it (its plain mode), and **a segment's lines are lines of its page's extracted text**
(1-based), with `page` (1-based) on every segment: a citation says "page 3, lines 12-14".

Paragraphs: pypdf reports where each piece of text is drawn, so a page's lines are split into
paragraphs where the space between two lines is clearly larger than the page's usual line
spacing (or the text jumps back up, as at a new column), and at blank lines. Headings come
from the document's outline (bookmarks) when it has one: an entry's title is looked for among
its page's lines, and the heading path holds from there on. Without an outline, a short line set
larger than the body text is a heading, ranked by its size. Lines that repeat at the top or
bottom of most pages (running heads, page numbers) are dropped.

Refusals: a PDF with no text on any page (a scan) is `pdf_no_text`; one that is encrypted with
a password (or whose encryption needs what is not installed) is `pdf_encrypted`; one pypdf
cannot read is `pdf_unreadable`. A page whose text cannot be read is skipped with a finding, and
a file pypdf had to repair (a truncated one, a broken cross-reference table) gets `pdf_repaired`.
"""

from __future__ import annotations

import io
import logging
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from ..text import Finding
from .base import Adapter, AdapterRefused, Normalized, SegmentBuilder

_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_DIGITS: Final = re.compile(r"\d+")
_HAS_LETTER: Final = re.compile(r"[^\W\d_]")
PARAGRAPH_GAP: Final = 1.25  # x the usual line spacing
HEADING_SIZE: Final = 1.05  # x the body text size
HEADING_MAX_CHARS: Final = 100


@dataclass
class _Page:
    number: int  # 1-based
    lines: list[str]
    y: list[float | None] = field(default_factory=list)  # baseline of each line
    size: list[float] = field(default_factory=list)  # largest font size on each line
    dropped: set[int] = field(default_factory=set)  # 0-based indexes of furniture lines


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _read_page(page: Any, number: int) -> _Page:
    parts: list[tuple[str, float | None, float]] = []

    def visit(text: str, cm: list[float], tm: list[float], font: Any, size: float) -> None:
        # The baseline in page space, and the size as drawn (text and page matrices applied).
        y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
        scale = abs(tm[2] * cm[1] + tm[3] * cm[3]) or 1.0
        parts.append((text, y, float(size or 0) * scale))

    text = page.extract_text(visitor_text=visit) or ""
    lines = [_CONTROL.sub(" ", line).rstrip() for line in text.split("\n")]
    y: list[float | None] = [None] * len(lines)
    size = [0.0] * len(lines)
    index = 0
    for piece, baseline, drawn in parts:
        for k, chunk in enumerate(piece.split("\n")):
            if k:
                index += 1
            if index < len(lines) and chunk.strip():
                if y[index] is None:
                    y[index] = baseline
                size[index] = max(size[index], drawn)
    return _Page(number, lines, y, size)


def _outline(reader: Any) -> list[tuple[int, str, int]]:
    """(level, title, 0-based page) of every outline entry that points to a page."""
    found: list[tuple[int, str, int]] = []

    def walk(items: list[Any], level: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1)
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # a broken destination: the entry is skipped
                continue
            title = " ".join(str(getattr(item, "title", "") or "").split())
            if title and page is not None and page >= 0:
                found.append((level, title, page))

    try:
        walk(reader.outline, 1)
    except Exception:  # a broken outline: headings from font sizes instead
        return []
    return found


def _mark_furniture(pages: list[_Page]) -> None:
    """Drop lines that repeat (digits aside) at the top or bottom of most pages."""
    if len(pages) < 2:
        return
    ends: Counter[str] = Counter()
    places: list[list[tuple[int, str]]] = []
    for page in pages:
        filled = [i for i, line in enumerate(page.lines) if line.strip()]
        here = [
            (i, _DIGITS.sub("#", " ".join(page.lines[i].split()))) for i in filled[:1] + filled[-1:]
        ]
        places.append(here)
        ends.update({key for _, key in here})
    needed = max(2, int(0.6 * len(pages) + 0.999))
    for page, here in zip(pages, places, strict=True):
        for i, key in here:
            if ends[key] >= needed:
                page.dropped.add(i)


def normalize_pdf(data: bytes) -> Normalized:
    import pypdf
    from pypdf.errors import DependencyError, FileNotDecryptedError

    logger = logging.getLogger("pypdf")
    capture = _Capture()
    logger.addHandler(capture)
    propagate, logger.propagate = logger.propagate, False
    findings: list[Finding] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
                if reader.is_encrypted:
                    try:
                        opened = reader.decrypt("")
                    except (DependencyError, NotImplementedError) as exc:
                        raise AdapterRefused("pdf_encrypted", f"cannot decrypt it: {exc}") from None
                    if not opened:
                        raise AdapterRefused("pdf_encrypted", "it needs a password")
                count = len(reader.pages)
            except AdapterRefused:
                raise
            except FileNotDecryptedError as exc:
                raise AdapterRefused("pdf_encrypted", str(exc)) from None
            except Exception as exc:  # pypdf raises many types on damaged files
                raise AdapterRefused(
                    "pdf_unreadable", f"pypdf cannot read it: {type(exc).__name__}: {exc}"[:300]
                ) from None
            pages: list[_Page] = []
            for number in range(1, count + 1):
                try:
                    pages.append(_read_page(reader.pages[number - 1], number))
                except Exception as exc:
                    findings.append(
                        Finding(
                            "pdf_page_unreadable",
                            f"page {number}",
                            f"its text cannot be read: {type(exc).__name__}: {exc}"[:300],
                        )
                    )
            outline = _outline(reader)
    finally:
        logger.removeHandler(capture)
        logger.propagate = propagate
    if not any(line.strip() for page in pages for line in page.lines):
        raise AdapterRefused(
            "pdf_no_text", f"none of its {count} pages has text (a scan needs OCR first)"
        )
    empty = [page.number for page in pages if not any(line.strip() for line in page.lines)]
    if empty:
        shown = ", ".join(map(str, empty[:20])) + (", ..." if len(empty) > 20 else "")
        findings.append(
            Finding("pdf_pages_without_text", "document", f"pages without text: {shown}")
        )
    if capture.messages:
        findings.append(
            Finding(
                "pdf_repaired",
                "document",
                f"pypdf read it with repairs: {capture.messages[0]}"[:300],
                "info",
            )
        )
    _mark_furniture(pages)
    builder = SegmentBuilder()
    _segments(builder, pages, outline)
    return builder.normalized(findings)


def _segments(
    builder: SegmentBuilder, pages: list[_Page], outline: list[tuple[int, str, int]]
) -> None:
    headings: list[tuple[float, str]] = []  # (level, title); a font heading's level is -size
    sizes: Counter[float] = Counter()
    for page in pages:
        for i, line in enumerate(page.lines):
            if line.strip() and page.size[i] > 0:
                sizes[round(page.size[i], 1)] += len(line.strip())
    body = float(sizes.most_common(1)[0][0]) if sizes else 0.0
    by_page: dict[int, list[tuple[int, str]]] = {}
    for level, title, index in outline:
        by_page.setdefault(index + 1, []).append((level, title))

    def enter(level: float, title: str) -> None:
        while headings and headings[-1][0] >= level:
            headings.pop()
        headings.append((level, title))

    def path() -> tuple[str, ...]:
        return tuple(title for _, title in headings)

    for page in pages:
        marks: dict[int, tuple[float, str]] = {}  # line index -> heading
        start = 0
        for level, title in by_page.get(page.number, []):
            key = title.casefold()
            for i in range(start, len(page.lines)):
                text = " ".join(page.lines[i].split()).casefold()
                if text and (text == key or text.startswith(key)) and i not in page.dropped:
                    marks[i] = (level, title)
                    start = i + 1
                    break
            else:
                enter(level, title)  # not found on its page: it holds from the page's top
        if not outline and body:
            for i, line in enumerate(page.lines):
                stripped = line.strip()
                if (
                    i not in page.dropped
                    and page.size[i] >= body * HEADING_SIZE
                    and 0 < len(stripped) <= HEADING_MAX_CHARS
                    and _HAS_LETTER.search(stripped)
                ):
                    marks[i] = (-page.size[i], " ".join(stripped.split()))
        for kind, first, lines in _blocks(page, marks):
            if kind == "heading":
                builder.add("heading", lines[0], first + 1, path(), page=page.number)
                enter(*marks[first])
            else:
                builder.add("paragraph", "\n".join(lines), first + 1, path(), page=page.number)


def _blocks(page: _Page, marks: dict[int, tuple[float, str]]) -> list[tuple[str, int, list[str]]]:
    """A page's headings and paragraphs: (kind, index of its first line, its lines)."""
    gaps = [
        a - b
        for a, b in zip(page.y, page.y[1:], strict=False)
        if a is not None and b is not None and a - b > 0
    ]
    # The spacing of lines within a paragraph: the tight end of the page's line gaps.
    usual = sorted(gaps)[len(gaps) // 5] if gaps else 0.0
    blocks: list[tuple[str, int, list[str]]] = []
    block: list[str] = []
    first = 0
    previous_y: float | None = None
    for i, line in enumerate(page.lines):
        y = page.y[i]
        breaks = i in page.dropped or not line.strip() or i in marks
        if block and not breaks and previous_y is not None and y is not None and usual:
            gap = previous_y - y
            breaks = gap <= 0 or gap > usual * PARAGRAPH_GAP
        if breaks and block:
            blocks.append(("paragraph", first, block))
            block = []
        if i in page.dropped or not line.strip():
            previous_y = None
            continue
        if i in marks:
            blocks.append(("heading", i, [line.strip()]))
        else:
            if not block:
                first = i
            block.append(line.strip())
        if y is not None:
            previous_y = y
    if block:
        blocks.append(("paragraph", first, block))
    return blocks


ADAPTER = Adapter(
    name="pdf",
    version=1,
    run=normalize_pdf,
    reads="bytes",
    config={
        "extractor": "pypdf plain",
        # canonical JSON holds no floats: the ratios are recorded as their decimal text
        "paragraph_gap": repr(PARAGRAPH_GAP),
        "heading_size": repr(HEADING_SIZE),
        "heading_max_chars": HEADING_MAX_CHARS,
    },
)
