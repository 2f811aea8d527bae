"""Text analysis for search: the same function turns indexed text and query text into terms.

SQLite's `unicode61` tokenizer splits on spaces, which finds nothing inside Chinese or Japanese
text (no spaces between words) and cannot relate Russian word forms. So raytsystem analyzes text
itself and hands FTS5 a space-separated list of ready terms:

- NFKC and case folding (full-width letters and digits become ASCII, `Ä` matches `ä`);
- runs of letters and digits are split by script: Latin words are Snowball-stemmed as English,
  Cyrillic words as Russian (`сжатия` and `сжатие` both become `сжат`), digits stay as they are;
- runs of Han, Hiragana, Katakana and Hangul become overlapping character bigrams (a lone
  character stays a unigram), the usual way to find words in unsegmented CJK text.

Terms are only ever letters and digits, so a query's terms can be quoted into an FTS5 MATCH
expression without any way to express an operator.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from typing import Final

import Stemmer

_RUN: Final = re.compile(r"[^\W_]+")
# Scripts written without spaces between words.
_CJK_CLASS: Final = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
    "\uac00-\ud7af"  # Hangul syllables
    "\u31f0-\u31ff\uff66-\uff9f"  # Katakana extensions, half-width
    "\U00020000-\U0002fa1f"
)
_SPLIT: Final = re.compile(f"([{_CJK_CLASS}]+)")
_HAS_CJK: Final = re.compile(f"[{_CJK_CLASS}]")
_CYRILLIC: Final = re.compile(r"[\u0400-\u04ff]")
_LATIN: Final = re.compile(r"[a-z]")

_ENGLISH: Final = Stemmer.Stemmer("english")
_RUSSIAN: Final = Stemmer.Stemmer("russian")

# Words too common to carry meaning in a question; they are dropped from queries only.
STOPWORDS: Final = frozenset(
    [
        "a",
        "about",
        "also",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "many",
        "much",
        "please",
        "some",
        "tell",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "should",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "и",
        "в",
        "во",
        "не",
        "что",
        "он",
        "на",
        "я",
        "с",
        "со",
        "как",
        "а",
        "то",
        "все",
        "она",
        "так",
        "его",
        "но",
        "да",
        "ты",
        "к",
        "у",
        "же",
        "вы",
        "за",
        "бы",
        "по",
        "только",
        "ее",
        "мне",
        "было",
        "вот",
        "от",
        "меня",
        "еще",
        "нет",
        "о",
        "из",
        "ему",
        "теперь",
        "когда",
        "даже",
        "ну",
        "ли",
        "если",
        "уже",
        "или",
        "ни",
        "быть",
        "был",
        "него",
        "до",
        "вас",
        "нибудь",
        "опять",
        "уж",
        "вам",
        "ведь",
        "там",
        "потом",
        "себя",
        "ничего",
        "ей",
        "может",
        "они",
        "тут",
        "где",
        "есть",
        "надо",
        "ней",
        "для",
        "мы",
        "тебя",
        "их",
        "чем",
        "была",
        "сам",
        "чтобы",
        "без",
        "будто",
        "чего",
        "раз",
        "тоже",
        "себе",
        "под",
        "будет",
        "ж",
        "тогда",
        "кто",
        "этот",
        "того",
        "потому",
        "этого",
        "какой",
        "совсем",
        "ним",
        "здесь",
        "этом",
        "один",
        "почти",
        "мой",
        "тем",
        "чтоб",
        "нее",
        "сейчас",
        "были",
        "куда",
        "зачем",
        "всех",
        "никогда",
        "можно",
        "при",
        "наконец",
        "два",
        "об",
        "другой",
        "хоть",
        "после",
        "над",
        "больше",
        "тот",
        "через",
        "эти",
        "нас",
        "про",
        "всего",
        "них",
        "какая",
        "много",
        "разве",
        "три",
        "эту",
        "моя",
        "впрочем",
        "хорошо",
        "свою",
        "этой",
        "перед",
        "иногда",
        "лучше",
        "чуть",
        "том",
        "нельзя",
        "такой",
        "им",
        "более",
        "всегда",
        "конечно",
        "всю",
        "между",
        "как",
    ]
)


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    if _CYRILLIC.search(word):
        return str(_RUSSIAN.stemWord(word))
    if _LATIN.search(word) and not word.isdigit():
        return str(_ENGLISH.stemWord(word))
    return word


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


# Every ASCII byte that is not a letter or digit, and as many spaces: in ASCII, `_RUN`'s words
# are the runs of the other bytes.
_ASCII_NON_WORD: Final = bytes(b for b in range(128) if not chr(b).isalnum())
_ASCII_TO_SPACE: Final = bytes.maketrans(_ASCII_NON_WORD, b" " * len(_ASCII_NON_WORD))


def _ascii_terms(text: str) -> Iterator[str]:
    """`terms` of ASCII text (most indexed text): NFKC leaves ASCII as it is, and casefold()
    is lower() there. Words split by bytes.translate, three times faster than the regex."""
    words = text.encode("ascii").lower().translate(_ASCII_TO_SPACE).decode("ascii").split()
    return map(_stem, words)


def terms(text: str, *, drop_stopwords: bool = False) -> list[str]:
    """The search terms of `text`, in order, with repeats."""
    if text.isascii() and not drop_stopwords:
        return list(_ascii_terms(text))
    folded = unicodedata.normalize("NFKC", text).casefold()
    if not drop_stopwords and not _HAS_CJK.search(folded):
        # Most text: every run of letters and digits is one word (ingest's hot path, the
        # same terms as `_by_script` gives, which a property test checks).
        return [_stem(word) for word in _RUN.findall(folded)]
    return _by_script(folded, drop_stopwords)


def _by_script(folded: str, drop_stopwords: bool) -> list[str]:
    out: list[str] = []
    for run in _RUN.findall(folded):
        for i, piece in enumerate(_SPLIT.split(run)):
            if not piece:
                continue
            if i % 2:  # odd pieces are the CJK runs captured by _SPLIT
                out.extend(_bigrams(piece))
            elif drop_stopwords and piece in STOPWORDS:
                continue
            else:
                out.append(_stem(piece))
    return out


def term_text(text: str) -> str:
    """Terms joined by spaces: the form stored in the FTS5 columns."""
    if text.isascii():
        return " ".join(_ascii_terms(text))
    return " ".join(terms(text))
