"""Whether a question's words meet in the knowledge base at all: the gap rule of QUERY
(ADR 0012, "Gap rule").

A question about something the knowledge base holds uses words that the knowledge base says
together: its sentences hold two of them more often than chance would put them side by side.
A question about something else meets only common words, here and there, about as often as
chance does ("List sessions" asked of biomedical abstracts: `list` and `session` are both in
them, and in the same sentence no more often than their frequencies predict).

The test, over the claims' full-text rows (a claim's statement with its heading path and its
file path: a claim judged with its context):
- the question's terms that some claim holds are its known terms; the `MAX_TESTED` rarest of
  them are tested, rarest pairs first;
- a pair *meets* when the claims holding both outnumber what independence predicts
  (rows × p(a) × p(b)) by a likelihood-ratio (G) statistic of at least `MIN_G`, the 5% point of
  chi-square with one degree of freedom; or when they co-occur at all but the knowledge base
  is too small for any count of theirs to reach `MIN_G` (then the statistics cannot tell, and
  the other rules of the ranking decide alone);
- a question of two or more terms whose known terms have no pair that meets is a gap; so is
  a question of two or more terms with fewer than two known terms. A one-term question meets
  when its term is known.

Before that test, `mostly_unmatched`: in a knowledge base of at least `KNOWN_WORDS_SOURCES`
sources, a question at least half of whose words are in no source at all (unmatched, as the
answer's `unmatched_terms` lists them: a source's whole text counts, not only its claims) is a
gap. What the knowledge base holds of it is then the lesser part of what it asks ("A
deficiency of folate increases blood levels of homocysteine." asked of command-line pages
holds `increas` and `level` only), and any answer would rest on that part alone. The words
counted are the terms but CJK terms of two characters: a Chinese question's bigrams are
pieces of words (one across two words, such as 索文 in 搜索文本, is often in no source while
both words are), and a two-character Japanese word looks alike; a longer Japanese or Korean
word is one phrase term and counts. A question of two or three words half of which are
unmatched has at most one known term and is a gap by the pair test anyway. A small
knowledge base lacks common words ("before", "per") by its size alone: there a word's
absence says nothing of the question.

Cost: one FTS5 count per pair tested (at most `MAX_TESTED` choose 2), stopping at the first
pair that meets; an answerable question usually stops at its first, rarest pair.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping
from itertools import combinations
from typing import Final

from ..errors import IntegrityError
from ..model.terms import has_cjk
from .claim_scoring import match_expression

# The G statistic a pair must reach: chi-square with 1 degree of freedom at p = 0.05.
MIN_G: Final = 3.84
# How many of the question's known terms (the rarest) are tested in pairs.
MAX_TESTED: Final = 6
# From how many sources on a word no source holds counts against the question: fewer lack
# common words by their size alone.
KNOWN_WORDS_SOURCES: Final = 200


def g_statistic(observed: int, expected: float) -> float:
    """The likelihood-ratio statistic of `observed` co-occurrences against a Poisson
    `expected` count (0 when there are no more than expected)."""
    if observed <= expected or expected <= 0:
        return 0.0
    return 2.0 * (observed * math.log(observed / expected) - (observed - expected))


def mostly_unmatched(query_terms: list[str], in_sources: Mapping[str, int], sources: int) -> bool:
    """Whether at least half of a question's words (its terms but the CJK ones that are not
    phrase terms: bigrams, lone characters), when it has two or more, are in none of the
    knowledge base's `sources` (`in_sources`: how many hold each term, `vocabulary` of
    `sources_fts`), in a knowledge base of at least `KNOWN_WORDS_SOURCES` sources."""
    words = [t for t in query_terms if " " in t or not has_cjk(t)]
    if sources < KNOWN_WORDS_SOURCES or len(words) < 2:
        return False
    return 2 * sum(1 for t in words if in_sources[t]) <= len(words)


def words_meet(
    conn: sqlite3.Connection, query_terms: list[str], held: Mapping[str, int], rows: int
) -> bool:
    """Whether the question's words meet in the claims of this index (module docstring), given
    how many claims hold each term (`vocabulary` of `claims_fts`) and how many rows the table
    has (`fts_totals`)."""
    known = sorted((t for t in query_terms if held[t]), key=lambda t: (held[t], t))
    if len(query_terms) == 1 or not known:
        return bool(known)
    if rows <= 0:  # rows hold terms, yet FTS5's own count of rows says none: a damaged index
        raise IntegrityError(
            "fail closed: the index's full-text statistics do not match its rows",
            code="index_corrupt",
        )
    for a, b in combinations(known[:MAX_TESTED], 2):
        expected = held[a] * held[b] / rows
        strongest = g_statistic(min(held[a], held[b]), expected)
        (observed,) = conn.execute(
            "SELECT count(*) FROM claims_fts WHERE claims_fts MATCH ?",
            (f"{match_expression([a])} AND {match_expression([b])}",),
        ).fetchone()
        if observed and (g_statistic(observed, expected) >= MIN_G or strongest < MIN_G):
            return True
    return False
