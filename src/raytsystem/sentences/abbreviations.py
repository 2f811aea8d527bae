"""Which `.` closes an abbreviation rather than a sentence (see the package's docstring).

Where an abbreviation is ambiguous the answer keeps the text together: a claim holding two
sentences is still true to its source, a claim cut in the middle of a sentence is not.
"""

from __future__ import annotations

import re
import unicodedata

from .chars import INLINE_SPACES, NONSPACE, OPENER_CATEGORIES, STRAIGHT_QUOTES, is_cjk


def _words(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Letters joined by dots, one letter each: e.g, i.e, a.m, U.S, т.е, J.R.R.
_DOTTED_INITIALISM = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
_ENUMERATOR = re.compile(r"\d{1,3}|[^\W\d_]|[ivx]{1,5}|[IVX]{1,5}")
# `2020`, `1941–1945`, `1990-х`, `XX`.
_NUMBER_TOKEN = re.compile(r"[\d\-–—]*\d[\d\-–—]*(?:[^\W\d_]{1,3})?|[IVXLC]+")

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
_MAX_TOKEN = 64


def is_abbreviation(text: str, dot: int, nxt: int) -> bool:
    """Whether the single `.` at `dot` closes an abbreviation rather than a sentence, `nxt`
    being where the next word starts. (The caller has checked that no protected span, a name
    in code, ends right before the dot.)"""
    if dot == 0:
        return False
    floor = max(0, dot - _MAX_TOKEN)
    begin = dot
    # CJK text has no spaces between words, so a CJK character ends the token too (`。Dr.`).
    while begin > floor and not text[begin - 1].isspace() and not is_cjk(text[begin - 1]):
        begin -= 1
    if (
        begin == floor
        and floor > 0
        and not text[floor - 1].isspace()
        and not is_cjk(text[floor - 1])
    ):
        return False
    while begin < dot and (
        unicodedata.category(text[begin]) in OPENER_CATEGORIES or text[begin] in STRAIGHT_QUOTES
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
    return bool(_ENUMERATOR.fullmatch(token)) and NONSPACE.search(text, 0, begin) is None


def _spaced_initialism(text: str, begin: int, letter: str) -> str:
    """`т. е` → `т.е`: collect up to three `X. ` pieces before a one-letter token."""
    letters = [letter]
    for _ in range(3):
        if (
            begin >= 3
            and text[begin - 1] in INLINE_SPACES
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
    while end > floor and text[end - 1] in INLINE_SPACES:
        end -= 1
    if end == begin:
        return False
    start = end
    floor = max(0, end - 16)
    while start > floor and not text[start - 1].isspace():
        start -= 1
    return bool(_NUMBER_TOKEN.fullmatch(text, start, end))
