"""Which sources may answer a question (ADR 0012, `ranking`'s point 1): the
`SOURCE_CANDIDATES` best by FTS5's BM25 over their whole text, headings and path, and of
those the ones that hold `required_coverage` of the question's IDF weight."""

from __future__ import annotations

import itertools
import math
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Final

from .claim_scoring import WEIGHTS, match_expression, rowid_list

SOURCE_CANDIDATES: Final = 200


def required_coverage(n_terms: int) -> float:
    """The share of the question's IDF weight a source must contain to answer it at all.

    All of a one-term question; less of a longer one, whose extra words are often incidental:
    1/n + 5% (2 terms: 55%, so the rarer one; 3 terms: 38%; 5 terms: 25%; 10 terms: 15%).
    Measured on SciFact (ops/decisions/0012), this keeps recall while a question about
    something the knowledge base does not hold still gets a gap.
    """
    return min(1.0, 1.0 / n_terms + 0.05)


def _source_idf(df: Mapping[str, int], total: int) -> dict[str, float]:
    """BM25-style IDF of each term over sources.

    A term no source contains counts as if one did: rare, but not infinitely heavy, so one
    unknown word in a long question does not drown the words the knowledge base does know.
    """
    freq = {t: max(1, n) for t, n in df.items()}
    return {t: math.log(1 + (total - freq[t] + 0.5) / (freq[t] + 0.5)) for t in freq}


def source_count(conn: sqlite3.Connection) -> int:
    """The N of source IDF, recorded by the writer (every index of this format has it)."""
    (value,) = conn.execute("SELECT value FROM meta WHERE key = 'source_count'").fetchone()
    return int(value)


def best_sources(conn: sqlite3.Connection, expression: str) -> list[tuple[int, float, str]]:
    """(rowid, BM25, source ID) of the best `SOURCE_CANDIDATES` sources, ties broken by source ID.

    Only rowids and scores are sorted (joining every match with `docs` first costs more than
    the search); the source IDs of the few kept are read after, and settle ties at the cutoff.
    """
    limit = SOURCE_CANDIDATES
    found = conn.execute(
        "SELECT rowid, bm25(sources_fts, ?, ?, ?) AS score FROM sources_fts "
        "WHERE sources_fts MATCH ? ORDER BY score LIMIT ?",
        (*WEIGHTS, expression, 2 * limit),
    ).fetchall()
    if len(found) <= limit:
        kept = found
    elif found[-1][1] == found[limit - 1][1]:  # even the extra rows tie: sort every match
        return conn.execute(
            "SELECT f.rowid, bm25(sources_fts, ?, ?, ?) AS score, d.source_id FROM sources_fts f "
            "CROSS JOIN docs d ON d.rowid = f.rowid "
            "WHERE sources_fts MATCH ? ORDER BY score, d.source_id LIMIT ?",
            (*WEIGHTS, expression, limit),
        ).fetchall()
    else:
        kept = [r for r in found if r[1] <= found[limit - 1][1]]
    ids = dict(
        conn.execute(
            f"SELECT rowid, source_id FROM docs WHERE rowid IN ({rowid_list(r for r, _ in kept)})"
        )
    )
    return sorted(((r, score, ids[r]) for r, score in kept), key=lambda x: (x[1], x[2]))[:limit]


def _containing(conn: sqlite3.Connection, term: str, frequency: int, among: set[int]) -> set[int]:
    """Which of the `among` sources hold the term (`frequency`: how many sources do).

    Reading the term's whole list of sources is cheaper than looking each source up in it
    unless the term is in many more sources than are asked about.
    """
    expression = match_expression([term])
    if frequency <= 50 * len(among):
        rows = conn.execute(
            "SELECT rowid FROM sources_fts WHERE sources_fts MATCH ?", (expression,)
        )
    else:
        rows = conn.execute(
            f"SELECT rowid FROM sources_fts WHERE sources_fts MATCH ? AND rowid IN ({rowid_list(among)})",
            (expression,),
        )
    return among.intersection(itertools.chain.from_iterable(rows))


def passing_sources(
    conn: sqlite3.Connection,
    best: list[tuple[int, float, str]],
    query_terms: list[str],
    searched: list[str],
    df: Mapping[str, int],
    total: int,
) -> list[tuple[int, str, float]]:
    """(rowid, source ID, BM25 as a positive score) of the `best` sources that hold
    `required_coverage` of the question's IDF weight (over `total` sources), in `best`'s
    order. `df` may hold other terms than the question's: only the question's count."""
    idf = _source_idf({t: df[t] for t in query_terms}, total)
    weight = sum(idf.values()) or 1.0
    covered = dict.fromkeys((r for r, _, _ in best), 0.0)
    for term in query_terms:
        if searched == [term]:  # the sources found for the one term searched all hold it
            holding: Iterable[int] = list(covered)
        else:
            holding = _containing(conn, term, df[term], set(covered))
        for r in holding:
            covered[r] += idf[term]
    need = required_coverage(len(query_terms))
    return [(r, source_id, -score) for r, score, source_id in best if covered[r] / weight >= need]
