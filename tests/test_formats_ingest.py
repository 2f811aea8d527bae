"""Every format end to end (issue 36): a workspace made by `init` takes every file raytsystem
can read, wherever it is, passes over what is never knowledge (counted by reason), and a query
cites each format with its page, cell or symbol, each excerpt checked with hashlib."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write

from raytsystem.api import Session

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
SQLITE = {"RAYTSYSTEM_DATABASE_URL": ""}


def ok(ws: Path, *args: str) -> Any:
    result = run_cli(*args, "--json", cwd=ws, env=SQLITE)
    assert result.code == 0, (args, result.stdout, result.stderr)
    return result.json()


@pytest.fixture(scope="module")
def every_format(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("formats") / "ws"
    ws.mkdir()
    assert run_cli("init", cwd=ws, env=SQLITE).code == 0
    for name, where in (
        ("retry.pdf", "specs/retry.pdf"),
        ("jupyter_layout.ipynb", "experiments/jupyter_layout.ipynb"),
        ("payments.py", "src/payments.py"),
        ("store.js", "web/store.js"),
        ("sections.rst", "manual/sections.rst"),
        ("sphinx_page.html", "site/sphinx_page.html"),
        ("server.go", "svc/server.go"),
    ):
        target = ws / where
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / name, target)
    write(ws, "assets/logo.png", "\x89PNG not really")  # never read: unsupported_type
    write(ws, "node_modules/lib/index.js", "// a dependency, never knowledge\n")
    write(ws, ".gitignore", "generated/\n*.log\n")
    write(ws, "generated/out.md", "# Out\n\nGenerated text.\n")
    write(ws, "debug.log", "a log line\n")
    write(ws, ".env", "TOKEN=abc\n")
    (ws / "site" / "objects.inv").write_bytes(b"# inventory\n\x00\x01zlib")  # no format, not text
    return ws


def test_init_selects_every_readable_file_and_counts_what_it_passes_over(
    every_format: Path,
) -> None:
    report = ok(every_format, "ingest")
    assert report["findings"] == [], report["findings"]
    counts = report["counts"]
    # seven formats, the .gitignore itself is hidden (excluded), node_modules is never walked
    assert counts["new_sources"] == 7, report
    assert report["skipped"] == {
        "ignored_by_gitignore": 1,  # debug.log (generated/ is not walked)
        "not_selected": 3,  # .env and .gitignore (hidden files), raytsystem.toml
        "unsupported_type": 1,  # assets/logo.png
        "binary_file": 1,  # site/objects.inv: read, found not to be text, never a finding
    }
    human = run_cli("ingest", "--json", cwd=every_format, env=SQLITE)
    assert human.code == 0


def _cited(ws: Path, question: str) -> dict[str, Any]:
    body = ok(ws, "query", question)
    assert body["status"] == "answered", (question, body)
    for citation in body["citations"]:
        for evidence in citation["evidence"]:
            excerpt = evidence["cited_excerpt"].encode("utf-8")
            assert hashlib.sha256(excerpt).hexdigest() == evidence["cited_excerpt_sha256"]
    return body


@pytest.mark.parametrize(
    ("question", "path", "where"),
    [
        ("payment retried at most five times", "specs/retry.pdf", "page"),
        ("how often and how long to retry", "src/payments.py", "heading_path"),
    ],
)
def test_a_query_cites_each_format_where_it_is(
    every_format: Path, question: str, path: str, where: str
) -> None:
    ok(every_format, "ingest")
    body = _cited(every_format, question)
    evidence = [e for c in body["citations"] for e in c["evidence"] if e["source_path"] == path]
    assert evidence, (path, [c["evidence"][0]["source_path"] for c in body["citations"]])
    if where == "page":
        assert evidence[0]["page"] == 1 and evidence[0]["adapter"] == "pdf@1"
    else:
        assert evidence[0]["heading_path"] == ["RetryPolicy"], evidence[0]


def test_a_notebook_citation_names_its_cell(every_format: Path) -> None:
    ok(every_format, "ingest")
    found = ok(every_format, "search", "first attempt", "--claims")
    cells = [h for h in found["hits"] if h["source_path"].endswith(".ipynb")]
    assert cells, found
    shown = ok(every_format, "show", cells[0]["id"])
    assert shown["kind"] == "claim", shown
    cells = {e["chain"]["segment"]["cell"] for e in shown["evidence"]}
    assert cells == {2}, shown  # 0-based: the third cell, the markdown cell under "Results"


def test_code_symbols_are_recorded_with_the_normalization(every_format: Path) -> None:
    ok(every_format, "ingest")
    history = ok(every_format, "history", "src/payments.py")
    revision = history["revisions"][0]["id"]
    shown = ok(every_format, "show", revision)
    (normalization,) = shown["normalizations"]
    meta = ok(every_format, "show", normalization["id"])["normalization"]["meta"]
    assert meta == normalization["meta"]
    names = {s["name"] for s in meta["symbols"]}
    assert {"RetryPolicy", "RetryPolicy.max_attempts"} <= names, names


def test_an_explicit_folder_that_selects_nothing_says_so(every_format: Path) -> None:
    report = ok(every_format, "ingest", "assets")
    codes = {f["code"]: f for f in report["findings"]}
    assert "nothing_selected" in codes, report
    assert "unsupported_type" in codes["nothing_selected"]["message"]


def test_a_scanned_pdf_is_a_finding_and_the_others_go_on(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    assert run_cli("init", cwd=ws, env=SQLITE).code == 0
    (ws / "docs").mkdir()
    (ws / "docs" / "broken.pdf").write_bytes(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\ntruncated")
    write(ws, "docs/good.md", "# Good\n\nThe good file is ingested.\n")
    report = ok(ws, "ingest")
    assert report["created"] and report["counts"]["new_sources"] == 2
    codes = {f["code"] for f in report["findings"]}
    assert codes & {"pdf_unreadable", "pdf_no_text"}, report["findings"]
    assert ok(ws, "query", "good file ingested")["status"] == "answered"


NOTE = """# Retry facts

A charge is retried five times at most.[^a]

[^a]: src/payments.py::RetryPolicy.max_attempts "max_attempts = 5"
"""


def test_a_note_citing_a_symbol_drifts_when_the_code_moves(tmp_path: Path) -> None:
    """note -> ingest -> confirmed -> the quote moves to another symbol -> ingest -> the claim
    is unverified with `citation_drifted` -> `review` reports it; the graph names symbols."""
    ws = tmp_path / "ws"
    ws.mkdir()
    assert run_cli("init", cwd=ws, env=SQLITE).code == 0
    code = (FIXTURES / "payments.py").read_text(encoding="utf-8")
    write(ws, "src/payments.py", code)
    write(ws, "knowledge/manual/retries.md", NOTE)
    report = ok(ws, "ingest")
    assert report["findings"] == [], report["findings"]
    body = _cited(ws, "charge retried five times at most")
    (first,) = [c for c in body["citations"] if c["claim"]["authority"] == "manual"]
    cited = [e for e in first["evidence"] if e["role"] == "citation"]
    assert [(e["source_path"], e["cited_excerpt"]) for e in cited] == [
        ("src/payments.py", "max_attempts = 5")
    ]
    assert cited[0]["heading_path"] == ["RetryPolicy", "max_attempts"]
    with Session.open(ws, database_url="") as session:
        graph = session.graph()
    labels = {n["label"] for n in graph["nodes"] if n["kind"] == "entity"}
    assert {"src/payments.py::RetryPolicy", "src/payments.py::RetryPolicy.waits"} <= labels

    # The attribute now reads a constant; the quoted line lives on, outside the symbol.
    moved = code.replace("    max_attempts = 5\n", "    max_attempts = DEFAULT_ATTEMPTS\n")
    write(ws, "src/payments.py", moved + "\nmax_attempts = 5\n")
    report = ok(ws, "ingest")
    drifted = [f for f in report["findings"] if f["code"] == "citation_drifted"]
    assert len(drifted) == 1 and "RetryPolicy.max_attempts" in drifted[0]["message"], report
    answer = ok(ws, "query", "charge retried five times at most")
    assert all(c["claim"]["authority"] != "manual" for c in answer.get("citations", [])), answer
    review = ok(ws, "review")
    unverified = [f for f in review["findings"] if f["code"] == "unverified_claim"]
    assert len(unverified) == 1 and "no longer inside" in unverified[0]["message"], review
