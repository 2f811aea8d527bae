"""The characters the sentence rules look at: terminators, the quotes and brackets around them,
what may start a sentence, and which characters belong to scripts written without spaces."""

from __future__ import annotations

import re
import unicodedata

# Terminators that need whitespace and a sentence start after them.
_WESTERN_TERMINATORS = ".!?…‼⁇⁈⁉؟۔।॥։።፧﹒"
# Terminators of scripts written without spaces between sentences.
_CJK_TERMINATORS = "。！？｡．︒﹖﹗"
TERMINATORS = _WESTERN_TERMINATORS + _CJK_TERMINATORS
CJK_TERMINATOR_SET = frozenset(_CJK_TERMINATORS)
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
CLOSERS = _punctuation("Pe", "Pf", "Pi") | frozenset("\"'＂＇")
# What closes even after a space, as in French `« C’est fini. » Puis...`. Not initial quotes:
# French also writes a space after an opening guillemet (`« Bonjour »`).
SPACED_CLOSERS = _punctuation("Pe", "Pf") | frozenset("\"'＂＇")
INITIAL_QUOTES = _punctuation("Pi")
BANG_QUESTION_OR_CLOSER = _BANG_QUESTION | CLOSERS
# Openers, and the quotes that German and Swedish open with (`»Hallo«`, `”Hej”`).
OPENER_CATEGORIES = frozenset(("Ps", "Pi", "Pf"))
STRAIGHT_QUOTES = frozenset("\"'＂＇¿¡")
STARTER_CATEGORIES = frozenset(("Lu", "Lt", "Lo", "Nd", "Nl", "No", "Ps", "Pi", "Pf", "Sc"))
CAPITAL_OR_CASELESS = frozenset(("Lu", "Lt", "Lo"))
DIALOGUE_DASHES = frozenset("—–")
CASED = frozenset(("Lu", "Ll", "Lt"))
# Whitespace allowed between the letters of a spaced initialism (`т. е.`): not line breaks.
INLINE_SPACES = frozenset(" \t\u00a0\u202f")
NONSPACE = re.compile(r"\S")


def char_class(chars: str) -> str:
    """A regular-expression character class body matching exactly `chars`."""
    return "".join(re.escape(ch) for ch in sorted(set(chars)))


def is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return (
        0x2E80 <= cp <= 0x9FFF  # radicals, CJK punctuation, kana, Bopomofo, Hangul compat, Han
        or 0xAC00 <= cp <= 0xD7AF  # Hangul syllables
        or 0xF900 <= cp <= 0xFAFF  # compatibility ideographs
        or 0xFE30 <= cp <= 0xFE4F  # vertical and compatibility forms
        or 0xFF00 <= cp <= 0xFFEF  # fullwidth and halfwidth forms
        or 0x20000 <= cp <= 0x3FFFF  # supplementary ideographs
    )
