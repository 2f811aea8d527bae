"""The sentence splitter itself: one forward pass over the terminator runs of a text, each
weighed as a possible boundary (the rules are in the package's docstring)."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from typing import Final

from .abbreviations import is_abbreviation
from .chars import (
    BANG_QUESTION_OR_CLOSER,
    CAPITAL_OR_CASELESS,
    CASED,
    CJK_TERMINATOR_SET,
    CLOSERS,
    DIALOGUE_DASHES,
    INITIAL_QUOTES,
    INLINE_SPACES,
    NONSPACE,
    SPACED_CLOSERS,
    STARTER_CATEGORIES,
    STRAIGHT_QUOTES,
    TERMINATORS,
    char_class,
    is_cjk,
)

_RUN = re.compile(f"[{char_class(TERMINATORS)}][{char_class(TERMINATORS + ''.join(CLOSERS))}]*")
_FOOTNOTE = re.compile(r"(?:\[\d{1,4}\]|[\u00b9\u00b2\u00b3\u2070\u2074-\u2079])+")
_ALNUM = re.compile(r"[^\W_]")
_BREAK_CHARS = r"\r\n\x85\u2028\u2029"  # every character that ends a line
_LINE_BREAK = r"(?:\r\n|\r(?!\n)|[\n\x85\u2028\u2029])"
_HARD_BREAK = re.compile(rf"{_LINE_BREAK}[^\S{_BREAK_CHARS}]*{_LINE_BREAK}|\u2029")
# Every hard break starts at a line break. Python's `re` scans for `_HARD_BREAK` by trying it
# at every character, about 3 µs for a sentence of 120 characters, so `_hard_breaks` tries it
# only where this finds a line break, which most texts have none of.
_ANY_BREAK = re.compile(f"[{_BREAK_CHARS}]")
_URL_START = re.compile(r"://|www\.")
# A URL ends at whitespace or at CJK punctuation, which never appears unescaped inside one.
_URL_END = re.compile(r"[\s\u3000-\u303f\uff01\uff08\uff09\uff0c\uff1a\uff1b]")
_QUOTATIVE_PARTICLES = ("と", "って")


# The longest a sentence (so a claim) may be, in code points. Prose never comes near it; a
# paragraph with no sentence end (a log, a minified line, a dump) would otherwise be one claim
# of megabytes, and every answer citing it as large. A longer span is cut at its last
# whitespace before the bound (or at the bound, if it has none).
LONGEST_SENTENCE: Final = 2000


def split_sentences(text: str, protected: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """Spans [start, end) in code points of `text`, one per sentence, in order, none longer
    than `LONGEST_SENTENCE`."""
    n = len(text)
    if n == 0:
        return []
    if not protected and text.isascii() and "\n" not in text and "\r" not in text:
        # Most segments are one line of ASCII with at most a terminator run at the very end
        # (where no sentence can end: nothing follows it): one sentence, found without the
        # general walk. The same spans as the walk below, which a property test checks.
        first = _RUN.search(text)
        if first is None or first.end() == n:
            return _bounded(text, _spans(text, []))
    return _bounded(text, _walk(text, protected))


def _bounded(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    if all(end - start <= LONGEST_SENTENCE for start, end in spans):
        return spans
    out: list[tuple[int, int]] = []
    for start, end in spans:
        while end - start > LONGEST_SENTENCE:
            limit = start + LONGEST_SENTENCE
            cut = max(text.rfind(" ", start + 1, limit + 1), text.rfind("\n", start + 1, limit + 1))
            cut = cut if cut > start else limit
            piece = text[start:cut].rstrip()
            out.append((start, start + len(piece)))
            start = cut
            while start < end and text[start].isspace():
                start += 1
        if start < end:
            out.append((start, end))
    return out


def _walk(text: str, protected: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """`split_sentences` of any text: every terminator run weighed as a possible boundary."""
    ctx = _Context(text, protected)
    hard = _hard_breaks(text, ctx)
    cuts = list(hard)
    content = _ContentTracker(text)
    hard_index = 0
    last_cut = 0
    for low, high in ctx.windows():
        for match in _RUN.finditer(text, low, high):
            start, end = match.span()
            while hard_index < len(hard) and hard[hard_index] <= start:
                last_cut = max(last_cut, hard[hard_index])
                hard_index += 1
            cut = _boundary(text, start, end, ctx)
            if cut < 0 or not content.has_content(last_cut, start):
                continue
            cuts.append(cut)
            last_cut = cut
    return _spans(text, cuts)


class _Context:
    """Protected spans (clamped, merged) and URLs of one text, searchable by position."""

    def __init__(self, text: str, spans: Sequence[tuple[int, int]]) -> None:
        n = len(text)
        clean = sorted(
            (max(0, min(start, n)), max(0, min(end, n)))
            for start, end in spans
            if max(0, min(start, n)) < max(0, min(end, n))
        )
        merged: list[tuple[int, int]] = []
        for start, end in clean:
            # Overlapping spans merge; merely adjacent ones stay apart, since a boundary
            # between them is inside neither.
            if merged and start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        self.text = text
        self.n = n
        self.spans = merged
        self.starts = [start for start, _ in merged]
        self.urls: list[tuple[int, int]] | None = None
        self.url_starts: list[int] = []

    def windows(self) -> Iterator[tuple[int, int]]:
        """The unprotected stretches of the text, in order."""
        position = 0
        for start, end in self.spans:
            if position < start:
                yield position, start
            position = end
        if position < self.n:
            yield position, self.n

    def covers_char(self, index: int) -> bool:
        i = bisect_right(self.starts, index) - 1
        return i >= 0 and self.spans[i][1] > index

    def in_url(self, index: int) -> bool:
        """Whether `index` lies inside a URL (found once, on first use: most texts never ask)."""
        if self.urls is None:
            self.urls = _find_urls(self.text)
            self.url_starts = [start for start, _ in self.urls]
        i = bisect_right(self.url_starts, index) - 1
        return i >= 0 and self.urls[i][1] > index

    def splits(self, cut: int) -> bool:
        """Whether a boundary at `cut` would fall strictly inside a protected span."""
        i = bisect_left(self.starts, cut) - 1
        return i >= 0 and self.spans[i][1] > cut


class _ContentTracker:
    """Answers "has the current sentence a letter or digit yet?" in linear total time."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.start = -1
        self.scanned = 0
        self.found = False

    def has_content(self, sentence_start: int, position: int) -> bool:
        if sentence_start != self.start:
            self.start = sentence_start
            self.scanned = sentence_start
            self.found = False
        if not self.found and self.scanned < position:
            self.found = _ALNUM.search(self.text, self.scanned, position) is not None
            self.scanned = position
        return self.found


def _hard_breaks(text: str, ctx: _Context) -> list[int]:
    """Where blank lines (and paragraph separators) cut the text: the matches of `_HARD_BREAK`
    from left to right, as `finditer` finds them, each cut at its start or else its end,
    whichever is outside the protected spans."""
    cuts: list[int] = []
    position = 0
    while (line_break := _ANY_BREAK.search(text, position)) is not None:
        match = _HARD_BREAK.match(text, line_break.start())
        if match is None:
            position = line_break.end()
            continue
        for cut in match.span():
            if not ctx.splits(cut):
                cuts.append(cut)
                break
        position = match.end()
    return cuts


def _boundary(text: str, start: int, end: int, ctx: _Context) -> int:
    """Where the sentence ends if the terminator run `text[start:end]` ends one, else -1."""
    run = text[start:end]
    cjk = not CJK_TERMINATOR_SET.isdisjoint(run)
    if cjk:
        run = _without_opening_quotes(run)
        end = start + len(run)
    # Footnote marks glued to the terminator (`...in 1990.[3] Next`) belong to the sentence.
    note = _FOOTNOTE.match(text, end)
    if note is not None and not ctx.covers_char(end) and not ctx.splits(note.end()):
        end = note.end()
    if end >= len(text):
        return -1
    following = text[end]
    if cjk:
        if run == "．" and (following.isdecimal() or unicodedata.category(following) in CASED):
            return -1
        if run[-1] in CLOSERS and text.startswith(_QUOTATIVE_PARTICLES, end):
            return -1
        return end
    if not following.isspace():
        if BANG_QUESTION_OR_CLOSER.issuperset(run) and is_cjk(following) and not ctx.in_url(start):
            return start + len(_without_opening_quotes(run))
        return -1
    found = NONSPACE.search(text, end)
    if found is None:
        return -1
    nxt = found.start()
    # French spacing puts a space before a closing guillemet (`Fini. » Puis`); it still closes
    # this sentence, unless a line break shows it belongs to what follows.
    while (
        text[nxt] in SPACED_CLOSERS
        and (nxt + 1 == len(text) or text[nxt + 1].isspace())
        and INLINE_SPACES.issuperset(text[end:nxt])
        and not ctx.covers_char(nxt)
    ):
        end = nxt + 1
        found = NONSPACE.search(text, end)
        if found is None:
            return -1
        nxt = found.start()
    if not _starts_sentence(text, nxt, ctx):
        return -1
    # Code right before the dot is a name, not an abbreviation: `Set X`. ends a sentence.
    if run == "." and not ctx.covers_char(start - 1) and is_abbreviation(text, start, nxt):
        return -1
    return end


def _without_opening_quotes(run: str) -> str:
    """With no space after `。` or `!`, an initial quote opens the next sentence: `。“好的。”`."""
    for offset, ch in enumerate(run):
        if ch in INITIAL_QUOTES:
            return run[:offset]
    return run


def _starts_sentence(text: str, index: int, ctx: _Context) -> bool:
    if ctx.covers_char(index):
        return True
    ch = text[index]
    if unicodedata.category(ch) in STARTER_CATEGORIES or ch in STRAIGHT_QUOTES:
        return True
    if "\u10d0" <= ch <= "\u10ff":
        # Georgian Mkhedruli is Ll since Unicode 11, but the script is written without capitals.
        return True
    if ch in DIALOGUE_DASHES:
        # Russian dialogue: `...сказал он. — Пойдём.`
        after = index + 1
        limit = min(len(text), after + 4)
        while after < limit and text[after] in INLINE_SPACES:
            after += 1
        return (
            after > index + 1
            and after < len(text)
            and unicodedata.category(text[after]) in CAPITAL_OR_CASELESS
        )
    return False


def _find_urls(text: str) -> list[tuple[int, int]]:
    """Spans from each `://` or `www.` to the end of its URL, in one linear pass."""
    urls: list[tuple[int, int]] = []
    for match in _URL_START.finditer(text):
        start = match.start()
        if urls and start < urls[-1][1]:
            continue
        end = _URL_END.search(text, match.end())
        urls.append((start, len(text) if end is None else end.start()))
    return urls


def _spans(text: str, cuts: list[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    previous = 0
    for cut in [*sorted(set(cuts)), len(text)]:
        if cut <= previous:
            continue
        segment = text[previous:cut]
        stripped = segment.lstrip()
        if stripped:
            start = previous + len(segment) - len(stripped)
            spans.append((start, previous + len(segment.rstrip())))
        previous = cut
    return spans
