"""The claims' side of QUERY's ranking (ADR 0012; the order of the whole: `ranking`).

Which of the passing sources' claims may answer (`claim_filter`, `claims_in`) and their BM25,
computed here with FTS5's formula and statistics for these claims alone (`ClaimScorer`,
`score_claims`): FTS5's bm25() would score every matching claim of the index, which on common
words is most of the time of a query. Also the FTS5 helpers the sources' side shares: MATCH
expressions, a table's vocabulary, its column weights.
"""

from __future__ import annotations

import bisect
import itertools
import math
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

# Past this many pairs of terms, claims are filtered after reading (see `claim_filter`).
MAX_PAIRS: Final = 64
# FTS5 scores the claims when those holding a searched phrase are fewer than this many times
# them (`score_claims`): its bm25() costs about a third of reading a claim and scoring it here.
FTS5_SCORING: Final = 3
# What searching one block for one phrase costs, in rowids read by a search of the whole index.
BLOCK_SEARCH: Final = 100
# BM25 column weights: statement, heading path, source path.
WEIGHTS: Final = (1.0, 0.4, 0.2)


def match_expression(query_terms: list[str]) -> str:
    # Terms are [^\W_]+ runs (see terms.py), so quoting cannot be escaped; doubling quotes anyway
    # keeps this safe even if that ever changes.
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in query_terms)


def claim_filter(searched: list[str], query_terms: list[str]) -> str:
    """The MATCH expression of the claims that may answer: one of the searched terms and, for a
    question of several terms, a second term of the question.

    Pairs are cheap for FTS5 (it steps through both terms' row lists together) and leave only
    the claims worth reading; past `MAX_PAIRS`, any searched term will do and the second term
    is checked after reading the claim.
    """
    if len(query_terms) == 1:
        return match_expression(query_terms)
    pairs = sorted({tuple(sorted((a, b))) for a in searched for b in query_terms if a != b})
    if len(pairs) > MAX_PAIRS:
        return match_expression(searched)
    return " OR ".join(f"({match_expression([a])} AND {match_expression([b])})" for a, b in pairs)


def rowid_list(rowids: Iterable[int]) -> str:
    """Rowids as an SQL list (integers only, so nothing can be injected)."""
    return ",".join(str(int(r)) for r in rowids)


def vocabulary(conn: sqlite3.Connection, table: str, terms_: list[str]) -> dict[str, int]:
    """How many rows of an FTS5 table hold each term (0 for none); a phrase term (a katakana
    word's bigrams, terms.py) is counted by searching it, as FTS5's bm25() counts it."""
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_vocab "
        f"USING fts5vocab(main, '{table}', 'row')"
    )
    words = [t for t in terms_ if " " not in t]
    placeholders = ", ".join("?" for _ in words)
    found = dict(
        conn.execute(
            f"SELECT term, doc FROM temp.{table}_vocab WHERE term IN ({placeholders})", words
        )
        if words
        else ()
    )
    for phrase in terms_:
        if " " in phrase:
            (found[phrase],) = conn.execute(
                f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (match_expression([phrase]),)
            ).fetchone()
    return {t: found.get(t, 0) for t in terms_}


def _counter(query_terms: list[str]) -> Callable[[list[str]], tuple[int, ...]]:
    """A function giving how often each of the question's terms is in a list of tokens: a
    term by `list.count`, a phrase term (space-separated terms) as consecutive tokens."""
    if not any(" " in t for t in query_terms):
        return lambda tokens: tuple(map(tokens.count, query_terms))
    phrases = [t.split(" ") for t in query_terms]

    def count(tokens: list[str]) -> tuple[int, ...]:
        out = []
        for words in phrases:
            if len(words) == 1:
                out.append(tokens.count(words[0]))
                continue
            n = len(words)
            out.append(
                sum(
                    1
                    for i, token in enumerate(tokens)
                    if token == words[0] and tokens[i : i + n] == words
                )
            )
        return tuple(out)

    return count


def fts_totals(conn: sqlite3.Connection, table: str) -> tuple[int, int]:
    """(rows, tokens in all columns) of an FTS5 table, from its averages record.

    The record (`<table>_data` id 1, part of FTS5's stable file format) is SQLite varints:
    the row count, then each column's token count.
    """
    row = conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    block = row[0] if row else b""
    values: list[int] = []
    i = 0
    while i < len(block):
        value = 0
        for n in range(9):
            byte = block[i]
            i += 1
            if n == 8:  # the ninth byte carries 8 bits
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        values.append(value)
    return (values[0], sum(values[1:])) if values else (0, 0)


_W_STATEMENT, _W_HEADING, _W_PATH = WEIGHTS


class ClaimScorer:
    """FTS5's `bm25(claims_fts, *WEIGHTS)`, computed for the claims that can answer.

    The same formula, constants, weights and statistics (rows, average length in tokens, rows
    holding each term) as FTS5's own function, summed in the same order, so the scores are
    the same numbers (a test compares them). The analyzed terms are letters and digits
    separated by single spaces, so FTS5's tokens are exactly `str.split`'s.
    """

    K1: Final = 1.2
    B: Final = 0.75

    def __init__(
        self,
        conn: sqlite3.Connection,
        phrases: list[str],
        holding: Mapping[str, int] | None = None,
        totals: tuple[int, int] | None = None,
    ) -> None:
        """`holding` (rows holding each phrase, `vocabulary`) and `totals` (`fts_totals`) of
        `claims_fts`, when the caller has read them already."""
        rows, tokens = totals or fts_totals(conn, "claims_fts")
        self.avgdl = tokens / rows if rows else 1.0
        if holding is None:
            holding = vocabulary(conn, "claims_fts", phrases)
        self.hits = sum(holding[t] for t in phrases)  # rows a search for the phrases meets
        self.phrases = phrases
        self.idf = {}
        for term in phrases:
            n = holding[term]
            idf = math.log((rows - n + 0.5) / (n + 0.5))
            self.idf[term] = idf if idf > 0 else 1e-6

    def score(self, length: int, hits: Mapping[str, tuple[int, int, int]]) -> float:
        """The BM25 of a claim (higher is better), given its length in tokens (all three
        columns) and how often each phrase is in its statement, heading and path (a phrase not
        in `hits` is in none: it would add exactly 0)."""
        norm = self.K1 * (1 - self.B + self.B * length / self.avgdl)
        score = 0.0
        for term in self.phrases:
            if term not in hits:
                continue
            in_statement, in_heading, in_path = hits[term]
            # FTS5 adds a column's weight once per hit, column by column: the same additions
            # in the same order (a product would round differently), the hits counted in C.
            freq = 0.0
            for _ in range(in_statement):
                freq += _W_STATEMENT
            for _ in range(in_heading):
                freq += _W_HEADING
            for _ in range(in_path):
                freq += _W_PATH
            score += self.idf[term] * ((freq * (self.K1 + 1.0)) / (freq + norm))
        return score

    def scan_whole(self, blocks: int) -> bool:
        """Whether searching the whole index for the phrases costs less than searching each
        of so many blocks (`claims_in`): a block search costs about as much as reading
        `BLOCK_SEARCH` rowids for each phrase it seeks."""
        return self.hits <= BLOCK_SEARCH * blocks * len(self.phrases)

    def fts5_scores(self, conn: sqlite3.Connection, rowids: list[int]) -> dict[int, float]:
        """The same BM25 of these claims, by FTS5's bm25(): it scores every claim of the
        index that holds one of the phrases (`hits`), each at about a third of the cost of
        reading a claim and scoring it here."""
        wanted = set(rowids)
        return {
            rowid: -bm25
            for rowid, bm25 in conn.execute(
                "SELECT rowid, bm25(claims_fts, ?, ?, ?) FROM claims_fts WHERE claims_fts MATCH ?",
                (*WEIGHTS, match_expression(self.phrases)),
            )
            if rowid in wanted
        }


def claims_in(
    conn: sqlite3.Connection, expression: str, blocks: list[tuple[int, int]], scan_whole_index: bool
) -> list[int]:
    """Rowids of the claims that match, among those of the given blocks.

    A block is one source's rowid range (a source's rows are written together). Either one
    search of the whole index, keeping rowids inside a block, or one small search per block:
    the same rowids, at a different cost (`ClaimScorer.scan_whole`; a search for pairs of
    terms costs more per block, and is best made whole).
    """
    found: list[int] = []
    if scan_whole_index:
        matching = list(
            itertools.chain.from_iterable(
                conn.execute(
                    "SELECT rowid FROM claims_fts WHERE claims_fts MATCH ? ORDER BY rowid",
                    (expression,),
                )
            )
        )
        for low, high in blocks:
            found += matching[
                bisect.bisect_left(matching, low) : bisect.bisect_right(matching, high)
            ]
        return found
    for low, high in blocks:
        found += itertools.chain.from_iterable(
            conn.execute(
                "SELECT rowid FROM claims_fts WHERE claims_fts MATCH ? AND rowid BETWEEN ? AND ?",
                (expression, low, high),
            )
        )
    return found


def score_claims(
    conn: sqlite3.Connection,
    rowids: list[int],
    query_terms: list[str],
    scorer: ClaimScorer,
    *,
    min_terms: int = 2,
    all_hold: bool = False,
) -> dict[int, float]:
    """The BM25 of each of these claims that itself holds at least `min_terms` of the
    question's terms (all of a shorter question; in its statement, heading path or file
    path); the others are left out.

    A claim's score follows from its length in tokens and its terms' counts in each column,
    so claims alike in those are scored once: a common word's 60,000 claims have a few
    hundred kinds. The question's terms are distinct (`parse_query`).

    `all_hold`: every one of these claims is known to hold `min_terms` of the question's
    terms (the search that found them asked for as many), so none is left out; when they
    are a good share of the claims holding a searched phrase, FTS5 scores them
    (`ClaimScorer.fts5_scores`), which costs less than reading them."""
    if all_hold and scorer.hits < FTS5_SCORING * len(rowids):
        return scorer.fts5_scores(conn, rowids)
    own_need = min(len(query_terms), min_terms)
    # A source's claims share a few heading paths and one file path: each such text is split
    # once, into its length and how often each of the question's terms is in it.
    tallies: dict[str, tuple[int, tuple[int, ...]]] = {}
    counts = _counter(query_terms)

    def tally(text: str) -> tuple[int, tuple[int, ...]]:
        tokens = text.split()
        got = tallies[text] = (len(tokens), counts(tokens))
        return got

    def evaluate(
        length: int, statement: tuple[int, ...], heading: tuple[int, ...], path: tuple[int, ...]
    ) -> float | None:
        hits = {
            t: (s, h, p)
            for t, s, h, p in zip(query_terms, statement, heading, path, strict=True)
            if s or h or p
        }
        if len(hits) < own_need:
            return None  # the claim itself must say something about the question
        return scorer.score(length, hits)

    scores: dict[tuple[Any, ...], float | None] = {}
    scored: dict[int, float] = {}
    # FTS5's content table (`id`, one `c<n>` per column) read directly: the same rows as
    # `claims_fts` by rowid, at half the cost.
    for rowid, terms_, heading, path in conn.execute(
        f"SELECT id, c0, c1, c2 FROM claims_fts_content WHERE id IN ({rowid_list(rowids)})"
    ):
        statement = terms_.split()
        heading_length, in_heading = tallies.get(heading) or tally(heading)
        path_length, in_path = tallies.get(path) or tally(path)
        key = (
            len(statement) + heading_length + path_length,
            counts(statement),
            in_heading,
            in_path,
        )
        if key not in scores:
            scores[key] = evaluate(*key)
        score = scores[key]
        if score is not None:
            scored[rowid] = score
    return scored
