"""Staging: the new generation's states, written ahead in temporary tables, made real at once.

A cold ingest of 50,000 files makes millions of claim states; holding them in memory until the
head moves would need gigabytes. Instead, ingest holds one ledger connection for its whole run
and stages each source's new claim states in TEMPORARY tables as the files stream in. The final
transaction turns them into generation rows with set-based SQL (the same on SQLite and
PostgreSQL), in the same transaction as the head move. Temporary tables belong to the
connection: a crash leaves nothing to clean up.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from ..canonical import canonical_json
from ..model.generation import ClaimState, SourceState
from ..storage.db import Ledger, _translate, insert_rows
from .state import chunks

COMMIT_EVERY = 10  # `batch` calls per ledger transaction

_SCHEMA = (
    "CREATE TEMPORARY TABLE pending_claims (claim_id VARCHAR(36) NOT NULL, "
    "source_id VARCHAR(36) NOT NULL, status VARCHAR(16) NOT NULL, claim_hash VARCHAR(64) NOT NULL, "
    "evidence_ids TEXT NOT NULL)",
    "CREATE TEMPORARY TABLE pending_sources (source_id VARCHAR(36) PRIMARY KEY, "
    "revision_id VARCHAR(36), normalization_id VARCHAR(36), digest VARCHAR(64), removed INTEGER NOT NULL)",
)
# Built when the first lookup needs them (the manual layer, the final apply): one sort over
# the staged claims costs less than keeping two indexes in order through every insert.
_INDEXES = (
    "CREATE INDEX IF NOT EXISTS pending_claims_source ON pending_claims (source_id)",
    "CREATE INDEX IF NOT EXISTS pending_claims_claim ON pending_claims (claim_id)",
)


class Staging:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        if conn.dialect.name == "sqlite":
            # Ingest inserts rows keyed by hashes, all over every index: a page cache of 128 MiB
            # (instead of 2) keeps many of their pages in memory for the run. (256 MiB: 10,000
            # files in 77 s instead of 83 s at 64 MiB, but 916 MiB peak RSS at 50,000 files.)
            conn.exec_driver_sql("PRAGMA cache_size=-131072")
        # The batches before the final transaction write immutable rows nothing refers to yet:
        # losing the last of them to a power cut is harmless, so their commits do not wait for
        # the disk (`batch`). The final transaction (`transaction(final=True)`) waits, and with
        # it everything written before (both logs are sequential). With SQLite only in WAL
        # mode: NORMAL in a rollback journal can corrupt on power loss.
        self._wal = (
            conn.dialect.name == "sqlite"
            and conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        )
        self._set_synchronous("NORMAL")
        self._staged: set[str] = set()  # sources with claims in pending_claims
        self._indexed = False
        self._batches = 0
        for statement in _SCHEMA:
            conn.exec_driver_sql(statement)
        conn.commit()

    def _lookups(self) -> None:
        if not self._indexed:
            for statement in _INDEXES:
                self.conn.exec_driver_sql(statement)
            self._indexed = True

    def _set_synchronous(self, level: str) -> None:
        if self._wal:
            self.commit()  # the pragma cannot change inside a transaction
            self.conn.exec_driver_sql(f"PRAGMA synchronous={level}")
            self.conn.commit()

    def close(self) -> None:
        """Leave the connection as it was found (it may go back to a pool)."""
        with contextlib.suppress(SQLAlchemyError):
            self._set_synchronous("FULL")

    @contextmanager
    def batch(self) -> Iterator[Connection]:
        """Writes that share one transaction with the batches around them, committed every
        COMMIT_EVERY batches (and by `commit()` or the next `transaction()`): a batch's rows
        land on pages all over every index (their keys are hashes), so each commit rewrites
        most of the index pages; fewer commits write them fewer times."""
        if not self.conn.in_transaction():
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
            raise _translate(exc) from exc
        except BaseException:
            self.conn.rollback()
            raise

    def commit(self) -> None:
        """Commit what `batch` left open, so other connections (the ledger readers) see it."""
        if self.conn.in_transaction():
            try:
                self.conn.commit()
            except OperationalError as exc:
                raise _translate(exc) from exc

    @contextmanager
    def transaction(self, *, final: bool = False) -> Iterator[Connection]:
        """A transaction; `final=True` for the one that moves the head: it commits only once
        it is on disk, with every earlier one."""
        # Reads (claims_of, owners) and `batch` leave a transaction open: end it.
        self.commit()
        if final:
            self._set_synchronous("FULL")
        try:
            with self.conn.begin():
                yield self.conn
        except OperationalError as exc:
            raise _translate(exc) from exc

    def put_claims(self, source_id: str, claims: Sequence[tuple[Any, ...]]) -> None:
        """Replace the staged claims of one source (within the caller's transaction); each a
        `ClaimState` or the same fields as a plain tuple."""
        if source_id in self._staged:
            self._lookups()
            self.conn.execute(
                text("DELETE FROM pending_claims WHERE source_id = :s"), {"s": source_id}
            )
        self._staged.add(source_id)
        insert_rows(
            self.conn,
            "pending_claims",
            ("claim_id", "source_id", "status", "claim_hash", "evidence_ids"),
            [
                (claim_id, sid, status, digest, canonical_json(sorted(evidence)).decode("utf-8"))
                for claim_id, sid, status, digest, evidence in claims
            ],
        )

    def claims_of(self, source_id: str) -> tuple[ClaimState, ...]:
        self._lookups()
        rows = self.conn.execute(
            text(
                "SELECT claim_id, source_id, status, claim_hash, evidence_ids FROM pending_claims "
                "WHERE source_id = :s ORDER BY claim_id"
            ),
            {"s": source_id},
        )
        return tuple(ClaimState(r[0], r[1], r[2], r[3], tuple(json.loads(r[4]))) for r in rows)

    def owners(self, claim_ids: Iterable[str]) -> dict[str, str]:
        self._lookups()
        out: dict[str, str] = {}
        for part in chunks(sorted(set(claim_ids))):
            marks = ", ".join(f":c{i}" for i in range(len(part)))
            for cid, sid in self.conn.execute(
                text(f"SELECT claim_id, source_id FROM pending_claims WHERE claim_id IN ({marks})"),
                {f"c{i}": c for i, c in enumerate(part)},
            ):
                out[cid] = sid
        return out

    def put_sources(self, changed: Iterable[SourceState], removed: Iterable[str]) -> None:
        rows = [
            {"s": s.source_id, "r": s.revision_id, "n": s.normalization_id, "d": s.digest, "x": 0}
            for s in changed
        ] + [{"s": sid, "r": None, "n": None, "d": None, "x": 1} for sid in removed]
        for part in chunks(rows, 5000):
            self.conn.execute(
                text("INSERT INTO pending_sources VALUES (:s, :r, :n, :d, :x)"), list(part)
            )

    def apply(self, number: int) -> tuple[int, int, int]:
        """Close and open the state intervals of the staged sources for generation `number`.

        Returns (claims added, claims removed, claims whose state changed), counted by claim
        as `diff` counts them. Runs inside the caller's transaction.
        """
        self._lookups()
        n = {"n": number}
        touched = "SELECT source_id FROM pending_sources"
        kept = "SELECT source_id FROM pending_sources WHERE removed = 0"
        added_ids = self.conn.execute(
            text(
                f"SELECT count(DISTINCT p.claim_id) FROM pending_claims p WHERE p.source_id IN ({kept}) "
                "AND NOT EXISTS (SELECT 1 FROM claim_states c WHERE c.claim_id = p.claim_id "
                "AND c.gen_to IS NULL)"
            )
        ).scalar_one()
        removed_ids = self.conn.execute(
            text(
                "SELECT count(*) FROM claim_states c WHERE c.gen_to IS NULL "
                f"AND c.source_id IN ({touched}) AND NOT EXISTS (SELECT 1 FROM pending_claims p "
                f"WHERE p.claim_id = c.claim_id AND p.source_id IN ({kept}))"
            )
        ).scalar_one()
        self.conn.execute(
            text(
                f"UPDATE source_states SET gen_to = :n WHERE gen_to IS NULL AND source_id IN ({touched})"
            ),
            n,
        )
        self.conn.execute(
            text(
                "INSERT INTO source_states (source_id, revision_id, normalization_id, digest, gen_from, gen_to) "
                "SELECT source_id, revision_id, normalization_id, digest, :n, NULL FROM pending_sources "
                "WHERE removed = 0"
            ),
            n,
        )
        # A claim state that stays the same (same claim, same hash) keeps its open interval.
        removed = self.conn.execute(
            text(
                f"UPDATE claim_states SET gen_to = :n WHERE gen_to IS NULL AND source_id IN ({touched}) "
                "AND NOT EXISTS (SELECT 1 FROM pending_claims p WHERE p.claim_id = claim_states.claim_id "
                "AND p.claim_hash = claim_states.claim_hash AND p.source_id IN "
                "(SELECT source_id FROM pending_sources WHERE removed = 0))"
            ),
            n,
        ).rowcount
        self.conn.execute(
            text(
                "INSERT INTO claim_states (claim_id, source_id, status, claim_hash, evidence_ids, gen_from, gen_to) "
                "SELECT p.claim_id, p.source_id, p.status, p.claim_hash, p.evidence_ids, :n, NULL "
                "FROM pending_claims p WHERE p.source_id IN "
                "(SELECT source_id FROM pending_sources WHERE removed = 0) "
                "AND NOT EXISTS (SELECT 1 FROM claim_states c WHERE c.claim_id = p.claim_id "
                "AND c.claim_hash = p.claim_hash AND c.gen_to IS NULL)"
            ),
            n,
        )
        return int(added_ids), int(removed_ids), int(removed - removed_ids)


@contextmanager
def staging(ledger: Ledger) -> Iterator[Staging]:
    with ledger.engine.connect() as conn:
        stage = Staging(conn)
        try:
            yield stage
        finally:
            stage.close()
