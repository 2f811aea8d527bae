"""Composed answers (ADR 0042): a cap per source that demotes rather than drops, the relevance
cliff, near-duplicates across sources merged into one citation (each verified), `sources` in
the JSON, and the same bytes for the same question. End to end through the CLI; the walk
itself (`compose.select`) on candidates given by hand."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import blake3
import pytest
from conftest import blob_bytes, run_cli, tamper_blob, write
from hypothesis import given
from hypothesis import strategies as st

from raytsystem.pipeline import compose, ranking
from raytsystem.pipeline.query import parse_query

RETRY = "# Retry policy\n\nRetry backoff doubles after a failure. Retry backoff waits for the network. Retry backoff stops at ten attempts.\n"
CLIENT = "# Client\n\nRetry backoff guards every request. Retry backoff follows the timeouts. The client sends requests. Retry backoff ignores cancelled calls.\n"
SERVER = "# Server\n\nRetry backoff protects the database. Retry backoff slows down loud clients. The server answers requests. Retry backoff is logged.\n"
REFUNDS = "# Refunds\n\nRefunds take three business days. Refunds go back to the original card. Refunds over five hundred euros need an approval.\n"
SUPPORT = "# Support\n\nSupport answers tickets on business days. The office is closed on public holidays. Phones are staffed by two teams in turn. Chat messages are kept for a year.\n"
OPS = "# Operations\n\nBackups run every night at two. Disks are replaced each spring.\n"
RUNBOOK = "# Runbook\n\nPagers ring for outages. Backups run every night at two.\n"


@pytest.fixture
def kb(workspace: Path) -> Path:
    for name, text in [
        ("retry", RETRY),
        ("client", CLIENT),
        ("server", SERVER),
        ("refunds", REFUNDS),
        ("support", SUPPORT),
        ("ops", OPS),
        ("runbook", RUNBOOK),
    ]:
        write(workspace, f"docs/{name}.md", text)
    result = run_cli("ingest", "--json", cwd=workspace)
    assert result.code == 0, result.stderr
    return workspace


def ask(ws: Path, text: str, *args: str) -> Any:
    result = run_cli("query", text, *args, "--json", cwd=ws)
    assert result.code == 0, (result.stdout, result.stderr)
    return result.json()


def paths(body: dict[str, Any]) -> list[str]:
    return [c["evidence"][0]["source_path"] for c in body["citations"]]


def test_a_source_past_its_cap_comes_after_the_other_sources_best(kb: Path) -> None:
    """Three files answer alike; the first ranks a little higher on its own: its three
    sentences are one passage (each other's context, ADR 0012), two of the others' three
    are. Without a cap its three sentences come first; with the default cap of 2 its third
    waits for the others'; with 1, each source's best comes first."""
    plain = ask(kb, "retry backoff", "--limit", "6", "--per-source", "50")
    assert paths(plain)[:3] == ["docs/retry.md"] * 3
    capped = ask(kb, "retry backoff", "--limit", "6")
    assert paths(capped).count("docs/retry.md") == 2 and paths(capped)[:2] == ["docs/retry.md"] * 2
    assert {p: paths(capped).count(p) for p in paths(capped)} == {
        "docs/retry.md": 2,
        "docs/server.md": 2,
        "docs/client.md": 2,
    }
    one = ask(kb, "retry backoff", "--limit", "6", "--per-source", "1")
    assert len(set(paths(one)[:3])) == 3
    # the limit still counts citations, and the JSON says how many sources they come from
    assert len(one["citations"]) == 6 and one["sources"] == 3
    text = run_cli("query", "retry backoff", "--limit", "6", cwd=kb)
    assert "6 citations from 3 sources, verified against generation 1" in text.stdout


def test_a_question_one_source_answers_keeps_its_sentences(kb: Path) -> None:
    """The cap demotes, it does not drop: when no other source answers, a source's later
    sentences are still cited."""
    body = ask(kb, "refunds", "--per-source", "1")
    assert paths(body) == ["docs/refunds.md"] * 3 and body["sources"] == 1


def test_the_relevance_cliff_leaves_out_loosely_related_lines(kb: Path) -> None:
    """A support line holds two of the question's words and may answer (a candidate), but its
    relevance is far below the best one's: it is not cited, while the plain order cites it."""
    question = "how many business days do refunds take"
    body = ask(kb, question)
    assert [c["claim"]["statement"] for c in body["citations"]] == [
        "Refunds take three business days."
    ]
    index = next((kb / ".raytsystem" / "indexes").glob("*.sqlite3"))
    with sqlite3.connect(index) as conn:
        found = ranking.candidates(conn, parse_query(question))
        best = max(c.score for c in found)
        below = [c for c in found if c.score < compose.CLIFF * best]
        plain = ranking.rank(conn, found, 5)
        loose = conn.execute(
            f"SELECT text FROM docs WHERE rowid IN ({','.join(str(c.rowid) for c in below)})"
        ).fetchall()
    assert loose == [("Support answers tickets on business days.",)]
    assert {c.rowid for c in below} <= {c.rowid for c in plain}


def check(ws: Path, evidence: dict[str, Any]) -> None:
    """An evidence entry checked with hashlib and blake3 alone."""
    excerpt = evidence["cited_excerpt"]
    assert hashlib.sha256(excerpt.encode()).hexdigest() == evidence["cited_excerpt_sha256"]
    raw = blob_bytes(ws / "_raw", evidence["raw_blake3"])
    assert blake3.blake3(raw).hexdigest() == evidence["raw_blake3"]
    assert excerpt.encode() in raw


def test_the_same_sentence_in_two_files_is_one_citation_with_both(kb: Path) -> None:
    body = ask(kb, "when do backups run")
    [citation] = body["citations"]
    roles = [e["role"] for e in citation["evidence"]]
    assert roles == ["statement", "duplicate"] and body["sources"] == 2
    statement, duplicate = citation["evidence"]
    assert {statement["source_path"], duplicate["source_path"]} == {
        "docs/ops.md",
        "docs/runbook.md",
    }
    assert (
        duplicate["claim_id"].startswith("clm_")
        and duplicate["claim_id"] != citation["claim"]["id"]
    )
    assert duplicate["cited_excerpt"] == citation["claim"]["statement"]
    for ev in citation["evidence"]:
        check(kb, ev)
    # the merged claim is the ledger's own, with its chain
    shown = run_cli("show", duplicate["claim_id"], "--json", cwd=kb)
    assert shown.code == 0 and duplicate["claim_hash"] in shown.stdout
    # and checked like any citation: its raw bytes altered, the query fails closed
    tamper_blob(kb / "_raw", duplicate["raw_blake3"], lambda b: b.replace(b"night", b"nite!"))
    failed = run_cli("query", "when do backups run", "--json", cwd=kb)
    assert failed.code == 3 and failed.json()["error"]["code"] == "raw_blob_corrupt"


def test_composed_answers_are_the_same_bytes_again_and_after_a_rebuild(kb: Path) -> None:
    def strip(body: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in body.items() if k != "timing"}, sort_keys=True)

    questions = ["retry backoff", "when do backups run", "refunds business days"]
    first = [strip(ask(kb, q, "--limit", "6")) for q in questions]
    assert first == [strip(ask(kb, q, "--limit", "6")) for q in questions]
    for index in (kb / ".raytsystem" / "indexes").glob("*.sqlite3"):
        index.unlink()
    assert run_cli("index", "rebuild", cwd=kb).code == 0
    assert first == [strip(ask(kb, q, "--limit", "6")) for q in questions]


@pytest.mark.parametrize("value", ["0", "-1", "51"])
def test_per_source_out_of_range_is_a_clear_error(kb: Path, value: str) -> None:
    result = run_cli("query", "retry backoff", "--per-source", value, "--json", cwd=kb)
    assert result.code == 2 and result.json()["error"]["code"] == "invalid_per_source"
    human = run_cli("query", "retry backoff", "--per-source", value, cwd=kb)
    assert human.code == 2 and human.stderr.startswith("error[invalid_per_source]")
    assert "Traceback" not in human.stderr


def test_per_source_that_is_not_a_number_is_a_usage_error(kb: Path) -> None:
    result = run_cli("query", "retry backoff", "--per-source", "two", "--json", cwd=kb)
    assert result.code == 2 and "Traceback" not in result.stderr + result.stdout


# --- the walk, on candidates given by hand -------------------------------------------------


def candidate(source: str, score: float, key: str, claim: str = "") -> ranking.Candidate:
    c = ranking.Candidate(claim or f"clm_{source}_{key}", source, score, key, 0, ranking.EXTRACTED)
    return c


def ids(chosen: list[ranking.Candidate]) -> list[str]:
    return [c.claim_id for c in chosen]


def test_select_demotes_each_claim_past_the_cap_by_the_demotion_step() -> None:
    walk = [
        candidate("a", 2.0, "a1"),
        candidate("a", 1.95, "a2"),
        candidate("a", 1.9, "a3"),  # past the cap of 2: 1.75
        candidate("a", 1.9, "a4"),  # two past: 1.6
        candidate("b", 1.8, "b1"),
        candidate("c", 1.7, "c1"),
        candidate("d", 1.65, "d1"),
    ]
    chosen = compose.select(walk, 7, 2, 0.15)
    assert ids(chosen) == [
        "clm_a_a1",
        "clm_a_a2",
        "clm_b_b1",
        "clm_a_a3",
        "clm_c_c1",
        "clm_d_d1",
        "clm_a_a4",
    ]
    # with an infinite step, the cap is hard: every other source's claim first
    assert ids(compose.select(walk, 7, 2, math.inf))[2:5] == ["clm_b_b1", "clm_c_c1", "clm_d_d1"]
    # the limit counts citations
    assert len(compose.select(walk, 3, 2)) == 3


def test_select_merges_near_duplicates_of_other_sources_only() -> None:
    walk = [
        candidate("a", 2.0, "same"),
        candidate("a", 1.9, "same", "clm_a_again"),  # the same source: dropped
        candidate("b", 1.8, "other"),
        *[candidate(f"s{i}", 1.5, "same") for i in range(6)],
    ]
    chosen = compose.select(walk, 5, 2)
    assert ids(chosen) == ["clm_a_same", "clm_b_other"]
    merged = chosen[0].merged
    assert [m.source_id for m in merged] == ["s0", "s1", "s2", "s3"][: compose.MAX_MERGED]


def test_a_copy_in_a_capped_source_does_not_hide_the_source_that_states_it() -> None:
    """Source a states b's sentence too, as its third claim: demoted, it ranks after b's own,
    which is cited, with a's copy as a second place that states it."""
    walk = [
        candidate("a", 2.0, "a1"),
        candidate("a", 1.9, "a2"),
        candidate("a", 1.8, "b1", "clm_a_copy"),  # past the cap: 1.65
        candidate("b", 1.79, "b1"),
        candidate("c", 1.7, "c1"),
    ]
    chosen = compose.select(walk, 3, 2)
    assert ids(chosen) == ["clm_a_a1", "clm_a_a2", "clm_b_b1"]
    assert [m.claim_id for m in chosen[2].merged] == ["clm_a_copy"]


def test_select_looks_past_the_limit_for_duplicates_of_what_it_cites() -> None:
    walk = [candidate("a", 2.0, "x"), candidate("b", 1.9, "y"), candidate("c", 1.8, "x")]
    chosen = compose.select(walk, 1, 2)
    assert ids(chosen) == ["clm_a_x"] and [m.source_id for m in chosen[0].merged] == ["c"]


def test_above_cliff_keeps_what_reaches_the_share_of_the_best() -> None:
    found = [candidate("a", 2.0, "a"), candidate("b", 0.8, "b"), candidate("c", 0.79, "c")]
    assert [c.source_id for c in compose.above_cliff(found, 0.4)] == ["a", "b"]
    assert compose.above_cliff([]) == []


@given(
    st.lists(
        st.tuples(
            st.sampled_from("abcd"), st.sampled_from([1.0, 1.5, 2.0]), st.sampled_from("wxyz")
        ),
        max_size=30,
    ),
    st.integers(1, 8),
)
def test_select_without_a_binding_cap_is_the_plain_order(
    rows: list[tuple[str, float, str]], limit: int
) -> None:
    """When no source reaches its cap, `select` cites what `rank` would: the ranked order, one
    claim of each set of near-duplicates."""
    walk = sorted(
        (candidate(s, score, key, f"clm_{i:03d}") for i, (s, score, key) in enumerate(rows)),
        key=lambda c: (-c.score, c.claim_id),
    )
    expected, seen = [], set()
    for c in walk:
        if c.dedupe_key not in seen:
            seen.add(c.dedupe_key)
            expected.append(c.claim_id)
    assert ids(compose.select(walk, limit, 50)) == expected[:limit]


def test_every_front_end_has_the_documented_default() -> None:
    """The CLI, `Session.query` and the MCP tool spell the default out (a command imports no
    pipeline module to show its help, ADR 0023): they must all be the composition's."""
    import inspect

    from raytsystem.api import Session
    from raytsystem.cli import query as query_command
    from raytsystem.pipeline.query import query

    option = next(p for p in query_command.params if p.name == "per_source")
    assert option.default == compose.DEFAULT_PER_SOURCE
    for function in (Session.query, query):
        default = inspect.signature(function).parameters["per_source"].default
        assert default == compose.DEFAULT_PER_SOURCE
    source = (Path(compose.__file__).parents[1] / "mcp_server.py").read_text(encoding="utf-8")
    assert f"per_source: int = {compose.DEFAULT_PER_SOURCE}," in source
