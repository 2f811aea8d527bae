"""Staging (storage/staging.py): claim states written ahead of their generation, on a real
ledger (SQLite, and PostgreSQL when RAYTSYSTEM_TEST_PG_URL is set).

Ingest writes a generation's claim states as the files stream in, opened at the number the
generation will have; only the final transaction closes what they replace. These tests drive
one source through the staging calls ingest makes and read the rows back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Backend
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from raytsystem.model.generation import SourceState
from raytsystem.storage import states as state
from raytsystem.storage.db import Ledger, insert_rows, open_ledger, sqlite_url
from raytsystem.storage.staging import Staging, staging, state_evidence

SOURCE = "src_" + "a" * 32
OTHER = "src_" + "b" * 32
REVISION = {SOURCE: "rev_" + "a" * 32, OTHER: "rev_" + "b" * 32}


def _claim(n: int) -> str:
    return f"clm_{n:032x}"


def _row(n: int, digest: str, source: str = SOURCE) -> tuple[str, str, str, str, str]:
    return (_claim(n), source, "confirmed", digest * 64, state_evidence([f"evd_{n:032x}"]))


@pytest.fixture
def ledger(tmp_path: Path, backend: Backend) -> Iterator[Ledger]:
    opened = open_ledger(backend.url or sqlite_url(tmp_path / "ledger.sqlite3"))
    with opened.transaction() as conn:
        insert_rows(
            conn,
            "sources",
            ("id", "path", "first_seen_at"),
            [(SOURCE, "docs/a.md", "t"), (OTHER, "docs/b.md", "t")],
        )
        insert_rows(
            conn,
            "revisions",
            ("id", "source_id", "blob", "size", "media_type", "first_seen_at"),
            [(REVISION[s], s, s[-1] * 64, 1, "text/markdown", "t") for s in (SOURCE, OTHER)],
        )
        insert_rows(
            conn,
            "claims",
            ("id", "source_id", "authority", "statement", "occurrence"),
            [(_claim(n), OTHER if n >= 50 else SOURCE, "extracted", f"s{n}", 0) for n in range(60)],
        )
    yield opened
    opened.close()


def _states(ledger: Ledger) -> list[tuple[str, str, int, int | None]]:
    with ledger.reading() as conn:
        rows = conn.execute(
            text("SELECT claim_id, claim_hash, gen_from, gen_to FROM claim_states ORDER BY id")
        ).all()
    # The last two hex digits of each claim ID (claim 50 is ...32), the first of its hash.
    return [(cid[-2:], digest[0], gen_from, gen_to) for cid, digest, gen_from, gen_to in rows]


def _finish(stage: Staging, changed: list[str]) -> tuple[int, int, int]:
    """What ingest's final transaction does with the states (the head move aside)."""
    with stage.transaction(final=True):
        stage.keep_only(changed)
        stage.put_sources(
            [SourceState(s, "", REVISION[s], None, "d" * 64, ()) for s in changed], ()
        )
        return stage.apply()


def _generation_one(ledger: Ledger) -> None:
    """Claims 1 and 2 of SOURCE, active from generation 1, as a finished ingest leaves them."""
    with staging(ledger) as stage:
        stage.start(1)
        with stage.batch():
            stage.put_rows(SOURCE, [_row(1, "a"), _row(2, "a")], had_states=False)
        assert _finish(stage, [SOURCE]) == (2, 0, 0)


def test_transactions_after_a_batch_check_references_again(ledger: Ledger) -> None:
    # A batch's rows go in without SQLite's foreign-key checks (the ingest checks them in
    # memory); every other write of the ingest's connection is checked by the database.
    dangling = [(_claim(999), SOURCE, "confirmed", "a" * 64, "[]", 1)]
    columns = ("claim_id", "source_id", "status", "claim_hash", "evidence_ids", "gen_from")
    with staging(ledger) as stage:
        stage.start(1)
        with stage.batch():
            stage.put_rows(SOURCE, [_row(1, "a")], had_states=False)
        with pytest.raises(IntegrityError), stage.transaction() as conn:
            insert_rows(conn, "claim_states", columns, dangling)
        with stage.transaction(final=True):
            stage.keep_only([SOURCE])
    with pytest.raises(IntegrityError), ledger.transaction() as conn:
        insert_rows(conn, "claim_states", columns, dangling)


def test_states_put_ahead_stay_out_of_the_parent_generation(ledger: Ledger) -> None:
    _generation_one(ledger)
    with staging(ledger) as stage:
        stage.start(2)
        with stage.batch():
            stage.put_rows(SOURCE, [_row(1, "b"), _row(3, "b")])
        stage.commit()  # committed, as every 30 batches, and seen by other connections
        with ledger.reading() as conn:
            parent = state.claim_states(conn, 1, [SOURCE])[SOURCE]
        assert sorted((c.claim_id[-2:], c.claim_hash[0]) for _, c in parent) == [
            ("01", "a"),
            ("02", "a"),
        ]
        assert [c.claim_id[-2:] for c in stage.claims_of(SOURCE)] == ["01", "03"]
        assert stage.owners([_claim(3), _claim(2)]) == {_claim(3): SOURCE}


def test_the_final_transaction_closes_what_new_states_replace(ledger: Ledger) -> None:
    _generation_one(ledger)
    with staging(ledger) as stage:
        stage.start(2)
        with stage.batch():
            # Claim 1 keeps its hash, 2 goes, 3 is new.
            stage.put_rows(SOURCE, [_row(1, "a"), _row(3, "b")])
        assert _finish(stage, [SOURCE]) == (1, 1, 0)
    # Claim 1's state keeps its interval; its repeat at generation 2 is gone.
    assert _states(ledger) == [("01", "a", 1, None), ("02", "a", 1, 2), ("03", "b", 2, None)]


def test_a_changed_state_is_counted_once_and_replaces_the_old(ledger: Ledger) -> None:
    _generation_one(ledger)
    with staging(ledger) as stage:
        stage.start(2)
        with stage.batch():
            stage.put_rows(SOURCE, [_row(1, "c")])
        with stage.batch():  # the manual layer puts the source again: the new put wins
            stage.put_rows(SOURCE, [_row(1, "b"), _row(2, "a")])
        assert _finish(stage, [SOURCE]) == (0, 0, 1)
    assert _states(ledger) == [("01", "a", 1, 2), ("02", "a", 1, None), ("01", "b", 2, None)]


def test_states_of_sources_that_end_up_unchanged_are_not_kept(ledger: Ledger) -> None:
    _generation_one(ledger)
    with staging(ledger) as stage:
        stage.start(2)
        with stage.batch():
            stage.put_rows(SOURCE, [_row(1, "a"), _row(2, "a")])
            stage.put_rows(OTHER, [_row(50, "d", OTHER)], had_states=False)
        # SOURCE's new state is its parent state: not a change, so not in the generation.
        assert _finish(stage, [OTHER]) == (1, 0, 0)
    assert _states(ledger) == [("01", "a", 1, None), ("02", "a", 1, None), ("32", "d", 2, None)]


def test_start_removes_what_an_unfinished_ingest_left_and_only_that(ledger: Ledger) -> None:
    _generation_one(ledger)
    with staging(ledger) as stage:  # an ingest that stops after its batches were committed
        stage.start(2)
        with stage.batch():
            stage.put_rows(OTHER, [_row(n, "e", OTHER) for n in range(50, 60)], had_states=False)
        with stage.batch():
            stage.put_rows(SOURCE, [_row(n, "e") for n in range(3, 50)])
        stage.commit()
    assert len(_states(ledger)) == 2 + 57
    with staging(ledger) as stage:
        assert stage.start(2) == 57
        assert stage.start(2) == 0
    assert _states(ledger) == [("01", "a", 1, None), ("02", "a", 1, None)]


def test_reading_back_for_leftovers_steps_past_one_page(ledger: Ledger) -> None:
    """More leftovers than one read-back step (500 rows) holds."""
    with ledger.transaction() as conn:
        insert_rows(
            conn,
            "claims",
            ("id", "source_id", "authority", "statement", "occurrence"),
            [(_claim(n), SOURCE, "extracted", f"s{n}", 0) for n in range(100, 1300)],
        )
    _generation_one(ledger)
    stage: Staging
    with staging(ledger) as stage:
        stage.start(2)
        with stage.batch():
            stage.put_rows(SOURCE, [_row(n, "f") for n in range(100, 1300)])
        stage.commit()
    with staging(ledger) as stage:
        assert stage.start(2) == 1200
    assert len(_states(ledger)) == 2


@given(st.lists(st.text(), max_size=4))
def test_property_state_evidence_is_canonical_json_of_the_sorted_ids(ids: list[str]) -> None:
    from raytsystem.canonical import canonical_json

    assert state_evidence(ids) == canonical_json(sorted(ids)).decode("utf-8")
