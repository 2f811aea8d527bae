"""Every page of a small ledger overwritten with garbage, one at a time (issue 34): a query
never answers other than the untampered workspace does, and neither the query nor `verify`
ever ends with `internal_error`.

The ledger is a one-generation workspace's (`tamper_kit.build_one`): about forty pages of
16 KiB, one per table and index plus a few free ones. A page that holds a table or an index
must make the query fail with the code of a damaged database (exit 6), unless the query never
reads it, and must make `verify` report the damage (`ledger_corrupt`, exit 3) or fail with that
same code: SQLite's `PRAGMA quick_check`, which verify runs first, sees a garbage B-tree page.
A free page holds nothing: verify may pass. Each case looks its page's owner up (SQLite's
`dbstat`) to tell the two apart.
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


@pytest.mark.parametrize("page", range(1, PAGES + 1))
def test_query_on_a_garbage_page(sweep: Sweep, page: int, tmp_path: Path) -> None:
    ws, owner = damaged(sweep, page, tmp_path)
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
def test_verify_on_a_garbage_page(sweep: Sweep, page: int, tmp_path: Path) -> None:
    ws, owner = damaged(sweep, page, tmp_path)
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
