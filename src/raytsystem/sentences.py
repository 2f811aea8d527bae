"""Deterministic, rule-based sentence splitting: every sentence of prose becomes one claim.

A claim cites an exact character span of its block, so the splitter's output is part of the
evidence trail: the same text must always give the same spans, on every machine, with no model
and no locale. That is why this is a small set of explicit rules over code points (stdlib `re`
and `unicodedata` only) rather than a statistical segmenter.

`split_sentences(text, protected)` returns `[start, end)` spans in code points. The spans are
sorted, never overlap, never start or end with whitespace (as `str.isspace` sees it), and
together hold every non-whitespace character exactly once: a splitter that dropped text would
silently lose evidence, so anything that is not clearly a boundary stays inside a sentence.

The rules, and why:

- A sentence ends after a run of terminators (`.`, `!`, `?`, `…`, `...`, `?!`, `!!`, and the
  full stops and question marks of other scripts such as `؟`, `۔`, `।`) together with the
  closing quotes and brackets glued to it (`."`, `.)`, `.»`, `!”`, German `.“`), a closing
  quote or bracket standing alone after it (French `Fini. » Puis`) and a glued footnote mark
  (`.[3]`, `.²`): they belong to the sentence they close. The run must be followed by whitespace
  and then by something that can start a sentence: an uppercase or titlecase letter, a letter
  of a script without case (CJK, Hebrew, Arabic, Thai...; Georgian counts as caseless), a digit,
  an opening quote or bracket, a currency sign, a dialogue dash followed by a capital, or the
  start of a protected span (inline code often opens a sentence in technical prose). A
  lowercase letter after the whitespace means the text goes on (`Wait... what?`), so it is
  never a boundary.
- No whitespace, no boundary: the dots in `3.11`, `v2.0.1`, `1.5x`, `config.yaml`,
  `os.path.join`, `user@example.com` and `https://example.com/a.b?c=d` are not followed by
  whitespace and so are never candidates. The final `.` of `https://example.com/a.b?c=d. Next`
  is one, as it should be.
- A single `.` after a known abbreviation is not a boundary: titles (`Dr.`, `Mr.`, `Prof.`,
  `St.`...), company and name suffixes (`Inc.`, `Ltd.`, `Jr.`, `Sr.`), reference words (`Fig.`,
  `cf.`, `vs.`, `approx.`), `No.`/`p.`/`Art.`/`Jan.` before a number only (`I said no. Then`
  splits),
  dotted initialisms of single letters (`e.g.`, `i.e.`, `a.m.`, `p.m.`, `U.S.`, `т.е.`, `т.к.`,
  also spaced: `т. е.`), single capital initials (`J. R. R. Tolkien`, `А. С. Пушкин`), and
  Russian `см.`, `рис.`, `стр.`, `им.`, `напр.`, `ул.`, `ст.`, `п.`... Where an abbreviation is
  ambiguous the splitter keeps the text together, because a claim holding two sentences is
  still true to its source while a claim cut in the middle of a sentence is not. So `e.g.` and
  `i.e.` never end a sentence, not even before a capital (`e.g. Python`).
- The exceptions are abbreviations that usually close a sentence: `etc.`, `и т. д.`, `и т. п.`,
  `и др.` end one when a sentence start follows (lowercase after them never splits anyway).
  Russian `г.`/`гг.`/`в.`/`вв.` (year, century) end a sentence only right after a number
  (`в 2020 г. Компания`), not before a name (`г. Москва`).
- A number, letter or roman numeral with a `.` at the very start of the text is an enumerator
  (`1. Install it.`), not a sentence of its own.
- A run ends a sentence only once the sentence holds a letter or digit: a leading `...` or
  `!!!` joins the sentence after it rather than becoming a claim of its own.
- CJK full stops and marks (`。！？｡．︒﹖﹗`) end a sentence with no space after them, whatever
  follows; closing brackets and quotes right after them (`」』）】”`) stay with the sentence,
  while an opening quote there (`。“好的。”`) starts the next one.
  A closing quote followed by the Japanese quotative particle `と`/`って` (`「行きます。」と言った`)
  does not end the sentence. A fullwidth `．` before a digit or a Latin letter is a decimal
  point or a name (`３．１４`). ASCII `!`/`?` directly followed by a CJK character also ends a
  sentence (`太好了!我们走吧`), except inside a URL.
- Soft line breaks are whitespace like any other, so a line without final punctuation stays in
  its sentence. A blank line (two line breaks with only spaces between, `\\r\\n` counting as
  one) and U+2029 PARAGRAPH SEPARATOR always end a sentence, abbreviation or not.
- No boundary ever falls strictly inside a protected span (inline code and the like), and
  terminators inside a protected span are not punctuation at all. Protected spans are clamped to
  the text; empty or reversed ones are ignored, overlapping ones merged. A name in code right
  before a `.` is never taken for an abbreviation.

Every scan is a single forward pass of simple regular expressions (no nested quantifiers, so no
catastrophic backtracking) plus bounded look-behind around each candidate, so the running time
is linear in the length of the text.

Known limits: a sentence that really ends with an ambiguous abbreviation or a lone capital
(`...vitamin D. The sun...`, `...Acme Inc. The company...`) is kept with the next one; scripts
that end sentences with no punctuation (Thai) are not split; an ASCII `.` glued to CJK text
(`我喜欢它.它很好`) is not a boundary, since that is far more often a file name (`文件.txt`);
`Yahoo!ニュース`-style brand names split after the `!`.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence

__all__ = ["split_sentences"]

# Terminators that need whitespace and a sentence start after them.
_WESTERN_TERMINATORS = ".!?…‼⁇⁈⁉؟۔।॥։።፧﹒"
# Terminators of scripts written without spaces between sentences.
_CJK_TERMINATORS = "。！？｡．︒﹖﹗"
_TERMINATORS = _WESTERN_TERMINATORS + _CJK_TERMINATORS
_CJK_TERMINATOR_SET = frozenset(_CJK_TERMINATORS)
# Only these may end a sentence right before a CJK character with no space: a `.` there is far
# more often part of a file name or a version (`文件.txt`, `v2.版`).
_BANG_QUESTION = frozenset("!?‼⁇⁈⁉")

# Quotes and brackets live in a few blocks; scanning only those keeps import time negligible
# while covering every one that prose realistically uses.
_PUNCTUATION_BLOCKS = (
    (0x0000, 0x0100),
    (0x2000, 0x2070),
    (0x2700, 0x2800),
    (0x2980, 0x2A00),
    (0x2E00, 0x2E80),
    (0x3000, 0x3040),
    (0xFE10, 0xFE70),
    (0xFF00, 0xFFF0),
)


def _punctuation(*categories: str) -> frozenset[str]:
    return frozenset(
        chr(cp)
        for low, high in _PUNCTUATION_BLOCKS
        for cp in range(low, high)
        if unicodedata.category(chr(cp)) in categories
    )


# What a terminator run may carry after it. Initial quotes are included because several
# languages close with them (German `„Fertig.“`); straight quotes right after a terminator close.
_CLOSERS = _punctuation("Pe", "Pf", "Pi") | frozenset("\"'＂＇")
# What closes even after a space, as in French `« C’est fini. » Puis...`. Not initial quotes:
# French also writes a space after an opening guillemet (`« Bonjour »`).
_SPACED_CLOSERS = _punctuation("Pe", "Pf") | frozenset("\"'＂＇")
_INITIAL_QUOTES = _punctuation("Pi")
_BANG_QUESTION_OR_CLOSER = _BANG_QUESTION | _CLOSERS
# Openers, and the quotes that German and Swedish open with (`»Hallo«`, `”Hej”`).
_OPENER_CATEGORIES = frozenset(("Ps", "Pi", "Pf"))
_STRAIGHT_QUOTES = frozenset("\"'＂＇¿¡")
_STARTER_CATEGORIES = frozenset(("Lu", "Lt", "Lo", "Nd", "Nl", "No", "Ps", "Pi", "Pf", "Sc"))
_CAPITAL_OR_CASELESS = frozenset(("Lu", "Lt", "Lo"))
_DIALOGUE_DASHES = frozenset("—–")
_CASED = frozenset(("Lu", "Ll", "Lt"))


def _words(words: str) -> frozenset[str]:
    return frozenset(words.split())


def _char_class(chars: str) -> str:
    return "".join(re.escape(ch) for ch in sorted(set(chars)))


_RUN = re.compile(
    f"[{_char_class(_TERMINATORS)}][{_char_class(_TERMINATORS + ''.join(_CLOSERS))}]*"
)
_FOOTNOTE = re.compile(r"(?:\[\d{1,4}\]|[\u00b9\u00b2\u00b3\u2070\u2074-\u2079])+")
_NONSPACE = re.compile(r"\S")
_ALNUM = re.compile(r"[^\W_]")
_BREAK_CHARS = r"\r\n\x85\u2028\u2029"  # every character that ends a line
_LINE_BREAK = r"(?:\r\n|\r(?!\n)|[\n\x85\u2028\u2029])"
_HARD_BREAK = re.compile(rf"{_LINE_BREAK}[^\S{_BREAK_CHARS}]*{_LINE_BREAK}|\u2029")
# Every hard break starts at a line break. Python's `re` scans for `_HARD_BREAK` by trying it
# at every character, about 3 µs for a sentence of 120 characters, so `_hard_breaks` tries it
# only where this finds a line break, which most texts have none of.
_ANY_BREAK = re.compile(f"[{_BREAK_CHARS}]")
# Letters joined by dots, one letter each: e.g, i.e, a.m, U.S, т.е, J.R.R.
_DOTTED_INITIALISM = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
_ENUMERATOR = re.compile(r"\d{1,3}|[^\W\d_]|[ivx]{1,5}|[IVX]{1,5}")
# `2020`, `1941–1945`, `1990-х`, `XX`.
_NUMBER_TOKEN = re.compile(r"[\d\-–—]*\d[\d\-–—]*(?:[^\W\d_]{1,3})?|[IVXLC]+")
_URL_START = re.compile(r"://|www\.")
# A URL ends at whitespace or at CJK punctuation, which never appears unescaped inside one.
_URL_END = re.compile(r"[\s\u3000-\u303f\uff01\uff08\uff09\uff0c\uff1a\uff1b]")

# Case-sensitive: `No.` or `St.` is an abbreviation, `no.` at the end of a sentence is a word.
_ABBREVIATIONS = _words(
    """
    Mr Mrs Ms Mx Messrs Dr Prof St Jr Sr Mt Sen Rep Gov Gen Col Capt Lt Sgt Rev Hon Pres
    Inc Ltd Co Corp Bros Ave Blvd Dept Univ
    Fig Figs fig figs Eq Eqs eq eqs Vol Vols vol vols Ch ch pp Pp
    approx Approx vs Vs v cf Cf viz Viz ca al
    """
)
# Abbreviations that are only such before a number: `No. 5`, `p. 12`, `Jan. 5`, but
# `I said no. Then...` and `It shipped in Jan. The next...`.
_NUMBERED_ABBREVIATIONS = _words(
    """
    No Nos Nr nr Art art p Sec sec Para para Tab Ex ex Ref ref
    Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec
    """
)
# Russian, compared in lowercase because they are capitalised at the start of a sentence.
_RU_ABBREVIATIONS = _words(
    """
    см рис стр им напр ул ст п пп ч с т тт д ср гл табл прим букв англ лат нем франц
    проф акад доц св тел кв
    """
)
# Year and century marks: after a number they often close a sentence (`в 2020 г.`), elsewhere
# `г.` is "city" and precedes a name (`г. Москва`).
_RU_YEAR_ABBREVIATIONS = _words("г гг в вв")
# Abbreviations that commonly end a sentence, so a sentence start after them is a boundary.
_SENTENCE_FINAL = _words("etc т.д т.п и.т.д и.т.п др пр")

# Whitespace allowed between the letters of a spaced initialism (`т. е.`): not line breaks.
_INLINE_SPACES = frozenset(" \t\u00a0\u202f")
_MAX_TOKEN = 64
_QUOTATIVE_PARTICLES = ("と", "って")


def split_sentences(text: str, protected: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """Spans [start, end) in code points of `text`, one per sentence, in order."""
    n = len(text)
    if n == 0:
        return []
    if not protected and text.isascii() and "\n" not in text and "\r" not in text:
        # Most segments are one line of ASCII with at most a terminator run at the very end
        # (where no sentence can end: nothing follows it): one sentence, found without the
        # general walk. The same spans as the walk below, which a property test checks.
        first = _RUN.search(text)
        if first is None or first.end() == n:
            return _spans(text, [])
    return _walk(text, protected)


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
    cjk = not _CJK_TERMINATOR_SET.isdisjoint(run)
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
        if run == "．" and (following.isdecimal() or unicodedata.category(following) in _CASED):
            return -1
        if run[-1] in _CLOSERS and text.startswith(_QUOTATIVE_PARTICLES, end):
            return -1
        return end
    if not following.isspace():
        if (
            _BANG_QUESTION_OR_CLOSER.issuperset(run)
            and _is_cjk(following)
            and not ctx.in_url(start)
        ):
            return start + len(_without_opening_quotes(run))
        return -1
    found = _NONSPACE.search(text, end)
    if found is None:
        return -1
    nxt = found.start()
    # French spacing puts a space before a closing guillemet (`Fini. » Puis`); it still closes
    # this sentence, unless a line break shows it belongs to what follows.
    while (
        text[nxt] in _SPACED_CLOSERS
        and (nxt + 1 == len(text) or text[nxt + 1].isspace())
        and _INLINE_SPACES.issuperset(text[end:nxt])
        and not ctx.covers_char(nxt)
    ):
        end = nxt + 1
        found = _NONSPACE.search(text, end)
        if found is None:
            return -1
        nxt = found.start()
    if not _starts_sentence(text, nxt, ctx):
        return -1
    if run == "." and _is_abbreviation(text, start, nxt, ctx):
        return -1
    return end


def _without_opening_quotes(run: str) -> str:
    """With no space after `。` or `!`, an initial quote opens the next sentence: `。“好的。”`."""
    for offset, ch in enumerate(run):
        if ch in _INITIAL_QUOTES:
            return run[:offset]
    return run


def _starts_sentence(text: str, index: int, ctx: _Context) -> bool:
    if ctx.covers_char(index):
        return True
    ch = text[index]
    if unicodedata.category(ch) in _STARTER_CATEGORIES or ch in _STRAIGHT_QUOTES:
        return True
    if "\u10d0" <= ch <= "\u10ff":
        # Georgian Mkhedruli is Ll since Unicode 11, but the script is written without capitals.
        return True
    if ch in _DIALOGUE_DASHES:
        # Russian dialogue: `...сказал он. — Пойдём.`
        after = index + 1
        limit = min(len(text), after + 4)
        while after < limit and text[after] in _INLINE_SPACES:
            after += 1
        return (
            after > index + 1
            and after < len(text)
            and unicodedata.category(text[after]) in _CAPITAL_OR_CASELESS
        )
    return False


def _is_abbreviation(text: str, dot: int, nxt: int, ctx: _Context) -> bool:
    """Whether the single `.` at `dot` closes an abbreviation rather than a sentence."""
    if dot == 0 or ctx.covers_char(dot - 1):
        # Code right before the dot is a name, not an abbreviation: `Set X`. ends a sentence.
        return False
    floor = max(0, dot - _MAX_TOKEN)
    begin = dot
    # CJK text has no spaces between words, so a CJK character ends the token too (`。Dr.`).
    while begin > floor and not text[begin - 1].isspace() and not _is_cjk(text[begin - 1]):
        begin -= 1
    if (
        begin == floor
        and floor > 0
        and not text[floor - 1].isspace()
        and not _is_cjk(text[floor - 1])
    ):
        return False
    while begin < dot and (
        unicodedata.category(text[begin]) in _OPENER_CATEGORIES or text[begin] in _STRAIGHT_QUOTES
    ):
        begin += 1
    token = text[begin:dot]
    if not token:
        return False
    if len(token) == 1:
        if unicodedata.category(token) in ("Lu", "Lt"):
            return True
        if token.isalpha():
            token = _spaced_initialism(text, begin, token)
    if token in _ABBREVIATIONS:
        return True
    if token in _NUMBERED_ABBREVIATIONS:
        return text[nxt].isdecimal()
    lowered = token.lower()
    if lowered in _SENTENCE_FINAL:
        return False
    if lowered in _RU_ABBREVIATIONS:
        return True
    if lowered in _RU_YEAR_ABBREVIATIONS:
        return not _after_number(text, begin)
    if _DOTTED_INITIALISM.fullmatch(token):
        return True
    return bool(_ENUMERATOR.fullmatch(token)) and _NONSPACE.search(text, 0, begin) is None


def _spaced_initialism(text: str, begin: int, letter: str) -> str:
    """`т. е` → `т.е`: collect up to three `X. ` pieces before a one-letter token."""
    letters = [letter]
    for _ in range(3):
        if (
            begin >= 3
            and text[begin - 1] in _INLINE_SPACES
            and text[begin - 2] == "."
            and text[begin - 3].isalpha()
            and (begin == 3 or text[begin - 4].isspace())
        ):
            letters.append(text[begin - 3])
            begin -= 3
        else:
            break
    return ".".join(reversed(letters))


def _after_number(text: str, begin: int) -> bool:
    """Whether the token before position `begin` is a number (`2020`, `1941–1945`, `XX`)."""
    end = begin
    floor = max(0, begin - 4)
    while end > floor and text[end - 1] in _INLINE_SPACES:
        end -= 1
    if end == begin:
        return False
    start = end
    floor = max(0, end - 16)
    while start > floor and not text[start - 1].isspace():
        start -= 1
    return bool(_NUMBER_TOKEN.fullmatch(text, start, end))


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


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return (
        0x2E80 <= cp <= 0x9FFF  # radicals, CJK punctuation, kana, Bopomofo, Hangul compat, Han
        or 0xAC00 <= cp <= 0xD7AF  # Hangul syllables
        or 0xF900 <= cp <= 0xFAFF  # compatibility ideographs
        or 0xFE30 <= cp <= 0xFE4F  # vertical and compatibility forms
        or 0xFF00 <= cp <= 0xFFEF  # fullwidth and halfwidth forms
        or 0x20000 <= cp <= 0x3FFFF  # supplementary ideographs
    )


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
