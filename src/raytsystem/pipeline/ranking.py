"""Which claims may answer a question, and in what order (ADR 0012).

0. The gap rules (`meeting`). In a knowledge base of `meeting.KNOWN_WORDS_SOURCES` sources
   or more, a question at least half of whose words are in no source is a gap
   (`mostly_unmatched`). And a question of two or more terms is a gap unless two of its words
   meet in the knowledge base's claims more often than chance would have it (a G statistic
   of at least 3.84 over the claims' rows, p = 0.05) or the knowledge base is too small for
   that to be measurable (`words_meet`). A named model's meaning gap replaces both (ADR 0043).
1. Sources first (`source_choice`): the `SOURCE_CANDIDATES` best sources by FTS5's BM25
   over all their text, headings and path; a source may answer only if it holds
   `required_coverage` of the question's IDF weight (when stored vectors rank, ADR 0044,
   every one of them may, and the claims of those short of the coverage rank as extracted
   claims and are not `judged` by the meaning gap).
2. Then the claims of those sources only, each holding a searched term: a claim must itself
   (statement, heading path, file path: the sentence with its context) hold `CLAIM_TERMS`
   (two) of the question's terms, the one term of a one-term question; in a question of three
   or more terms and a source none of whose claims holds two, one will do (of two terms, one
   is half the question, and a line holding it is seldom the answer: measured on the
   multilingual tldr questions): the source already holds the question (1.), so a relevant
   source whose sentences each hold one of its words answers through the best of them, and
   a source that says the question's words together answers only where it does. Such a
   claim of one term ranks with the extracted claims, a manual note's too. Its BM25 is
   computed with FTS5's formula and statistics, for these claims alone (`claim_scoring`).
3. A claim is read with its neighbours: its score is its BM25 plus `NEIGHBOUR_WEIGHT` times
   that of the claims just before and after it in its source that may answer too
   (`in_context`), so a sentence inside a passage about the question outranks the same
   sentence alone. In a question of three terms, when some claims hold all three, only they
   answer (`complete_matches`). relevance = source BM25 / best source + claim score / best
   claim; manual claims first, then relevance, then claim ID (`ordered`). Which of them an
   answer cites (the relevance cliff, the cap per source, near-duplicates merged) is
   `compose`'s (ADR 0042).
4. Decision records (ADR 0041; the roles and statuses are in the index rows,
   `model/records.py`): the decision of a record in force (accepted, approved, or no status
   stated) ranks with the manual claims, unless it is a claim of one term (2.); a
   record whose decision is stated in at most `OUTCOME_CLAIMS` sentences has them cited, just
   before its best claim, whenever any of its claims may answer (its considered options, its
   context); every claim of a retired record (superseded, deprecated, rejected) comes after
   all other claims.

Everything is deterministic for the same index content: rowid values (which differ between a
patched index and a rebuilt one) never decide an order; which claim rows of a source are
adjacent does, and every index writes them in text order (index format 11).
"""

from __future__ import annotations

import bisect
import heapq
import sqlite3
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from ..errors import IntegrityError
from ..model.records import IN_FORCE, RECORD, RETIRED
from .claim_scoring import (
    ClaimScorer,
    claim_filter,
    claims_in,
    fts_totals,
    match_expression,
    rowid_list,
    score_claims,
    vocabulary,
)
from .meeting import mostly_unmatched, words_meet
from .source_choice import best_sources, passing_sources, source_count

# A term in more than this share of the sources is not searched for when rarer ones are there
# (0.2 lost 1.3 points of SciFact recall@10, 0.35 lost 0.2 and saves a third of the latency).
COMMON_SHARE: Final = 0.35
# ... in a knowledge base of at least this many sources: it is a cost rule, and a small one
# costs nothing to search whole (where 6 sources of 16 are not "most").
COMMON_MIN_SOURCES: Final = 200
# How many of the question's terms a claim must hold itself (statement, heading path, path),
# unless no claim of its source does: then one will do (ADR 0012, measured on SciFact).
CLAIM_TERMS: Final = 2
# How much the claim's source counts against the claim itself (measured: ADR 0012).
SOURCE_WEIGHT: Final = 1.0
# How much each neighbouring claim that holds the question adds to a claim (ADR 0012).
NEIGHBOUR_WEIGHT: Final = 0.25
# In a question of at most this many terms, the claims that hold them all answer when some do
# (`complete_matches`; measured: ADR 0012).
COMPLETE_TERMS: Final = 3
AUTHORITY_RANK: Final = {"manual": 0, "extracted": 1}
EXTRACTED: Final = AUTHORITY_RANK["extracted"]
OTHER: Final = 9  # an authority the index should not hold
# Tiers after the authorities': the claims of retired decision records.
RETIRED_TIER: Final = 2
# A record whose decision section holds at most this many claims has them all cited with it.
OUTCOME_CLAIMS: Final = 3
# How far above its record's best claim an outcome brought in for it is put.
OUTCOME_LEAD: Final = 1e-6


@dataclass(slots=True)
class Candidate:
    claim_id: str
    source_id: str
    score: float
    dedupe_key: str | None  # the claim's analyzed terms; read by `ordered` when None
    rowid: int
    # Where it ranks before relevance: its authority's rank (`AUTHORITY_RANK`) unless it
    # holds one term of the question or a decision record says otherwise (`records_tiers`).
    tier: int
    # Read for the chosen claims only (`choose`, `compose`): what is checked against the ledger, and
    # the claim's role in its decision record and the record's status ("" outside records;
    # the cited sources' rows are checked against the ledger's digests, these fields too).
    object_hash: str = ""
    text: str = ""
    role: str = ""
    record_status: str = ""
    # Near-duplicates of this claim in other sources, cited with it (`compose.select`).
    merged: list[Candidate] = field(default_factory=list)
    # Whether the meaning gap reads it (ADR 0044): False for a claim of a source that holds
    # too little of the question (`candidates(every_source=True)`) or that meaning alone
    # brought in (`meaning.Fused`): it may be cited, it never decides that a question is
    # answered.
    judged: bool = True


def candidates(
    conn: sqlite3.Connection,
    query_terms: list[str],
    df: Mapping[str, int] | None = None,
    *,
    word_gaps: bool = True,
    every_source: bool = False,
) -> list[Candidate]:
    """The claims that may answer, with their relevance (the module's docstring); none for a
    word gap (0., with `word_gaps`). `df`: each term's sources, when read already.
    `every_source` (ranking by stored vectors, ADR 0044): the best sources that hold less
    than `required_coverage` of the question answer too, their claims not `judged`."""
    df = vocabulary(conn, "sources_fts", query_terms) if df is None else df
    total = source_count(conn)
    if word_gaps and mostly_unmatched(query_terms, df, total):
        return []
    totals = fts_totals(conn, "claims_fts")
    held = vocabulary(conn, "claims_fts", query_terms)
    if word_gaps and not words_meet(conn, query_terms, held, totals[0]):
        return []
    # Words in most sources ("use", "file") weigh almost nothing in BM25 but make FTS5 score
    # a large part of a large index: they are not searched for when rarer words are there
    # (they still count toward coverage and as a claim's second term).
    common = COMMON_SHARE * total if total >= COMMON_MIN_SOURCES else total
    searched = [t for t in query_terms if df[t] <= common] or query_terms
    expression = match_expression(searched)

    best = best_sources(conn, expression)
    passing = passing_sources(conn, best, query_terms, searched, df, total)
    if not passing:
        return []
    covering = {source_id for _, source_id, _ in passing}
    if every_source:
        passing = [(r, source_id, -score) for r, score, source_id in best]
    source_score = {source_id: score for _, source_id, score in passing}
    blocks = _blocks(conn, [r for r, _, _ in passing])
    spans = [(low, high) for low, high, *_ in blocks]

    scorer = ClaimScorer(conn, searched, held, totals)
    filtered = claim_filter(searched, query_terms)
    paired = filtered != expression
    matched = claims_in(conn, filtered, spans, paired or scorer.scan_whole(len(spans)))
    scored = score_claims(
        conn, matched, query_terms, scorer, all_hold=paired or len(query_terms) == 1
    )
    one_term = {}
    if len(query_terms) > CLAIM_TERMS:
        one_term = one_term_claims(conn, expression, spans, scored, query_terms, scorer)
        scored.update(one_term)
    if not scored:
        return []
    scored = complete_matches(conn, in_context(scored, spans), query_terms, spans)
    best_source = max(source_score.values()) or 1.0
    best_claim = max(scored.values()) or 1.0
    lows = [low for low, _ in spans]
    out = []
    in_records: dict[int, list[Candidate]] = {}  # block -> its candidates, for records only
    for rowid, score in scored.items():
        block = bisect.bisect_right(lows, rowid) - 1
        _, _, source_id, authority, role, _ = blocks[block]
        relevance = SOURCE_WEIGHT * source_score[source_id] / best_source + score / best_claim
        # The claim's ID and terms are read by `ordered`, for the few claims it gets to.
        # A claim holding one term of the question, or of a source short of the coverage,
        # ranks as an extracted one, whatever its authority: a note's passing mention does
        # not go before another source's answer.
        judged = source_id in covering
        mention = rowid in one_term or not judged
        tier = EXTRACTED if mention else AUTHORITY_RANK.get(authority or "", OTHER)
        out.append(Candidate("", source_id, relevance, None, rowid, tier, judged=judged))
        if role == RECORD:
            in_records.setdefault(block, []).append(out[-1])
    if in_records:
        out += records_tiers(conn, in_records, blocks, one_term)
    return out


Block = tuple[int, int, str, str | None, str, str]


def _blocks(conn: sqlite3.Connection, source_rowids: list[int]) -> list[Block]:
    """The block of each source (by its own row's rowid), in rowid order: (low, high, source
    ID, the authority of its claims, its role, its record status). One authority per source,
    since a source's claims are all extracted or, in a manual note, all manual (the rows the
    ledger derives are so, and `verify` compares an index's rows with them); the source's own
    row says whether it is a decision record, and its status."""
    return conn.execute(
        "SELECT b.low, b.high, b.source_id, (SELECT d.authority FROM docs d "
        "WHERE d.rowid BETWEEN b.low AND b.high AND d.kind = 'claim' LIMIT 1), s.role, "
        "s.record_status FROM blocks b CROSS JOIN docs s ON s.rowid = b.source_rowid "
        f"WHERE b.source_rowid IN ({rowid_list(source_rowids)}) ORDER BY b.low"
    ).fetchall()


def complete_matches(
    conn: sqlite3.Connection,
    scored: dict[int, float],
    query_terms: list[str],
    spans: list[tuple[int, int]],
) -> dict[int, float]:
    """The claims of `scored` that hold every term of a question of `COMPLETE_TERMS` terms
    (in their statement, heading path or file path, as `CLAIM_TERMS` counts them), when some
    do; else all of them. A line holding two of three words misses a third of what is asked;
    in a longer question, one missing word is often the answer worded otherwise."""
    if not CLAIM_TERMS < len(query_terms) <= COMPLETE_TERMS:
        return scored
    every = " AND ".join(match_expression([t]) for t in query_terms)
    holding = set(claims_in(conn, every, spans, scan_whole_index=True))
    complete = {rowid: score for rowid, score in scored.items() if rowid in holding}
    return complete or scored


def in_context(scored: Mapping[int, float], spans: list[tuple[int, int]]) -> dict[int, float]:
    """Each claim's score (`scored`: rowid -> BM25, claims of the `spans` blocks) plus
    `NEIGHBOUR_WEIGHT` times the scores of the claims on either side of it in its source,
    those that are scored. A block's claim rows are its claims in text order
    (`indexing.source_rows`), so adjacent rowids of one block are adjacent sentences; a row
    next to a block's first row is another source's."""
    starts = {low for low, _ in spans}
    out = {}
    for rowid, score in scored.items():
        before = 0.0 if rowid in starts else scored.get(rowid - 1, 0.0)
        after = 0.0 if rowid + 1 in starts else scored.get(rowid + 1, 0.0)
        out[rowid] = score + NEIGHBOUR_WEIGHT * (before + after)
    return out


def one_term_claims(
    conn: sqlite3.Connection,
    expression: str,
    spans: list[tuple[int, int]],
    scored: dict[int, float],
    query_terms: list[str],
    scorer: ClaimScorer,
) -> dict[int, float]:
    """The BM25 of the claims holding one searched term, in the sources (`spans`, their
    blocks) none of whose claims is among those `scored` for holding `CLAIM_TERMS` of the
    question's terms (see the module's docstring, 2.): only those sources' blocks are read."""
    lows = [low for low, _ in spans]
    answering = {bisect.bisect_right(lows, r) - 1 for r in scored}
    rest = [span for i, span in enumerate(spans) if i not in answering]
    if not rest:
        return {}
    matched = claims_in(conn, expression, rest, scorer.scan_whole(len(rest)))
    return score_claims(conn, matched, query_terms, scorer, min_terms=1, all_hold=True)


def records_tiers(
    conn: sqlite3.Connection,
    in_records: dict[int, list[Candidate]],
    blocks: list[Block],
    one_term: Container[int],
) -> list[Candidate]:
    """Tier the candidates of decision records (`in_records`: block -> its candidates) and
    return the outcome claims brought in for them (see the module's docstring, 4). A decision
    that holds one term of the question (`one_term`: such claims' rowids), or of a record
    short of the coverage (not `judged`), is not promoted: it ranks as the extracted claim it
    is, as any other passing mention does.

    Reads the roles of these candidates and, per record, up to `OUTCOME_CLAIMS` + 1 decision
    claims of its block: the cost follows the records among the passing sources."""
    listed = [c for found in in_records.values() for c in found]
    roles = dict(
        conn.execute(
            f"SELECT rowid, role FROM docs WHERE rowid IN ({rowid_list(c.rowid for c in listed)})"
        )
    )
    added: list[Candidate] = []
    for block, found in sorted(in_records.items()):
        low, high, source_id, _, _, status = blocks[block]
        for c in found:
            if status in RETIRED:
                c.tier = RETIRED_TIER
            elif (
                roles.get(c.rowid) == "decision"
                and status in IN_FORCE
                and c.rowid not in one_term
                and c.judged
            ):
                c.tier = AUTHORITY_RANK["manual"]
        outcome = [
            r
            for (r,) in conn.execute(
                "SELECT rowid FROM docs WHERE rowid BETWEEN ? AND ? AND kind = 'claim' "
                "AND role = 'decision' LIMIT ?",
                (low, high, OUTCOME_CLAIMS + 1),
            )
        ]
        have = {c.rowid for c in found}
        missing = [r for r in outcome if r not in have]
        if not missing or len(outcome) > OUTCOME_CLAIMS:
            continue
        best = min(found, key=lambda c: (c.tier, -c.score))
        tier = best.tier if status in RETIRED else min(best.tier, EXTRACTED)
        added += [
            Candidate("", source_id, best.score + OUTCOME_LEAD, None, r, tier, judged=best.judged)
            for r in missing
        ]
    return added


def ordered(
    conn: sqlite3.Connection, found: list[Candidate], first_batch: int = 16
) -> Iterator[Candidate]:
    """The candidates in order: manual claims first, then by relevance, then by ID; each with
    its claim ID and analyzed terms (`dedupe_key`) read. A claim the index has only some of
    the rows of (a damaged index) fails the query closed (`_read_ids`).

    Claims come off a heap in order of (tier, relevance), a batch at a time (batches that
    double, each ending with a whole run of ties), and their IDs are read per batch; each run
    of ties is ordered by ID. A common word's tens of thousands of candidates are never sorted
    whole, and only the few a caller walks to are read."""
    heap = [(c.tier, -round(c.score, 9), i) for i, c in enumerate(found)]
    heapq.heapify(heap)
    batch = first_batch
    while heap:
        got: list[tuple[tuple[int, float], Candidate]] = []
        while heap and (len(got) < batch or heap[0][:2] == got[-1][0]):
            tier, relevance, i = heapq.heappop(heap)
            got.append(((tier, relevance), found[i]))
        batch *= 2
        _read_ids(conn, [c for _, c in got])
        start = 0
        while start < len(got):
            end = start + 1
            while end < len(got) and got[end][0] == got[start][0]:
                end += 1
            run = sorted((c for _, c in got[start:end]), key=lambda c: c.claim_id)
            yield from run
            start = end


def _read_ids(conn: sqlite3.Connection, got: list[Candidate]) -> None:
    """Read the claim IDs, and the analyzed terms not known yet, of a batch of candidates;
    a candidate without both of its rows (a damaged index) fails the query closed."""
    ids = dict(
        conn.execute(
            f"SELECT rowid, object_id FROM docs WHERE rowid IN ({rowid_list(c.rowid for c in got)})"
        )
    )
    unread = [c.rowid for c in got if c.dedupe_key is None]
    keys = dict(
        conn.execute(f"SELECT id, c0 FROM claims_fts_content WHERE id IN ({rowid_list(unread)})")
        if unread
        else ()
    )
    for c in got:
        c.claim_id = ids.get(c.rowid, "")
        if c.dedupe_key is None:
            c.dedupe_key = keys.get(c.rowid)
        if not c.claim_id or c.dedupe_key is None:
            # The index writes and deletes a claim's rows together: one without the other is
            # a damaged index, and skipping the claim would answer as if it were not known.
            raise IntegrityError(
                f"fail closed: the index holds only part of the rows of a claim (row {c.rowid})",
                code="index_row_mismatch",
                subject=f"index row {c.rowid}",
            )


def rank(conn: sqlite3.Connection, found: list[Candidate], limit: int) -> list[Candidate]:
    """The `limit` first claims of `ordered`, one of each set of near-duplicates (the same
    analyzed terms): the plain order, with no cap per source (a bundle's items)."""
    chosen: list[Candidate] = []
    seen: set[str | None] = set()
    for c in ordered(conn, found, 4 * limit):
        key = c.dedupe_key
        if key in seen:
            continue
        seen.add(key)
        chosen.append(c)
        if len(chosen) == limit:
            break
    return chosen


def choose(
    conn: sqlite3.Connection,
    query_terms: list[str],
    limit: int,
    df: Mapping[str, int] | None = None,
) -> list[Candidate]:
    """The `limit` best claims for the question in the plain order (a bundle's: no cliff, no
    cap per source, near-duplicates dropped), with what the index says each one states
    (`df`: as `candidates` takes it)."""
    chosen = rank(conn, candidates(conn, query_terms, df), limit)
    read_statements(conn, chosen)
    return chosen


def read_statements(conn: sqlite3.Connection, chosen: list[Candidate]) -> None:
    """Fill in what the index says each chosen claim states: the hash, statement, role and
    record status that the query checks against the ledger."""
    if not chosen:
        return
    recorded = {
        rowid: fields
        for rowid, *fields in conn.execute(
            "SELECT rowid, object_hash, text, role, record_status FROM docs "
            f"WHERE rowid IN ({rowid_list(c.rowid for c in chosen)})"
        )
    }
    for c in chosen:
        c.object_hash, c.text, c.role, c.record_status = recorded[c.rowid]
