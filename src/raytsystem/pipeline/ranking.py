"""Which claims may answer a question, and in what order (ADR 0012).

1. Sources first: the `SOURCE_CANDIDATES` best sources by FTS5's BM25 over all their text,
   headings and path; a source may answer only if it holds `required_coverage` of the
   question's IDF weight.
2. Then the claims of those sources only: a claim must itself (statement, heading path, file
   path) hold two of the question's terms (the one term of a one-term question). Its BM25 is
   computed here, with FTS5's formula and statistics, for these claims alone: FTS5's bm25()
   would score every matching claim of the index, which on common words is most of the time
   of a query.
3. relevance = source BM25 / best source + claim BM25 / best claim; manual claims first, then
   relevance, then claim ID; one claim of each set with the same analyzed terms.

Everything is deterministic for the same index content: rowids (which differ between an
incrementally patched index and a rebuilt one) never decide an order.
"""

from __future__ import annotations

import bisect
import heapq
import math
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

SOURCE_CANDIDATES: Final = 200
# Past this many pairs of terms, claims are filtered after reading (see `claim_filter`).
MAX_PAIRS: Final = 64
# A term in more than this share of the sources is not searched for when rarer ones are there
# (0.2 lost 1.3 points of SciFact recall@10, 0.35 lost 0.2 and saves a third of the latency).
COMMON_SHARE: Final = 0.35
# ... in a knowledge base of at least this many sources: it is a cost rule, and a small one
# costs nothing to search whole (where 6 sources of 16 are not "most").
COMMON_MIN_SOURCES: Final = 200
# How much the claim's source counts against the claim itself (measured: ADR 0012).
SOURCE_WEIGHT: Final = 1.0
# BM25 column weights: statement, heading path, source path.
WEIGHTS: Final = (1.0, 0.4, 0.2)
AUTHORITY_RANK: Final = {"manual": 0, "extracted": 1}


@dataclass
class Candidate:
    claim_id: str
    authority: str
    source_id: str
    score: float
    dedupe_key: str | None  # the claim's analyzed terms; read by `rank` when None
    rowid: int
    # Read for the chosen claims only (`choose`), to be checked against the ledger.
    object_hash: str = ""
    text: str = ""


def match_expression(query_terms: list[str]) -> str:
    # Terms are [^\W_]+ runs (see terms.py), so quoting cannot be escaped; doubling quotes anyway
    # keeps this safe even if that ever changes.
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in query_terms)


def required_coverage(n_terms: int) -> float:
    """The share of the question's IDF weight a source must contain to answer it at all.

    All of a one-term question; less of a longer one, whose extra words are often incidental:
    1/n + 5% (2 terms: 55%, so the rarer one; 3 terms: 38%; 5 terms: 25%; 10 terms: 15%).
    Measured on SciFact (ops/decisions/0012), this keeps recall while a question about
    something the knowledge base does not hold still gets a gap.
    """
    return min(1.0, 1.0 / n_terms + 0.05)


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


def _listed(rowids: Iterable[int]) -> str:
    """Rowids as an SQL list (integers only, so nothing can be injected)."""
    return ",".join(str(int(r)) for r in rowids)


def _vocabulary(conn: sqlite3.Connection, table: str, terms_: list[str]) -> dict[str, int]:
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


def _fts_totals(conn: sqlite3.Connection, table: str) -> tuple[int, int]:
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

    def __init__(self, conn: sqlite3.Connection, phrases: list[str]) -> None:
        rows, tokens = _fts_totals(conn, "claims_fts")
        self.avgdl = tokens / rows if rows else 1.0
        holding = _vocabulary(conn, "claims_fts", phrases)
        self.hits = sum(holding.values())  # rows a search for the phrases meets
        self.phrases = phrases
        self.idf = {}
        for term, n in holding.items():
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


def _source_idf(df: dict[str, int], total: int) -> dict[str, float]:
    """BM25-style IDF of each term over sources.

    A term no source contains counts as if one did: rare, but not infinitely heavy, so one
    unknown word in a long question does not drown the words the knowledge base does know.
    """
    freq = {t: max(1, n) for t, n in df.items()}
    return {t: math.log(1 + (total - freq[t] + 0.5) / (freq[t] + 0.5)) for t in freq}


def _source_count(conn: sqlite3.Connection) -> int:
    """The N of source IDF, recorded by the writer (every index of this format has it)."""
    (value,) = conn.execute("SELECT value FROM meta WHERE key = 'source_count'").fetchone()
    return int(value)


def _best_sources(conn: sqlite3.Connection, expression: str) -> list[tuple[int, float, str]]:
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
            f"SELECT rowid, source_id FROM docs WHERE rowid IN ({_listed(r for r, _ in kept)})"
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
            f"SELECT rowid FROM sources_fts WHERE sources_fts MATCH ? AND rowid IN ({_listed(among)})",
            (expression,),
        )
    return among.intersection(r for (r,) in rows)


def _claims_in(
    conn: sqlite3.Connection, expression: str, blocks: list[tuple[int, int]], scan_whole_index: bool
) -> list[int]:
    """Rowids of the claims that match, among those of the given blocks.

    A block is one source's rowid range (a source's rows are written together). Either one
    search of the whole index, keeping rowids inside a block, or one small search per block:
    the same rowids, at a different cost (a block search costs about as much as reading a
    hundred rowids, more when the expression has pairs).
    """
    if scan_whole_index:
        lows = [low for low, _ in blocks]
        found = []
        for (r,) in conn.execute(
            "SELECT rowid FROM claims_fts WHERE claims_fts MATCH ?", (expression,)
        ):
            i = bisect.bisect_right(lows, r) - 1
            if i >= 0 and r <= blocks[i][1]:
                found.append(r)
        return found
    found = []
    for low, high in blocks:
        found += [
            r
            for (r,) in conn.execute(
                "SELECT rowid FROM claims_fts WHERE claims_fts MATCH ? AND rowid BETWEEN ? AND ?",
                (expression, low, high),
            )
        ]
    return found


def score_claims(
    conn: sqlite3.Connection, rowids: list[int], query_terms: list[str], scorer: ClaimScorer
) -> dict[int, float]:
    """The BM25 of each of these claims that itself holds the one term of a one-term question,
    or at least two terms of a longer one (in its statement, heading path or file path); the
    others are left out.

    A claim's score follows from its length in tokens and its terms' counts in each column,
    so claims alike in those are scored once: a common word's 60,000 claims have a few
    hundred kinds. The question's terms are distinct (`parse_query`)."""
    own_need = min(len(query_terms), 2)
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
        f"SELECT id, c0, c1, c2 FROM claims_fts_content WHERE id IN ({_listed(rowids)})"
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


def candidates(conn: sqlite3.Connection, query_terms: list[str]) -> list[Candidate]:
    """The claims that may answer, with their relevance (see the module's docstring)."""
    df = _vocabulary(conn, "sources_fts", query_terms)
    total = _source_count(conn)
    idf = _source_idf(df, total)
    weight = sum(idf.values()) or 1.0
    # Words in most sources ("use", "file") weigh almost nothing in BM25 but make FTS5 score
    # a large part of a large index: they are not searched for when rarer words are there
    # (they still count toward coverage and as a claim's second term).
    common = COMMON_SHARE * total if total >= COMMON_MIN_SOURCES else total
    searched = [t for t in query_terms if df[t] <= common] or query_terms
    expression = match_expression(searched)

    best = _best_sources(conn, expression)
    covered = dict.fromkeys((r for r, _, _ in best), 0.0)
    for term in query_terms:
        if searched == [term]:  # the sources found for the one term searched all hold it
            holding: Iterable[int] = list(covered)
        else:
            holding = _containing(conn, term, df[term], set(covered))
        for r in holding:
            covered[r] += idf[term]
    need = required_coverage(len(query_terms))
    passing = [
        (r, source_id, -score) for r, score, source_id in best if covered[r] / weight >= need
    ]
    if not passing:
        return []
    source_score = {source_id: score for _, source_id, score in passing}
    # Each passing source's block, with the authority of its claims: one per source, since a
    # source's claims are all extracted or, in a manual note, all manual (the rows the ledger
    # derives are so, and `verify` compares an index's rows with them).
    blocks = conn.execute(
        "SELECT b.low, b.high, b.source_id, (SELECT d.authority FROM docs d "
        "WHERE d.rowid BETWEEN b.low AND b.high AND d.kind = 'claim' LIMIT 1) "
        f"FROM blocks b WHERE b.source_rowid IN ({_listed(r for r, _, _ in passing)}) "
        "ORDER BY b.low"
    ).fetchall()
    spans = [(low, high) for low, high, _, _ in blocks]

    scorer = ClaimScorer(conn, searched)
    filtered = claim_filter(searched, query_terms)
    paired = filtered != expression
    matched = _claims_in(conn, filtered, spans, paired or scorer.hits <= 100 * len(spans))
    scored = score_claims(conn, matched, query_terms, scorer)
    if not scored:
        return []
    best_source = max(source_score.values()) or 1.0
    best_claim = max(scored.values()) or 1.0
    lows = [low for low, _ in spans]
    out = []
    for rowid, score in scored.items():
        _, _, source_id, authority = blocks[bisect.bisect_right(lows, rowid) - 1]
        relevance = SOURCE_WEIGHT * source_score[source_id] / best_source + score / best_claim
        # The claim's ID and terms are read by `rank`, for the few claims it gets to.
        out.append(Candidate("", authority or "", source_id, relevance, None, rowid))
    return out


def rank(conn: sqlite3.Connection, found: list[Candidate], limit: int) -> list[Candidate]:
    """Manual claims first, then by relevance, then by ID; one of each set of near-duplicates.

    Claims come off a heap in order of (authority, relevance), a batch at a time (batches that
    double, each ending with a whole run of ties), and their IDs are read per batch; each run
    of ties is ordered by ID. A common word's tens of thousands of candidates are never sorted
    whole, and only the few the walk gets to are read."""
    heap = [
        (AUTHORITY_RANK.get(c.authority, 9), -round(c.score, 9), i) for i, c in enumerate(found)
    ]
    heapq.heapify(heap)
    ordered: list[tuple[tuple[int, float], Candidate]] = []  # taken off the heap, IDs read
    batch = 4 * limit

    def take(n: int) -> None:
        got: list[tuple[tuple[int, float], Candidate]] = []
        while heap and (len(got) < n or heap[0][:2] == got[-1][0]):
            authority, relevance, i = heapq.heappop(heap)
            got.append(((authority, relevance), found[i]))
        ids = dict(
            conn.execute(
                f"SELECT rowid, object_id FROM docs WHERE rowid IN ({_listed(c.rowid for _, c in got)})"
            )
        )
        unread = [c.rowid for _, c in got if c.dedupe_key is None]
        keys = dict(
            conn.execute(f"SELECT id, c0 FROM claims_fts_content WHERE id IN ({_listed(unread)})")
            if unread
            else ()
        )
        for _, c in got:
            c.claim_id = ids.get(c.rowid, "")  # no docs row (a damaged index): no candidate
            if c.dedupe_key is None:
                c.dedupe_key = keys.get(c.rowid)
                if c.dedupe_key is None:  # no full-text row either (a damaged index)
                    c.claim_id = ""
        ordered.extend(got)

    chosen: list[Candidate] = []
    seen: set[str] = set()
    start = 0
    while True:
        if start == len(ordered):
            if not heap:
                return chosen
            take(batch)
            batch *= 2
        end = start + 1
        while end < len(ordered) and ordered[end][0] == ordered[start][0]:
            end += 1
        run = sorted((c for _, c in ordered[start:end] if c.claim_id), key=lambda c: c.claim_id)
        for c in run:
            key = c.dedupe_key
            if key is None or key in seen:  # None: never, `take` read it or dropped the claim
                continue
            seen.add(key)
            chosen.append(c)
            if len(chosen) == limit:
                return chosen
        start = end


def choose(conn: sqlite3.Connection, query_terms: list[str], limit: int) -> list[Candidate]:
    """The `limit` best claims for the question, with what the index says each one states."""
    chosen = rank(conn, candidates(conn, query_terms), limit)
    if chosen:
        recorded = {
            rowid: (object_hash, text)
            for rowid, object_hash, text in conn.execute(
                "SELECT rowid, object_hash, text FROM docs "
                f"WHERE rowid IN ({_listed(c.rowid for c in chosen)})"
            )
        }
        for c in chosen:
            c.object_hash, c.text = recorded[c.rowid]
    return chosen
