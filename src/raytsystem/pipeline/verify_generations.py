"""VERIFY's replay of the generations, oldest first: each source state's digest is recomputed
from the claims active with it, each manifest from the active source digests, each generation
hash from (number, parent, manifest); each parent link and the head are checked.

Memory follows what one generation changed: the source states are held (one small row per
source and change), the claim states are read back per generation, only for the sources it
touched.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..model.generation import generation_hash, manifest_digest, source_digest
from ..storage import generations, integrity
from ..storage import states as state
from ..storage.integrity import ChainLink, SourceStateRow
from .verify_report import VerifyReport

if TYPE_CHECKING:
    from sqlalchemy import Connection


def _by_interval(
    rows: Iterable[SourceStateRow],
) -> tuple[dict[int, list[SourceStateRow]], dict[int, list[SourceStateRow]]]:
    """State rows by the generation that opened them and the one that closed them."""
    opened: dict[int, list[SourceStateRow]] = defaultdict(list)
    closed: dict[int, list[SourceStateRow]] = defaultdict(list)
    for row in rows:
        opened[row.gen_from].append(row)
        if row.gen_to is not None:
            closed[row.gen_to].append(row)
    return opened, closed


def _claims_touched(conn: Connection, last: int) -> tuple[dict[int, set[str]], int]:
    """Which sources' claims each generation opened or closed, and how many claim states lie
    past generation `last`, the newest."""
    touched: dict[int, set[str]] = defaultdict(set)
    ahead = 0
    for source_id, gen_from, gen_to in integrity.claim_state_spans(conn):
        touched[gen_from].add(source_id)
        if gen_to is not None:
            touched[gen_to].add(source_id)
        # States an ingest writes ahead for the generation it is making (staging.py): past
        # the newest generation, they are what an interrupted ingest left.
        ahead += gen_from > last
    return touched, ahead


@dataclass
class _Change:
    """What replaying one generation found it changed, to compare with what its row says."""

    touched: set[str]  # sources whose state or claims it opened or closed
    added: set[str] = field(default_factory=set)  # sources
    changed: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    claims_added: int = 0
    claims_removed: int = 0
    claims_changed: int = 0


class _Replay:
    """The active source states as the generations are replayed in order, and what each
    generation changed: its sources' claims are read back only for those sources (memory:
    what one generation changed)."""

    def __init__(self, conn: Connection, last: int) -> None:
        self.opened, self.closed = _by_interval(integrity.source_states(conn))
        self.claims_touched, self.ahead = _claims_touched(conn, last)
        self.sources: dict[str, SourceStateRow] = {}
        self.claim_count = 0  # claims active in the generation replayed last

    def step(self, number: int) -> _Change:
        """Move to generation `number`; return what it changed of the sources."""
        was_active = set()
        for row in self.closed.get(number, []):
            current = self.sources.get(row.source_id)
            if current is not None and current.id == row.id:
                del self.sources[row.source_id]
                was_active.add(row.source_id)
        # A source removed here is touched too: none of its claims may stay active.
        change = _Change(set(self.claims_touched.pop(number, ())))
        change.touched |= {row.source_id for row in self.closed.get(number, [])}
        for row in self.opened.get(number, []):
            self.sources[row.source_id] = row
            change.touched.add(row.source_id)
            (change.changed if row.source_id in was_active else change.added).add(row.source_id)
        change.removed = was_active - change.changed
        return change


def check_generations(conn: Connection, report: VerifyReport) -> generations.GenerationRef | None:
    """Replay every generation in order and re-derive its digests and hash."""
    gens = integrity.generation_chain(conn)
    last = gens[-1].number if gens else 0
    replay = _Replay(conn, last)
    previous: ChainLink | None = None
    for link in gens:
        report.counts["generations"] += 1
        _check_link(link, previous, report)
        change = replay.step(link.number)
        _check_source_digests(conn, link.number, replay.sources, change, report)
        replay.claim_count += change.claims_added - change.claims_removed
        _check_counts(conn, link, change, len(replay.sources), replay.claim_count, report)
        got_manifest = manifest_digest({sid: row.digest for sid, row in replay.sources.items()})
        if got_manifest != link.manifest_digest:
            report.add(
                "error",
                "manifest_mismatch",
                link.hash,
                f"generation {link.number}: the manifest does not match its sources",
            )
        if generation_hash(link.number, link.parent_hash, link.manifest_digest) != link.hash:
            report.add(
                "error",
                "generation_hash_mismatch",
                link.hash,
                f"generation {link.number} does not hash to its recorded hash",
            )
        previous = link
    pointer = integrity.head_pointer(conn)
    if gens and (pointer is None or previous is None or pointer != previous.hash):
        report.add(
            "error", "head_mismatch", "head", "the head does not point at the newest generation"
        )
    if replay.ahead:
        report.add(
            "info",
            "interrupted_ingest",
            "ledger",
            f"{replay.ahead} claim states were written for generation {last + 1}, which was "
            "never made (an ingest was interrupted, or is running now): the next ingest removes "
            "them",
        )
    return generations.head(conn)


def _check_link(link: ChainLink, previous: ChainLink | None, report: VerifyReport) -> None:
    expected_number = 1 if previous is None else previous.number + 1
    if link.number != expected_number or link.parent_hash != (previous.hash if previous else None):
        report.add(
            "error",
            "chain_broken",
            link.hash,
            f"generation {link.number} does not follow generation {expected_number - 1}",
        )


def _check_source_digests(
    conn: Connection,
    number: int,
    sources: dict[str, SourceStateRow],
    change: _Change,
    report: VerifyReport,
) -> None:
    """Each touched source's digest, recomputed from the claims active with it in generation
    `number`; a source no longer active has no active claims. Counts the claims the
    generation added, removed and changed into `change` (by claim, as `ingest` counts them:
    a claim whose state closed and opened again with another hash changed)."""
    for part in state.chunks(sorted(change.touched)):
        claims_of = integrity.claims_active(conn, number, part)
        closed = integrity.claims_closed(conn, number, part)
        opened = {
            c.state.claim_id: c.state.claim_hash
            for states in claims_of.values()
            for c in states
            if c.gen_from == number
        }
        change.claims_added += len(opened.keys() - closed.keys())
        change.claims_removed += len(closed.keys() - opened.keys())
        change.claims_changed += sum(1 for c, h in opened.items() if closed.get(c, h) != h)
        for sid in part:
            if sid not in sources:
                if claims_of.get(sid):
                    report.add(
                        "error",
                        "source_digest_mismatch",
                        sid,
                        f"claims of a removed source stay active in generation {number}",
                    )
                continue
            row = sources[sid]
            got = source_digest(
                sid,
                row.revision_id,
                row.normalization_id,
                [c.state for c in claims_of.get(sid, [])],
            )
            if got != row.digest:
                report.add(
                    "error",
                    "source_digest_mismatch",
                    sid,
                    f"source {sid} in generation {number}: its digest does not match its claims",
                )


def _check_counts(
    conn: Connection,
    link: ChainLink,
    change: _Change,
    sources: int,
    claims: int,
    report: VerifyReport,
) -> None:
    """A generation's recorded source and claim counts and summary against the replay's."""
    from .ingest import SUMMARY_PATHS  # how many paths a summary lists

    recorded = integrity.generation_counts(conn, link.number)
    if recorded is None:
        return  # the generation's row went since the chain was read
    paths = integrity.source_paths(conn, sorted(change.added | change.removed))
    summary = {
        "sources_added": len(change.added),
        "sources_changed": len(change.changed),
        "sources_removed": len(change.removed),
        "sources_added_paths": sorted(paths.get(s, s) for s in change.added)[:SUMMARY_PATHS],
        "sources_removed_paths": sorted(paths.get(s, s) for s in change.removed)[:SUMMARY_PATHS],
        "claims_added": change.claims_added,
        "claims_removed": change.claims_removed,
        "claims_changed": change.claims_changed,
    }
    wrong = []
    if recorded.source_count != sources:
        wrong.append(f"{recorded.source_count} sources, the replay finds {sources}")
    if recorded.claim_count != claims:
        wrong.append(f"{recorded.claim_count} claims, the replay finds {claims}")
    try:
        said = json.loads(recorded.summary)
    except ValueError:
        said = None
    if said != summary:
        differ = (
            sorted(k for k in summary.keys() | said.keys() if said.get(k) != summary.get(k))
            if isinstance(said, dict)
            else ["its JSON"]
        )
        wrong.append(f"a summary whose {', '.join(differ)} the replay does not find")
    if wrong:
        report.add(
            "error",
            "generation_counts_mismatch",
            link.hash,
            f"generation {link.number} records {'; '.join(wrong)}",
        )
