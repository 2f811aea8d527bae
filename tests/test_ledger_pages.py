"""Every page of a small ledger overwritten with garbage, one at a time (issue 34): a query
never answers other than the untampered workspace does, and neither the query nor `verify`
ever ends with `internal_error`.

The ledger is a one-generation workspace's (`tamper_kit.build_one`): about forty pages of
16 KiB, one per table and index plus a few free ones. A page that holds a table or an index
must make the query fail with the code of a damaged database (exit 6), unless the query never
reads it, and must make `verify` report the damage (`ledger_corrupt`, exit 3) or fail with that
same code: `PRAGMA integrity_check` sees a garbage B-tree page. A free page holds nothing:
verify may pass.

Which pages fail today depends on what they hold, so each case looks its page's owner up
(SQLite's `dbstat`) and marks itself as a strict expected failure from the tables below.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from tamper_kit import (
    EXIT,
    SQLITE,
    build_one,
    copy_of,
    error_code,
    ledger,
    no_internal_error,
    verify_codes,
    without_timing,
)
from test_tamper import overwrite_page

QUESTION = "refunds business days"
# Pages swept: more than the ledger has (a guard test says when it outgrows them).
PAGES = 39
PAGE_SIZE = 16384
DAMAGED = "database_corrupt"  # the one code of a damaged ledger (tamper_kit.EXIT)

# The B-trees whose damage ends a query with internal_error today (the others it never reads).
QUERY_FAILS_TODAY = {
    "sqlite_schema",
    "alembic_version",
    "settings",
    "sqlite_autoindex_settings_1",
    "sources",
    "sqlite_autoindex_sources_1",
    "revisions",
    "sqlite_autoindex_revisions_1",
    "normalizations",
    "sqlite_autoindex_normalizations_1",
    "segments",
    "sqlite_autoindex_segments_1",
    "claims",
    "sqlite_autoindex_claims_1",
    "evidence",
    "sqlite_autoindex_evidence_1",
    "generations",
    "sqlite_autoindex_generations_1",
    "head",
    "sqlite_autoindex_head_1",
    "claim_states",
    "ix_claim_states_source",
    "sqlite_autoindex_generations_2",
    "source_states",
    "ix_source_states_source",
}


class Sweep:
    def __init__(self, template: Path) -> None:
        self.template = template
        conn = sqlite3.connect(ledger(template))
        try:
            self.page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            self.pages = conn.execute("PRAGMA page_count").fetchone()[0]
            self.owner = {
                page: name for name, page in conn.execute("SELECT name, pageno FROM dbstat")
            }
        finally:
            conn.close()
        answer = run_cli("query", QUESTION, "--json", cwd=template, env=SQLITE)
        assert answer.code == 0 and answer.json()["status"] == "answered", answer.stdout
        self.answer = answer.json()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, _workspace_template: Path) -> Sweep:
    template = build_one(tmp_path_factory.mktemp("pages") / "ws", _workspace_template)
    # Every committed page is in the file itself, none only in a write-ahead log.
    assert not ledger(template).with_name("ledger.sqlite3-wal").exists()
    return Sweep(template)


def test_the_ledger_is_small_and_of_16_kib_pages(sweep: Sweep) -> None:
    assert sweep.page_size == PAGE_SIZE
    assert 30 <= sweep.pages <= PAGES, f"sweep {sweep.pages} pages: raise PAGES"


def damaged(sweep: Sweep, page: int, tmp_path: Path) -> tuple[Path, str | None]:
    """A copy of the template with `page` overwritten; the page's owner (None: free)."""
    if page > sweep.pages:
        pytest.skip(f"the ledger has {sweep.pages} pages")
    ws = copy_of(sweep.template, tmp_path / "ws")
    overwrite_page(ledger(ws), page)
    return ws, sweep.owner.get(page)


def expect_failure(request: pytest.FixtureRequest, reason: str) -> None:
    request.applymarker(pytest.mark.xfail(strict=True, reason=f"issue 34: {reason}"))


@pytest.mark.parametrize("page", range(1, PAGES + 1))
def test_query_on_a_garbage_page(
    sweep: Sweep, page: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    ws, owner = damaged(sweep, page, tmp_path)
    if owner in QUERY_FAILS_TODAY:
        expect_failure(request, f"a garbage page of {owner}: the query ends with internal_error")
    result = run_cli("query", QUESTION, "--json", cwd=ws, env=SQLITE)
    no_internal_error(result)
    if result.code == 0:
        assert without_timing(result.json()) == without_timing(sweep.answer), (
            f"page {page} ({owner}) overwritten: answered otherwise"
        )
        return
    assert error_code(result) == DAMAGED, (page, owner, result.stdout)
    assert result.code == EXIT[DAMAGED]


@pytest.mark.parametrize("page", range(1, PAGES + 1))
def test_verify_on_a_garbage_page(
    sweep: Sweep, page: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    ws, owner = damaged(sweep, page, tmp_path)
    if owner is not None:
        expect_failure(
            request,
            f"a garbage page of {owner}: verify ends with internal_error, database_error or "
            "no_ledger (SQLAlchemy's message), or passes: it runs no integrity check",
        )
    result = run_cli("verify", "--json", cwd=ws, env=SQLITE)
    no_internal_error(result)
    check_verify(result, owner)


def check_verify(result: Any, owner: str | None) -> None:
    code = error_code(result)
    if code is not None:
        assert code == DAMAGED and result.code == EXIT[DAMAGED], result.stdout
        return
    found, body = verify_codes(result)
    if owner is None:  # a free page: nothing to report, but a damaged free list may be
        assert found <= {"ledger_corrupt"}, body["findings"]
        return
    assert result.code == 3 and "ledger_corrupt" in found, body["findings"]
