"""Which of the ranked claims make an answer (ADR 0042): the few that answer, from distinct
sources where the question allows.

`ranking` orders the claims that may answer; this module composes the answer from that order:

1. **The relevance cliff.** A claim whose relevance is below `CLIFF` times the best claim's
   (of a record in force: a retired record's claims come last whatever their relevance) is
   not cited: a question with one good answer does not get a tail of loosely related lines.
2. **Near-duplicates merged.** A claim with the same analyzed terms as one already cited
   (the same sentence in another file, up to case, stop words and word forms), when its turn
   comes, is not a citation of its own: it travels with the kept citation as a further evidence entry, at
   most `MAX_MERGED` of them, each from a source of its own, each verified like any citation.
3. **A cap per source, as a demotion.** A source's first `per_source` claims keep their
   relevance; its k-th claim past them ranks k x `DEMOTION` lower. So another source's best
   claim comes before a source's third unless that third is clearly more relevant, and a
   source's later claims are still cited when no other source comes close (a question one
   source answers in several sentences still gets them): demoted, never dropped while
   `limit` leaves room.

Everything follows the order `ranking` gives (tier, relevance, claim ID), so the same question
on the same index gives the same claims.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from .ranking import RETIRED_TIER, Candidate, candidates, ordered, read_statements

# A source's claims past this many are demoted by `DEMOTION` each (the three constants
# measured together: bench/retrieval.md, "Composed answers").
DEFAULT_PER_SOURCE: Final = 2
MAX_PER_SOURCE: Final = 50
# What a source's k-th claim past its first `per_source` loses of relevance, times k
# (relevance runs up to 2: the source's BM25 and the claim's score, each a share of the best).
DEMOTION: Final = 0.15
# A claim below this share of the best claim's relevance is not cited.
CLIFF: Final = 0.4
# Near-duplicates merged into one citation, each from another source.
MAX_MERGED: Final = 4
# How far past the last claim cited the walk still looks for near-duplicates of the cited
# claims, in claims per citation: the same sentence in another file ranks close to it.
MERGE_LOOKAHEAD: Final = 4


def above_cliff(found: list[Candidate], cliff: float = CLIFF) -> list[Candidate]:
    """The candidates whose relevance is at least `cliff` times the best one's. A retired
    decision record's claims rank after all others whatever their relevance, so they set
    the bar only when nothing else may answer."""
    if not found:
        return found
    in_force = [c.score for c in found if c.tier != RETIRED_TIER]
    floor = cliff * max(in_force or [c.score for c in found])
    return [c for c in found if c.score >= floor]


def select(
    walk: Iterable[Candidate], limit: int, per_source: int, penalty: float = DEMOTION
) -> list[Candidate]:
    """The citations of an answer from the claims in ranked order (see the module's
    docstring): at most `limit`; a source's claims past its first `per_source` lose `penalty`
    of relevance for each claim of it taken past them; near-duplicates of a cited claim
    attached to it (`Candidate.merged`)."""
    taken: Counter[str] = Counter()

    def key(c: Candidate, order: int) -> tuple[int, float, int]:
        past = max(0, taken[c.source_id] + 1 - per_source)
        demoted = c.score - penalty * past if past else c.score
        return (c.tier, -round(demoted, 9), order)

    it = iter(walk)
    pending: list[tuple[tuple[int, float, int], Candidate]] = []
    cited: dict[str, Candidate] = {}  # analyzed terms -> the citation that states them
    chosen: list[Candidate] = []
    ahead: Candidate | None = next(it, None)
    order = 0
    while len(chosen) < limit:
        # Claims come in in ranked order; one may be picked once no claim still to come can
        # rank before it (its own relevance bounds its demoted one).
        while ahead is not None and (
            not pending or (ahead.tier, -round(ahead.score, 9), order) <= pending[0][0]
        ):
            heapq.heappush(pending, (key(ahead, order), ahead))
            order += 1
            ahead = next(it, None)
        if not pending:
            break
        was, c = heapq.heappop(pending)
        now = key(c, was[2])
        if now != was:  # its source was taken from meanwhile: it ranks lower now
            heapq.heappush(pending, (now, c))
            continue
        if c.dedupe_key in cited:  # the sentence is cited already: one more place stating it
            _merge(cited[c.dedupe_key], c)
            continue
        if c.dedupe_key is not None:
            cited[c.dedupe_key] = c
        taken[c.source_id] += 1
        chosen.append(c)
    # Near-duplicates of the cited claims that rank close below them.
    rest = [c for _, c in sorted(pending, key=lambda p: p[0])]
    for _ in range(MERGE_LOOKAHEAD * limit):
        if ahead is None:
            break
        rest.append(ahead)
        ahead = next(it, None)
    for c in rest:
        if c.dedupe_key in cited:
            _merge(cited[c.dedupe_key], c)
    return chosen


def _merge(into: Candidate, other: Candidate) -> None:
    """Attach a near-duplicate to the citation it repeats, if its source is new to it."""
    sources = {into.source_id, *(m.source_id for m in into.merged)}
    if other.source_id not in sources and len(into.merged) < MAX_MERGED:
        into.merged.append(other)


def compose_answer(
    conn: sqlite3.Connection,
    query_terms: list[str],
    limit: int,
    per_source: int,
    df: Mapping[str, int] | None = None,
    *,
    word_gaps: bool = True,
    rescore: Callable[[list[Candidate]], list[Candidate]] | None = None,
    every_source: bool = False,
) -> list[Candidate]:
    """The claims an answer cites, in order, each with its merged near-duplicates, with what
    the index says each one states (`df`, `word_gaps`: as `ranking.candidates` takes them;
    `rescore`: what changes their relevance before the cliff, `meaning.Fused.rescore`;
    `every_source`: as `ranking.candidates` takes it)."""
    found = candidates(conn, query_terms, df, word_gaps=word_gaps, every_source=every_source)
    found = above_cliff(rescore(found) if rescore and found else found)
    chosen = select(ordered(conn, found, 4 * limit), limit, per_source)
    read_statements(conn, [m for c in chosen for m in (c, *c.merged)])
    return chosen
