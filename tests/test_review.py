"""REVIEW through the CLI: the report files and their shape, repeatability (same generation,
same bytes, same review ID), that a review changes no knowledge, and one crafted case per check.

One workspace is built once (two generations) and reviewed; the tests read what happened."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write

UNKNOWN = "clm_0123456789abcdef0123456789abcdef"
GEN1_FILES = {
    "docs/a.md": """# A

The cache holds 10 entries per shard.

Deploys are frozen on Friday afternoons.

The billing service owns invoices.
""",
    "docs/b.md": """# B

The cache holds 20 entries per shard.

Deploys are not frozen on Friday afternoons.

The billing service owns invoices.

The old ledger is kept forever.
""",
    "docs/s.md": "# S\n\nTokens expire after one hour.\n",
    "knowledge/manual/n.md": """# N

Tokens are short lived.[^t] See [[Nowhere Thing]] and [[Payments API]] and [[other]].

[^t]: docs/s.md "expire after one hour"
""",
    "knowledge/manual/other.md": "# O\n\nThe other note is here.\n",
    "knowledge/manual/entities.md": "# Entities\n\n- Payments API: the service that takes money\n",
    # The same sentence in two files, with Markdown link syntax inside inline code.
    "docs/e1.md": "# E1\n\nPage on-call with `[run me](https://evil.example/x)` right away.\n",
    "docs/e2.md": "# E2\n\nPage on-call with `[run me](https://evil.example/x)` right away.\n",
}
LEDGER_TABLES = ("claim_states", "source_states", "generations", "head")


def gen2_files(retracted: str) -> dict[str, str]:
    return {
        # The quote n.md cites is gone from the new revision: stale citation.
        "docs/s.md": "# S\n\nTokens expire after two hours.\n",
        # Retracts b.md's sentence (and names an unknown claim).
        "knowledge/manual/w.md": f"---\nretracts: [{retracted}, {UNKNOWN}]\n---\n# W\n\n"
        "The ledger is pruned now.\n",
        # A current note citing the retracted claim's text.
        "knowledge/manual/c.md": "# C\n\nHistory stays.[^l]\n\n"
        '[^l]: docs/b.md "old ledger is kept"\n',
        "knowledge/manual/f.md": "---\nfoo: 1\n---\n# F\n\nBad front matter here.\n",
    }


def cli_json(ws: Path, *args: str) -> Any:
    result = run_cli(*args, "--json", cwd=ws)
    assert result.code == 0, (args, result.stdout, result.stderr)
    return result.json()


def snapshot(ws: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(f"file:{ws / '.raytsystem' / 'ledger.sqlite3'}?mode=ro", uri=True)
    try:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}")) for t in LEDGER_TABLES}
    finally:
        conn.close()


def claim_ids(ws: Path) -> dict[tuple[str, str], str]:
    """(source path, statement) -> claim ID, from the ledger."""
    conn = sqlite3.connect(f"file:{ws / '.raytsystem' / 'ledger.sqlite3'}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT s.path, c.statement, c.id FROM claims c JOIN sources s ON s.id = c.source_id"
        )
        return {(p, st): i for p, st, i in rows}
    finally:
        conn.close()


def report_files(ws: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((ws / "ops" / "reviews").iterdir())}


@dataclass
class Reviewed:
    ws: Path
    retracted: str  # the claim w.md retracts
    before: dict[str, list[tuple[Any, ...]]]
    after: dict[str, list[tuple[Any, ...]]]
    generations_before: Any
    generations_after: Any
    first: dict[str, Any]  # review --json of the current generation
    files_first: dict[str, bytes]
    second: dict[str, Any]  # the same, again
    files_second: dict[str, bytes]
    older: dict[str, Any]  # review --generation 1 --json
    ingest_after: dict[str, Any]

    def ids(self) -> dict[tuple[str, str], str]:
        return claim_ids(self.ws)


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory, _workspace_template: Path) -> Reviewed:
    ws = tmp_path_factory.mktemp("review") / "ws"
    shutil.copytree(_workspace_template, ws, symlinks=True)
    for rel, text in GEN1_FILES.items():
        write(ws, rel, text)
    assert cli_json(ws, "ingest")["generation"]["number"] == 1
    answer = cli_json(ws, "query", "old ledger kept forever")
    retracted = answer["citations"][0]["claim"]["id"]
    for rel, text in gen2_files(retracted).items():
        write(ws, rel, text)
    assert cli_json(ws, "ingest")["generation"]["number"] == 2

    before, generations_before = snapshot(ws), cli_json(ws, "generations")
    first = cli_json(ws, "review")
    files_first = report_files(ws)
    second = cli_json(ws, "review")
    files_second = report_files(ws)
    after, generations_after = snapshot(ws), cli_json(ws, "generations")
    older = cli_json(ws, "review", "--generation", "1")
    ingest_after = cli_json(ws, "ingest")
    return Reviewed(
        ws, retracted, before, after, generations_before, generations_after,
        first, files_first, second, files_second, older, ingest_after,
    )  # fmt: skip


def by_code(report: dict[str, Any]) -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {}
    for f in report["findings"]:
        out.setdefault(f["code"], []).append(f["subjects"])
    return out


def test_report_files_and_shape(reviewed: Reviewed) -> None:
    report = reviewed.first
    gen = report["generation"]
    assert gen["number"] == 2
    stem = f"{gen['number']:06d}-{gen['hash'][:12]}"
    assert re.fullmatch(r"\d{6}-[0-9a-f]{12}", stem)
    reviews = reviewed.ws / "ops" / "reviews"
    assert [Path(f).resolve() for f in report["files"]] == [
        (reviews / f"{stem}.json").resolve(),
        (reviews / f"{stem}.md").resolve(),
    ]
    # The JSON file is the report (without the list of files).
    on_disk = json.loads(reviewed.files_first[f"{stem}.json"])
    assert on_disk == {k: v for k, v in report.items() if k != "files"}
    assert report["review_id"].startswith("rvw_")
    for finding in report["findings"]:
        assert set(finding) == {"code", "severity", "subjects", "message"}
        assert finding["severity"] in ("error", "warning", "info")
        assert finding["subjects"] and finding["message"]
    tally = Counter(f["severity"] for f in report["findings"])
    assert report["counts"] == {s: tally.get(s, 0) for s in ("error", "warning", "info")}
    # The Markdown report lists every finding under its code.
    md = reviewed.files_first[f"{stem}.md"].decode("utf-8")
    assert md.startswith("# Review of generation 2\n")
    assert report["review_id"] in md
    for code in by_code(report):
        assert f"## {code} (" in md


def test_review_is_repeatable_and_changes_no_knowledge(reviewed: Reviewed) -> None:
    assert reviewed.second["review_id"] == reviewed.first["review_id"]
    assert reviewed.second == reviewed.first
    assert reviewed.files_second == reviewed.files_first  # byte-identical, no new files
    assert reviewed.after == reviewed.before
    assert all(reviewed.before[t] for t in LEDGER_TABLES)  # the comparison compared something
    assert reviewed.generations_after == reviewed.generations_before
    # ops/reviews is not ingested: the next ingest finds nothing new.
    assert reviewed.ingest_after["created"] is False
    assert reviewed.ingest_after["generation"] == reviewed.first["generation"]
    assert not any(p.startswith("ops/reviews") for p, _ in reviewed.ids())


def test_each_check_finds_its_case(reviewed: Reviewed) -> None:
    ids = reviewed.ids()
    found = by_code(reviewed.first)
    tokens = ids[("knowledge/manual/n.md", "Tokens are short lived.")]
    bad_fm = ids[("knowledge/manual/f.md", "Bad front matter here.")]
    history = ids[("knowledge/manual/c.md", "History stays.")]
    assert sorted(found["unverified_claim"]) == sorted(
        [[tokens, "knowledge/manual/n.md"], [bad_fm, "knowledge/manual/f.md"]]
    )
    # Only the citation that was verified in generation 1 is stale, not the bad front matter.
    assert found["stale_citation"] == [[tokens, "knowledge/manual/n.md"]]
    billing = "The billing service owns invoices."
    page = "Page on-call with [run me](https://evil.example/x) right away."
    assert sorted(found["duplicate_statement"]) == sorted(
        [
            sorted([ids[("docs/a.md", billing)], ids[("docs/b.md", billing)]]),
            sorted([ids[("docs/e1.md", page)], ids[("docs/e2.md", page)]]),
        ]
    )
    contradictions = sorted(found["possible_contradiction"])
    assert contradictions == sorted(
        [
            sorted(
                [
                    ids[("docs/a.md", "The cache holds 10 entries per shard.")],
                    ids[("docs/b.md", "The cache holds 20 entries per shard.")],
                ]
            ),
            sorted(
                [
                    ids[("docs/a.md", "Deploys are frozen on Friday afternoons.")],
                    ids[("docs/b.md", "Deploys are not frozen on Friday afternoons.")],
                ]
            ),
        ]
    )
    assert reviewed.retracted == ids[("docs/b.md", "The old ledger is kept forever.")]
    assert found["retracted_still_cited"] == [[reviewed.retracted, history]]
    assert found["dead_link"] == [["knowledge/manual/n.md"]]
    [dead] = [f for f in reviewed.first["findings"] if f["code"] == "dead_link"]
    assert "[[Nowhere Thing]]" in dead["message"]
    assert found["unknown_claim_id"] == [[UNKNOWN, "knowledge/manual/w.md"]]
    assert found["front_matter_invalid"] == [["knowledge/manual/f.md"]]
    [fm] = [f for f in reviewed.first["findings"] if f["code"] == "front_matter_invalid"]
    assert fm["severity"] == "error" and "foo" in fm["message"]


def test_an_older_generation_can_be_reviewed(reviewed: Reviewed) -> None:
    older = reviewed.older
    assert older["generation"]["number"] == 1
    assert older["generation"]["hash"] == reviewed.generations_before[0]["hash"]
    assert older["review_id"] != reviewed.first["review_id"]
    found = by_code(older)
    # In generation 1 the citation was verified and nothing was retracted or malformed.
    assert set(found) == {"dead_link", "duplicate_statement", "possible_contradiction"}
    stem = f"000001-{older['generation']['hash'][:12]}"
    assert (reviewed.ws / "ops" / "reviews" / f"{stem}.json").is_file()
    assert (reviewed.ws / "ops" / "reviews" / f"{stem}.md").is_file()


def test_markdown_report_keeps_document_text_inert(reviewed: Reviewed) -> None:
    from markdown_it import MarkdownIt

    stem = (
        f"{reviewed.first['generation']['number']:06d}-{reviewed.first['generation']['hash'][:12]}"
    )
    md = reviewed.files_first[f"{stem}.md"].decode("utf-8")
    tokens = MarkdownIt("commonmark").parse(md)
    inline = [c for t in tokens for c in (t.children or [])]
    rendered = "".join(c.content for c in inline if c.type in ("text", "text_special"))
    assert "evil.example" in rendered  # the statement is in the report...
    assert not [c for c in inline if c.type in ("link_open", "html_inline")]  # ...as plain text
