"""Text analysis for search: the same function turns indexed text and query text into terms.

SQLite's `unicode61` tokenizer splits on spaces, which finds nothing inside Chinese or Japanese
text (no spaces between words) and cannot relate Russian word forms. So raytsystem analyzes text
itself and hands FTS5 a space-separated list of ready terms:

- NFKC and case folding (full-width letters and digits become ASCII, `Ä` matches `ä`);
- runs of letters and digits are split by script: Latin words are Snowball-stemmed as English,
  Cyrillic words as Russian (`сжатия` and `сжатие` both become `сжат`), digits stay as they are;
- a Russian word that Snowball would cut by a bare perfective-gerund ending (`-ив`, `-ыв`,
  `-ав`, `-яв`) stays whole: nearly always it is a noun (`архив`, `массив`, `состав`) whose
  other forms keep those letters (`архива` → `архив`; Snowball makes `архив` itself `арх`);
- an English word that is a rare concatenation of two common words of 4+ letters becomes
  those words (`filenames` → `file name`, as `file names` and `file-name` are): see `_parts`;
- runs of Han, Hiragana, Katakana and Hangul become overlapping character bigrams (a lone
  character stays a unigram), the usual way to find words in unsegmented CJK text, within each
  script's run only: `ファイルを圧縮` is `ファイル` `を` `圧縮`, so no bigram joins a noun to the
  particle after it (`ルを`).

`query_terms` analyzes a question the same way, then drops stop words and Japanese hiragana
runs (particles, inflections) and keeps a katakana or Hangul word of three or more characters
as one phrase term (its bigrams, space-separated: FTS5 matches them as consecutive tokens), so
that `ファイル` counts as one word of the question, not three; in a Japanese question (one with
kana) a kanji run is such a word as well (`一覧表示`). Chinese questions stay bigrams: without
kana there is no word boundary to see in the text; the query leaves out those a knowledge
base's statistics show to span two words (`pipeline.query.word_terms`).

Terms are only ever letters and digits (a phrase: terms and single spaces), so a query's terms
can be quoted into an FTS5 MATCH expression without any way to express an operator.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Final

import Stemmer

_RUN: Final = re.compile(r"[^\W_]+")
_HAN_CLASS: Final = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
# Scripts written without spaces between words.
_CJK_CLASS: Final = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    + _HAN_CLASS
    + "\uac00-\ud7af"  # Hangul syllables
    "\u31f0-\u31ff\uff66-\uff9f"  # Katakana extensions, half-width
)
_SPLIT: Final = re.compile(f"([{_CJK_CLASS}]+)")
_HIRAGANA: Final = "\u3040-\u309f"
_KATAKANA: Final = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HANGUL: Final = "\uac00-\ud7af"
# A CJK run's pieces of one script each: hiragana, katakana, Hangul, or else Han.
_SCRIPT_RUN: Final = re.compile(
    f"([{_HIRAGANA}]+)|([{_KATAKANA}]+)|([{_HANGUL}]+)|([^{_HIRAGANA}{_KATAKANA}{_HANGUL}]+)"
)
_HAS_CJK: Final = re.compile(f"[{_CJK_CLASS}]")
_CYRILLIC: Final = re.compile(r"[\u0400-\u04ff]")
_LATIN: Final = re.compile(r"[a-z]")

_ENGLISH: Final = Stemmer.Stemmer("english")
_RUSSIAN: Final = Stemmer.Stemmer("russian")

# Words a compound is never split into (`_parts`: "therein" is not "there" + "in"). The index
# holds the terms this decides: changing the list is an index format change (ADR 0006).
_UNSPLIT_WORDS: Final = (
    "a about also an and any are as at be but by can do does for from has have how i "
    "if in into is it its many me much my no not of on or our please should so some "
    "tell than that the their them then there these they this to was we were what when "
    "where which who why will with you your "
)
# The rest of English's function words: auxiliaries, pronouns, conjunctions, quantifiers.
_MORE_FUNCTION_WORDS: Final = (
    "again all am because been being both could did each few further had having he her "
    "here hers herself him himself his itself just might more most must myself nor "
    "once only other ourselves own same shall she such themselves those too until us "
    "very while whom whose would yourself yourselves "
)
_RUSSIAN_FUNCTION_WORDS: Final = (
    "и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по "
    "только ее мне было вот от меня еще нет о из ему теперь когда даже ну ли если уже "
    "или ни быть был него до вас нибудь опять уж вам ведь там потом себя ничего ей "
    "может они тут где есть надо ней для мы тебя их чем была сам чтобы без будто чего "
    "раз тоже себе под будет ж тогда кто этот того потому этого какой совсем ним здесь "
    "этом один почти мой тем чтоб нее сейчас были куда зачем всех никогда можно при "
    "наконец два об другой хоть после над больше тот через эти нас про всего них какая "
    "много разве три эту моя впрочем хорошо свою этой перед иногда лучше чуть том "
    "нельзя такой им более всегда конечно всю между "
)
# Words too common to carry meaning in a question, dropped from queries only.
STOPWORDS: Final = frozenset(
    (_UNSPLIT_WORDS + _MORE_FUNCTION_WORDS + _RUSSIAN_FUNCTION_WORDS).split()
)
_UNSPLIT: Final = frozenset(_UNSPLIT_WORDS.split())


# Snowball Russian's perfective-gerund endings that may end a word bare (group 1's `в` after
# `а`/`я`, group 2's `ив`, `ыв`): cut from a noun, they part it from its own other forms.
_GERUND_CUTS: Final = {"ив": 2, "ыв": 2, "ав": 1, "яв": 1}


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    """A word's term, or (an English compound) its parts' terms joined by a space."""
    if _CYRILLIC.search(word):
        stem = str(_RUSSIAN.stemWord(word))
        cut = _GERUND_CUTS.get(word[-2:])
        return word if cut and stem == word[:-cut] else stem
    if _LATIN.search(word) and not word.isdigit():
        parts = _parts(word) if len(word) >= _MIN_COMPOUND and word.isalpha() else None
        if parts:
            return " ".join(str(_ENGLISH.stemWord(part)) for part in parts)
        return str(_ENGLISH.stemWord(word))
    return word


# Compounds. An English word list ranked by frequency (126,136 words from English Wikipedia,
# shipped inside the `wordninja` package; read, never its code) tells which words are two.
_MIN_COMPOUND: Final = 8  # letters of the shortest compound considered (4 + 4)
_MIN_PART: Final = 4
_COMMON: Final = 30_000  # a part must be among this many most frequent words
_RARER: Final = 10  # and each part at least this many times more frequent than the whole
# Second halves that are suffixes rather than words (playable, restless, corrections), first
# halves that are prefixes (interactively, underscore, supercomputers), and words too common
# to stand for anything (whichever, withstand): no split ends or starts so.
_SUFFIXES: Final = frozenset(
    ["able", "ible", "less", "ness", "ment", "ments", "ions", "ship", "ships", "ings", "ward"]
)
_PREFIXES: Final = frozenset(
    [
        "anti",
        "auto",
        "counter",
        "extra",
        "fore",
        "hyper",
        "inter",
        "intra",
        "macro",
        "micro",
        "multi",
        "over",
        "post",
        "pseudo",
        "semi",
        "super",
        "trans",
        "ultra",
        "under",
    ]
)


@functools.cache
def _word_ranks() -> tuple[dict[str, int], bytes]:
    """(rank of each of the `_COMMON` most frequent words, the whole list as bytes), loaded
    once on first use: only the common words get a dictionary entry."""
    import gzip  # only here: the query path imports this module

    spec = importlib.util.find_spec("wordninja")  # finds the module, never imports it
    try:
        assert spec is not None and spec.origin is not None
        path = Path(spec.origin).parent / "wordninja" / "wordninja_words.txt.gz"
        data = gzip.decompress(path.read_bytes())
    except (AssertionError, OSError):  # no list installed: no compound is split
        data = b""
    head = data[: data.find(b"\n", 9 * _COMMON)] if len(data) > 9 * _COMMON else data
    common = head.decode("ascii", "replace").split()[:_COMMON]
    return dict(zip(common, range(len(common)), strict=True)), b"\n" + data


def _rank(word: str, ranks: dict[str, int], listed: bytes) -> float:
    """A word's rank in the list (0 = most frequent); past the common words, its position
    counted in bytes, which grows with the rank as well (the list is in frequency order)."""
    got = ranks.get(word)
    if got is not None:
        return got
    at = listed.find(b"\n" + word.encode("ascii") + b"\n")
    return float("inf") if at < 0 else _COMMON + at / 9


def _parts(word: str) -> tuple[str, str] | None:
    """The two words `word` is a concatenation of, when it is a rare spelling of two common
    words (`filenames`: file + names, `workspace`: work + space); None for a word that is
    common itself (`database`, `together`) or not two words at all. Deterministic: it depends
    on the word list alone, never on the knowledge base."""
    ranks, listed = _word_ranks()
    best: tuple[float, int] | None = None
    for i in range(_MIN_PART, len(word) - _MIN_PART + 1):
        head, tail = word[:i], word[i:]
        if tail in _SUFFIXES or head in _PREFIXES or head in _UNSPLIT or tail in _UNSPLIT:
            continue
        a, b = ranks.get(head), ranks.get(tail)
        if a is not None and b is not None and (best is None or max(a, b) < best[0]):
            best = (max(a, b), i)
    if best is None:
        return None
    if _rank(word, ranks, listed) <= _RARER * best[0]:
        return None
    return word[: best[1]], word[best[1] :]


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _cjk_terms(piece: str, query: bool) -> list[str]:
    """The terms of a run of CJK characters: bigrams within each script's run. For a query,
    hiragana runs are left out and a katakana or Hangul word of three or more characters is
    one phrase; so is a kanji word between kana (Japanese: 一覧表示 in プロセスを一覧表示)."""
    out: list[str] = []
    runs = _SCRIPT_RUN.findall(piece)
    japanese = query and any(hiragana or katakana for hiragana, katakana, _, _ in runs)
    for hiragana, katakana, hangul, han in runs:
        if hiragana:
            if not query:
                out.extend(_bigrams(hiragana))
        elif han:
            out.extend([" ".join(_bigrams(han))] if japanese else _bigrams(han))
        else:
            word = katakana or hangul
            out.extend([" ".join(_bigrams(word))] if query else _bigrams(word))
    return out


# Every ASCII byte that is not a letter or digit, and as many spaces: in ASCII, `_RUN`'s words
# are the runs of the other bytes.
_ASCII_NON_WORD: Final = bytes(b for b in range(128) if not chr(b).isalnum())
_ASCII_TO_SPACE: Final = bytes.maketrans(_ASCII_NON_WORD, b" " * len(_ASCII_NON_WORD))


def _ascii_terms(text: str) -> Iterator[str]:
    """`_stem` of each word of ASCII text (most indexed text): NFKC leaves ASCII as it is, and
    casefold() is lower() there. Words split by bytes.translate, three times faster than the
    regex. A compound's item holds its parts' terms, space-separated."""
    words = text.encode("ascii").lower().translate(_ASCII_TO_SPACE).decode("ascii").split()
    return map(_stem, words)


def terms(text: str, *, drop_stopwords: bool = False) -> list[str]:
    """The search terms of `text`, in order, with repeats."""
    if text.isascii() and not drop_stopwords:
        return " ".join(_ascii_terms(text)).split()
    folded = unicodedata.normalize("NFKC", text).casefold()
    if not drop_stopwords and not _HAS_CJK.search(folded):
        # Most text: every run of letters and digits is one word (ingest's hot path, the
        # same terms as `_by_script` gives, which a property test checks).
        return " ".join(_stem(word) for word in _RUN.findall(folded)).split()
    return _by_script(folded, drop_stopwords)


def _by_script(folded: str, drop_stopwords: bool, *, query: bool = False) -> list[str]:
    out: list[str] = []
    for run in _RUN.findall(folded):
        for i, piece in enumerate(_SPLIT.split(run)):
            if not piece:
                continue
            if i % 2:  # odd pieces are the CJK runs captured by _SPLIT
                out.extend(_cjk_terms(piece, query))
            elif drop_stopwords and piece in STOPWORDS:
                continue
            else:
                out.extend(_stem(piece).split(" "))
    return out


def query_terms(text: str) -> list[str]:
    """The terms a question is searched by, in order, with repeats: `terms(text,
    drop_stopwords=True)` but for Japanese hiragana runs, left out, and katakana and Hangul
    words, each one phrase term (see the module docstring). A question of hiragana alone
    keeps them."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    found = _by_script(folded, True, query=True)
    return found or terms(text, drop_stopwords=True)


_HAN_BIGRAM: Final = re.compile(f"[{_HAN_CLASS}]{{2}}")


def is_han_bigram(term: str) -> bool:
    """Whether a term is two Han characters (a bigram of a Chinese run, or a two-kanji word)."""
    return _HAN_BIGRAM.fullmatch(term) is not None


def has_cjk(text: str) -> bool:
    """Whether `text` holds a character of a script written without spaces (CJK)."""
    return _HAS_CJK.search(text) is not None


def term_text(text: str) -> str:
    """Terms joined by spaces: the form stored in the FTS5 columns."""
    if text.isascii():
        return " ".join(_ascii_terms(text))
    return " ".join(terms(text))
