"""Staging: the new generation's claim states, written ahead as rows nothing sees yet.

A cold ingest of 50,000 files makes millions of claim states; holding them in memory until the
head moves would need gigabytes. Instead, ingest holds one ledger connection for its whole run
and writes each changed source's new claim states straight into `claim_states`, opened at the
generation number the ingest will make (N = head + 1), as the files stream in. Every reader
asks for the states of a generation that exists (`gen_from <= number`, and the head is at most
N - 1 until the final transaction), so these rows are invisible until the head moves to N.

The final transaction (`apply`, with the head move) closes the parent's states that the new
ones replace and removes the new rows that repeat an open state unchanged, so an unchanged
claim state keeps its interval: set-based SQL, the same on SQLite and PostgreSQL. Closing an
interval (setting `gen_to`) is still the only update the pipeline makes, and it still happens
in the transaction that moves the head.

An ingest killed before that transaction leaves rows opened at an N that never became a
generation: the next ingest, holding the same writer lock, deletes them before it writes
(`start`: they are the newest rows), and `verify` reports them until then. Which sources are
touched (changed, restated, removed) is staged in a TEMPORARY table: it belongs to the
connection, and a crash leaves nothing of it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Container, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from ..canonical import json_text
from ..model.generation import ClaimState, SourceState
from .db import Ledger, insert_rows, translate_error
from .reader import expand
from .states import chunks

COMMIT_EVERY = 30  # `batch` calls per ledger transaction
# The ingest connection's SQLite page cache. Past 10,000 files the B-trees of random IDs
# outgrow it and every insert pays for reading and rewriting pages: at 50,000 files the writer
# becomes the bottleneck. 256 MiB instead of 128: a cold ingest of 50,000 files in 222 s instead
# of 252 s, peak RSS 780 MiB instead of 645 MiB. 384 MiB looked 4-8% faster in two pairs,
# within the machine's drift, and put the writer and its worker together at the 1 GiB the
# ingest is held to (ADR 0032).
LEDGER_CACHE_MIB = 256

_SCHEMA = (
    "CREATE TEMPORARY TABLE pending_sources (source_id VARCHAR(36) PRIMARY KEY, "
    "revision_id VARCHAR(36), normalization_id VARCHAR(36), digest VARCHAR(64), "
    "removed INTEGER NOT NULL, parented INTEGER NOT NULL, index_digest VARCHAR(64))",
)
_DROP = ("DROP TABLE IF EXISTS pending_sources",)
# The columns of a claim state as `put_rows` takes it; `gen_from` is the generation staged.
_STATE_COLUMNS = ("claim_id", "source_id", "status", "claim_hash", "evidence_ids")
_PENDING_COLUMNS = (
    "source_id",
    "revision_id",
    "normalization_id",
    "digest",
    "removed",
    "parented",
    "index_digest",
)


def state_evidence(evidence_ids: Iterable[str]) -> str:
    """The `claim_states.evidence_ids` text of a state: its evidence IDs, sorted, as canonical
    JSON (part of what `verify` re-derives). Written out string by string, the same text as
    `canonical_json` of the list: ingest makes one per claim."""
    return "[" + ",".join(map(json_text, sorted(evidence_ids))) + "]"


class Staging:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        if conn.dialect.name == "sqlite":
            # Ingest inserts rows keyed by hashes, all over every index: a page cache of
            # LEDGER_CACHE_MIB (instead of 2) keeps many of their pages in memory for the run.
            conn.exec_driver_sql(f"PRAGMA cache_size=-{LEDGER_CACHE_MIB * 1024}")
        # The batches before the final transaction write rows nothing refers to yet: losing
        # the last of them to a power cut is harmless, so their commits do not wait for the
        # disk (`batch`). The final transaction (`transaction(final=True)`) waits, and with it
        # everything written before (both logs are sequential). With SQLite only in WAL mode:
        # NORMAL in a rollback journal can corrupt on power loss.
        self._wal = (
            conn.dialect.name == "sqlite"
            and conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        )
        self._set_synchronous("NORMAL")
        self._foreign_keys = True  # SQLite's checks, on as every ledger connection opens
        self.number = 0  # the generation this ingest makes; set by `start`
        self._put: set[str] = set()  # sources with claim states opened at `number`
        # Per source put: (claims added, claims removed, claims whose state changed).
        self._counts: dict[str, tuple[int, int, int]] = {}
        self._repeats: set[str] = set()  # sources with a new state equal to an open one
        self._batches = 0
        for statement in _SCHEMA:
            conn.exec_driver_sql(statement)
        conn.commit()

    def start(self, number: int) -> int:
        """Stage the states of generation `number` (the head's number + 1, read under the
        writer lock). Deletes what an ingest that did not finish wrote for it or later, and
        returns how many such rows there were.

        Claim states are only ever appended, by one writer at a time, so what an unfinished
        ingest wrote is the newest rows by ID: reading back from the last row finds them at a
        cost that follows what was left, without an index for it."""
        self.number = number
        first_left = None
        cursor = None
        with self.transaction() as conn:
            while True:
                rows = conn.execute(
                    text(
                        "SELECT id, gen_from FROM claim_states "
                        + ("" if cursor is None else "WHERE id < :c ")
                        + "ORDER BY id DESC LIMIT 500"
                    ),
                    {"c": cursor},
                ).all()
                ahead = [row_id for row_id, gen_from in rows if gen_from >= number]
                if ahead:
                    first_left = min(ahead)
                if len(ahead) < len(rows) or not rows:
                    break
                cursor = rows[-1][0]
            if first_left is None:
                return 0
            left = conn.execute(
                text("DELETE FROM claim_states WHERE id >= :i AND gen_from >= :n"),
                {"i": first_left, "n": number},
            ).rowcount
        return int(left or 0)

    def _pragma(self, statement: str) -> None:
        """Run an SQLite pragma that cannot change inside a transaction; whoever calls this
        has committed (or rolled back) what mattered, so this ends an empty one."""
        if self.conn.in_transaction():
            self.conn.commit()
        self.conn.exec_driver_sql(statement)
        self.conn.commit()

    def _set_synchronous(self, level: str) -> None:
        if self._wal:
            self._pragma(f"PRAGMA synchronous={level}")

    def _check_foreign_keys(self, on: bool) -> None:
        """SQLite's foreign-key checks on or off for this connection's next transactions.
        With PostgreSQL they always hold."""
        if self.conn.dialect.name == "sqlite" and self._foreign_keys != on:
            self._pragma(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")
            self._foreign_keys = on

    def close(self) -> None:
        """Leave the connection as it was found: it may go back to a pool (PostgreSQL), where
        a temporary table would outlive this ingest and a relaxed sync setting would too.
        What was not committed is rolled back."""
        with contextlib.suppress(SQLAlchemyError):
            self.conn.rollback()
            for statement in _DROP:
                self.conn.exec_driver_sql(statement)
            self.conn.commit()
        with contextlib.suppress(SQLAlchemyError):
            self._set_synchronous("FULL")
        with contextlib.suppress(SQLAlchemyError):
            self._check_foreign_keys(True)

    @contextmanager
    def batch(self) -> Iterator[Connection]:
        """Writes that share one transaction with the batches around them, committed every
        COMMIT_EVERY batches (and by `commit()` or the next `transaction()`): a batch's rows
        land on pages all over every index (their keys are hashes), so each commit rewrites
        most of the index pages; fewer commits write them fewer times.

        With SQLite, these transactions run without its foreign-key checks: the caller writes
        only rows whose references it has checked against the rows it writes with them
        (`ingest.check_references`), and the checks were a fifth of the ledger's insert time (a
        B-tree search in a parent table per reference). `verify` checks every reference."""
        if not self.conn.in_transaction():
            self._check_foreign_keys(False)
            self.conn.begin()
            if self.conn.dialect.name == "postgresql":
                self.conn.exec_driver_sql("SET LOCAL synchronous_commit TO off")
        try:
            yield self.conn
            self._batches += 1
            if self._batches % COMMIT_EVERY == 0:
                self.conn.commit()
        except OperationalError as exc:
            self.conn.rollback()
            raise translate_error(exc) from exc
        except BaseException:
            self.conn.rollback()
            raise

    def commit(self) -> None:
        """Commit what `batch` left open, so other connections (the ledger readers) see it."""
        if self.conn.in_transaction():
            try:
                self.conn.commit()
            except OperationalError as exc:
                raise translate_error(exc) from exc

    @contextmanager
    def transaction(self, *, final: bool = False) -> Iterator[Connection]:
        """A transaction; `final=True` for the one that moves the head: it commits only once
        it is on disk, with every earlier one."""
        # Reads (claims_of, owners) and `batch` leave a transaction open: end it.
        self.commit()
        self._check_foreign_keys(True)
        if final:
            self._set_synchronous("FULL")
        try:
            with self.conn.begin():
                yield self.conn
        except OperationalError as exc:
            raise translate_error(exc) from exc

    def put_claims(self, source_id: str, claims: Sequence[ClaimState]) -> None:
        """`put_rows` for claim states as objects (the manual layer's)."""
        self.put_rows(
            source_id,
            [
                (c.claim_id, c.source_id, c.status, c.claim_hash, state_evidence(c.evidence_ids))
                for c in claims
            ],
        )

    def put_rows(
        self, source_id: str, rows: Sequence[tuple[Any, ...]], *, had_states: bool = True
    ) -> None:
        """Set the new claim states of one source (within the caller's transaction), replacing
        any this ingest put before. Each row has the first columns of `claim_states` (claim,
        source, status, hash, evidence IDs as `state_evidence` gives them), in order.
        `had_states=False`: the source is new, so there is no parent state to compare with."""
        if source_id in self._put:
            self.conn.execute(
                text("DELETE FROM claim_states WHERE source_id = :s AND gen_from = :n"),
                {"s": source_id, "n": self.number},
            )
        self._put.add(source_id)
        insert_rows(
            self.conn, "claim_states", _STATE_COLUMNS, rows, fixed={"gen_from": self.number}
        )
        if not had_states:  # a new source: every claim is added
            self._counts[source_id] = (len(rows), 0, 0)
            self._repeats.discard(source_id)
            return
        new = {row[0]: row[3] for row in rows}
        old = self._open_states(source_id)
        self._counts[source_id] = (
            len(new.keys() - old.keys()),
            len(old.keys() - new.keys()),
            sum(1 for cid, digest in new.items() if cid in old and old[cid] != digest),
        )
        if any(old.get(cid) == digest for cid, digest in new.items()):
            self._repeats.add(source_id)
        else:
            self._repeats.discard(source_id)

    def keep_only(self, source_ids: Iterable[str]) -> None:
        """Delete the states put for any other source (within the caller's transaction): a
        source whose new state turned out the same as its parent's is not part of the new
        generation's change, and an ingest that makes no generation keeps nothing."""
        keep = set(source_ids)
        drop = sorted(self._put - keep)
        for part in chunks(drop):
            marks, params = expand("s", part)
            self.conn.execute(
                text(f"DELETE FROM claim_states WHERE gen_from = :n AND source_id IN ({marks})"),
                {"n": self.number, **params},
            )
        for sid in drop:
            self._put.discard(sid)
            self._counts.pop(sid, None)
            self._repeats.discard(sid)

    def _open_states(self, source_id: str) -> dict[str, str]:
        """claim ID -> claim hash of the source's states open before this ingest."""
        return dict(
            self.conn.execute(
                text(
                    "SELECT claim_id, claim_hash FROM claim_states "
                    "WHERE source_id = :s AND gen_to IS NULL AND gen_from < :n"
                ),
                {"s": source_id, "n": self.number},
            ).all()
        )

    def claims_of(self, source_id: str) -> tuple[ClaimState, ...]:
        rows = self.conn.execute(
            text(
                "SELECT claim_id, source_id, status, claim_hash, evidence_ids FROM claim_states "
                "WHERE source_id = :s AND gen_from = :n ORDER BY claim_id"
            ),
            {"s": source_id, "n": self.number},
        )
        return tuple(ClaimState(r[0], r[1], r[2], r[3], tuple(json.loads(r[4]))) for r in rows)

    def owners(self, claim_ids: Iterable[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for part in chunks(sorted(set(claim_ids))):
            marks, params = expand("c", part)
            for cid, sid in self.conn.execute(
                text(
                    "SELECT s.claim_id, s.source_id FROM claims c JOIN claim_states s "
                    "ON s.source_id = c.source_id AND s.claim_id = c.id "
                    f"WHERE c.id IN ({marks}) AND s.gen_from = :n"
                ),
                {"n": self.number, **params},
            ):
                out[cid] = sid
        return out

    def put_sources(
        self,
        changed: Iterable[SourceState],
        removed: Iterable[str],
        *,
        parented: Container[str] | None = None,
    ) -> None:
        """The sources the new generation changes or removes; a changed source whose claims
        were not put loses its open states. `parented`: the sources active in the parent, the
        only ones with states to close (None: any may have some). A cold ingest's sources
        have none, and `apply` then walks none of their states."""
        changed = list(changed)
        for s in changed:
            if s.source_id not in self._counts:
                self._counts[s.source_id] = (0, len(self._open_states(s.source_id)), 0)
        rows = [
            (
                s.source_id,
                s.revision_id,
                s.normalization_id,
                s.digest,
                0,
                int(parented is None or s.source_id in parented),
                s.index_digest,
            )
            for s in changed
        ] + [(sid, None, None, None, 1, 1, None) for sid in removed]
        insert_rows(self.conn, "pending_sources", _PENDING_COLUMNS, rows)

    def apply(self) -> tuple[int, int, int]:
        """Close and open the state intervals of the staged sources for generation `number`.

        Returns (claims added, claims removed, claims whose state changed), counted by claim
        as `diff` counts them. Runs inside the caller's transaction, before the head moves.
        """
        n = {"n": self.number}
        # The sources whose open states (of the parent) may close (`put_sources`: `parented`).
        touched = "SELECT source_id FROM pending_sources WHERE parented = 1"
        removed_ids = self.conn.execute(
            text(
                "SELECT count(*) FROM claim_states c WHERE c.gen_to IS NULL AND c.gen_from < :n "
                "AND c.source_id IN (SELECT source_id FROM pending_sources WHERE removed = 1)"
            ),
            n,
        ).scalar_one()
        self.conn.execute(
            text(
                f"UPDATE source_states SET gen_to = :n WHERE gen_to IS NULL AND source_id IN ({touched})"
            ),
            n,
        )
        self.conn.execute(
            text(
                "INSERT INTO source_states (source_id, revision_id, normalization_id, digest, "
                "gen_from, gen_to, index_digest) SELECT source_id, revision_id, normalization_id, "
                "digest, :n, NULL, index_digest FROM pending_sources WHERE removed = 0"
            ),
            n,
        )
        # The parent's states that a new state replaces, or whose source is gone, close; one
        # that a new state repeats unchanged (same claim, same hash) stays open, and the
        # repeat goes. Only a source restated without a new revision can repeat one: a new
        # revision gives every evidence, and so every claim hash, a new ID.
        self.conn.execute(
            text(
                "UPDATE claim_states SET gen_to = :n WHERE gen_to IS NULL AND gen_from < :n "
                f"AND source_id IN ({touched}) AND NOT EXISTS (SELECT 1 FROM claim_states x "
                "WHERE x.source_id = claim_states.source_id AND x.gen_to IS NULL "
                "AND x.claim_id = claim_states.claim_id AND x.gen_from = :n "
                "AND x.claim_hash = claim_states.claim_hash)"
            ),
            n,
        )
        for part in chunks(sorted(self._repeats)):
            marks, params = expand("s", part)
            self.conn.execute(
                text(
                    f"DELETE FROM claim_states WHERE gen_from = :n AND source_id IN ({marks}) "
                    "AND EXISTS (SELECT 1 FROM claim_states o WHERE o.source_id = claim_states.source_id "
                    "AND o.gen_to IS NULL AND o.claim_id = claim_states.claim_id AND o.gen_from < :n "
                    "AND o.claim_hash = claim_states.claim_hash)"
                ),
                {**n, **params},
            )
        added = sum(c[0] for c in self._counts.values())
        removed = sum(c[1] for c in self._counts.values()) + int(removed_ids)
        restated = sum(c[2] for c in self._counts.values())
        return added, removed, restated


@contextmanager
def staging(ledger: Ledger) -> Iterator[Staging]:
    with ledger.engine.connect() as conn:
        stage = Staging(conn)
        try:
            yield stage
        finally:
            stage.close()
