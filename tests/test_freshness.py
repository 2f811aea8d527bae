"""Freshness in every answer (issue 37): `query`, `search` and `bundle` say whether the
workspace's files still match the generation they answered from, through the CLI (a walk per
answer), the Python API (a session that follows notifications) and the MCP server."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write

from raytsystem.api import Session

DOC = "# Payments\n\nRetries stop after at most 5 attempts.\n\nRefunds take 3 business days.\n"
QUESTION = "how many retry attempts"


def ledger_url() -> str | None:
    """The test's ledger for an in-process session (the CLI reads it from the environment)."""
    return os.environ.get("RAYTSYSTEM_DATABASE_URL") or None


def ingest(ws: Path) -> None:
    result = run_cli("ingest", cwd=ws)
    assert result.code == 0, result.stderr


def settle(ws: Path) -> None:
    """Age the workspace's files past the stat cache's 2 s racy window (ADR 0010), so the
    next ingest records them: what a workspace edited a moment ago is not."""
    old = time.time() - 10
    for path in ws.rglob("*"):
        if path.is_file() and path.relative_to(ws).parts[0] not in ("_raw", ".raytsystem"):
            os.utime(path, (old, old))


def fresh_of(ws: Path, *args: str) -> dict[str, Any]:
    result = run_cli(*args, "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    return result.json()["freshness"]


@pytest.fixture
def kb(workspace: Path) -> Path:
    write(workspace, "docs/payments.md", DOC)
    write(workspace, "docs/other.md", "# Other\n\nThe office opens at nine.\n")
    settle(workspace)
    ingest(workspace)
    return workspace


def test_query_search_bundle_are_fresh_then_stale_then_fresh(kb: Path) -> None:
    body = run_cli("query", QUESTION, "--json", cwd=kb).json()
    assert body["freshness"] == {"state": "fresh", "changed": 0, "examples": []}
    # The query's JSON keeps every key it had, in order; freshness comes before timing.
    assert list(body) == [
        "schema_version",
        "status",
        "query",
        "query_terms",
        "unmatched_terms",
        "generation",
        "answer",
        "sources",
        "citations",
        "freshness",
        "timing",
    ]
    write(kb, "docs/payments.md", DOC.replace("5 attempts", "7 attempts"))
    stale = {"state": "stale", "changed": 1, "examples": ["docs/payments.md"]}
    for args in (("query", QUESTION), ("search", "refunds"), ("bundle", "retry attempts")):
        assert fresh_of(kb, *args) == stale, args
    # It never changes the answer: the same claims, from the same generation.
    again = run_cli("query", QUESTION, "--json", cwd=kb).json()
    assert {k: v for k, v in again.items() if k not in ("freshness", "timing")} == {
        k: v for k, v in body.items() if k not in ("freshness", "timing")
    }
    text = run_cli("query", QUESTION, cwd=kb).stdout
    assert "STALE: 1 file differs from generation 1 (docs/payments.md)" in text
    ingest(kb)
    for args in (("query", QUESTION), ("search", "refunds"), ("bundle", "retry attempts")):
        assert fresh_of(kb, *args)["state"] == "fresh", args
    assert (
        "fresh: the workspace's files match generation 2"
        in run_cli("query", QUESTION, cwd=kb).stdout
    )


def test_an_older_generation_says_it_is_stale(kb: Path) -> None:
    write(kb, "docs/payments.md", DOC.replace("5 attempts", "7 attempts"))
    ingest(kb)
    assert fresh_of(kb, "query", QUESTION)["state"] == "fresh"
    old = fresh_of(kb, "query", QUESTION, "--generation", "1")
    assert old == {"state": "stale", "changed": 1, "examples": ["docs/payments.md"]}
    assert fresh_of(kb, "search", "refunds", "--generation", "1")["state"] == "stale"
    text = run_cli("query", QUESTION, "--generation", "1", cwd=kb).stdout
    assert "from generation 1, older than the current one" in text


def test_what_counts_as_a_change(kb: Path) -> None:
    # Same bytes, new stat (touch, a checkout that rewrites a file): hashed, not a change.
    os.utime(kb / "docs/payments.md")
    assert fresh_of(kb, "query", QUESTION)["state"] == "fresh"
    # A file the globs do not select, and the workspace's own state: not changes.
    write(kb, "build/notes.txt", "not selected: a build output\n")
    write(kb, "ops/reviews/9-x.md", "# a review report\n")
    (kb / ".raytsystem" / "scratch").write_text("x")
    assert fresh_of(kb, "query", QUESTION)["state"] == "fresh"
    # A new selected file, and a removed source.
    write(kb, "docs/new.md", "# New\n\nA new page.\n")
    (kb / "docs/other.md").unlink()
    got = fresh_of(kb, "query", QUESTION)
    assert got == {"state": "stale", "changed": 2, "examples": ["docs/new.md", "docs/other.md"]}
    ingest(kb)
    assert fresh_of(kb, "query", QUESTION)["state"] == "fresh"


def test_files_saved_just_before_the_ingest_are_checked_by_their_bytes(kb: Path) -> None:
    """A file modified less than 2 s before the ingest looked at it is not in the stat cache:
    the check hashes it against the generation's revision, so it is fresh, and it is stale
    when its bytes differ or it is gone."""
    write(kb, "docs/payments.md", DOC.replace("5 attempts", "6 attempts"))
    ingest(kb)  # right after the save: racily clean, not recorded
    assert fresh_of(kb, "query", QUESTION)["state"] == "fresh"
    write(kb, "docs/payments.md", DOC.replace("5 attempts", "8 attempts"))
    assert fresh_of(kb, "query", QUESTION)["examples"] == ["docs/payments.md"]
    (kb / "docs/payments.md").unlink()
    assert fresh_of(kb, "query", QUESTION) == {
        "state": "stale",
        "changed": 1,
        "examples": ["docs/payments.md"],
    }


def test_a_binary_file_the_generation_refused_is_not_a_change(kb: Path) -> None:
    (kb / "docs/image.md").write_bytes(b"\x00\x01\x02 binary")
    settle(kb)
    assert fresh_of(kb, "query", QUESTION)["examples"] == ["docs/image.md"]
    ingest(kb)  # refused with binary_file: recorded as seen, not as a source
    assert fresh_of(kb, "query", QUESTION)["state"] == "fresh"


def test_without_a_stat_cache_freshness_is_unknown(kb: Path) -> None:
    (kb / ".raytsystem" / "statcache.sqlite3").unlink()
    assert fresh_of(kb, "query", QUESTION) == {"state": "unknown", "changed": 0, "examples": []}
    assert "freshness unknown" in run_cli("query", QUESTION, cwd=kb).stdout


def test_a_session_follows_the_changes(kb: Path) -> None:
    """The Python API: a long-lived session walks once, then follows notifications."""
    with Session.open(kb, database_url=ledger_url()) as session:
        assert session.freshness_mode == "track"
        first = session.query(QUESTION)
        assert first.freshness is not None and first.freshness.state == "fresh"
        write(kb, "docs/payments.md", DOC.replace("5 attempts", "9 attempts"))
        state = _eventually(lambda: session.query(QUESTION).freshness, "stale")
        assert state.examples == ("docs/payments.md",)
        assert session.search("refunds")["freshness"]["state"] == "stale"
        assert session.bundle("retry attempts")["freshness"]["state"] == "stale"
        session.ingest()
        assert _eventually(lambda: session.query(QUESTION).freshness, "fresh")
        assert "9 attempts" in session.query(QUESTION).answer
        (kb / "docs/other.md").unlink()
        gone = _eventually(lambda: session.freshness(), "stale")
        assert gone.examples == ("docs/other.md",)
    with Session.open(kb, database_url=ledger_url(), freshness="check") as session:
        assert session.query(QUESTION).freshness.examples == ("docs/other.md",)  # type: ignore[union-attr]
    with Session.open(kb, database_url=ledger_url(), freshness="off") as session:
        assert "freshness" not in session.query(QUESTION).to_json()


def _eventually(get: Any, state: str, timeout: float = 30.0) -> Any:
    """The OS delivers notifications a moment after the write: ask until it has."""
    deadline = time.monotonic() + timeout
    while True:
        got = get()
        if got.state == state or time.monotonic() > deadline:
            assert got.state == state, got
            return got
        time.sleep(0.05)


async def _mcp_freshness(ws: Path) -> list[dict[str, Any]]:
    from conftest import mcp_server
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    seen: list[dict[str, Any]] = []

    async def ask(session: ClientSession) -> dict[str, Any]:
        result = await session.call_tool("query", {"text": QUESTION})
        assert not result.is_error, result.content
        return result.structured_content or {}

    async with stdio_client(mcp_server(ws)) as (read, write_), ClientSession(read, write_) as s:
        await s.initialize()
        seen.append(await ask(s))
        write(ws, "docs/payments.md", DOC.replace("5 attempts", "11 attempts"))
        deadline = time.monotonic() + 30
        while (got := await ask(s))["freshness"]["state"] != "stale":
            assert time.monotonic() < deadline, got
            await asyncio.sleep(0.05)
        seen.append(got)
        search = await s.call_tool("search", {"text": "refunds"})
        seen.append(search.structured_content or {})
        ingest(ws)
        while (got := await ask(s))["freshness"]["state"] != "fresh":
            assert time.monotonic() < deadline, got
            await asyncio.sleep(0.05)
        seen.append(got)
    return seen


def test_mcp_answers_carry_freshness(kb: Path) -> None:
    first, stale, search, fresh = asyncio.run(_mcp_freshness(kb))
    assert first["freshness"]["state"] == "fresh"
    assert stale["freshness"] == {"state": "stale", "changed": 1, "examples": ["docs/payments.md"]}
    assert search["freshness"]["state"] == "stale"
    assert fresh["generation"]["number"] == 2 and "11 attempts" in fresh["answer"]
    cli = run_cli("query", QUESTION, "--json", cwd=kb).json()
    assert {k: v for k, v in fresh.items() if k != "timing"} == {
        k: v for k, v in cli.items() if k != "timing"
    }


def test_freshness_json_is_the_same_shape_everywhere(kb: Path) -> None:
    keys = {"state", "changed", "examples"}
    for args in (("query", QUESTION), ("search", "refunds", "--claims"), ("bundle", "retry")):
        assert set(fresh_of(kb, *args)) == keys
    body = json.loads(run_cli("bundle", "retry", "--json", cwd=kb).stdout)
    # The bundle's hash covers the bundle, not its freshness (nor its timing).
    import hashlib

    from raytsystem.canonical import canonical_json

    core = {k: v for k, v in body.items() if k not in ("bundle_sha256", "timing", "freshness")}
    assert hashlib.sha256(canonical_json(core)).hexdigest() == body["bundle_sha256"]


async def _mcp_watching(ws: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from conftest import mcp_server
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    async def ask(session: ClientSession) -> dict[str, Any]:
        # Asked again when the server's own ingest committed while the query ran (it fails
        # closed with `generation_moved`, as it must).
        for _ in range(20):
            result = await session.call_tool("query", {"text": QUESTION})
            if not result.is_error:
                return result.structured_content or {}
            assert "generation_moved" in str(result.content), result.content
        raise AssertionError("the generation moved under 20 queries in a row")

    server = mcp_server(ws, "--watch", "--debounce", "200")
    async with stdio_client(server) as (read, write_), ClientSession(read, write_) as s:
        await s.initialize()
        first = await ask(s)
        write(ws, "docs/payments.md", DOC.replace("5 attempts", "13 attempts"))
        deadline = time.monotonic() + 60
        # No ingest by hand: the server's own watch loop makes the generation.
        while "13 attempts" not in (got := await ask(s)).get("answer", ""):
            assert time.monotonic() < deadline, got
            await asyncio.sleep(0.1)
        # Until the ingest has written its stat cache, just after its commit: `unknown`.
        while got["freshness"]["state"] != "fresh":
            assert got["freshness"]["state"] == "unknown" and time.monotonic() < deadline, got
            await asyncio.sleep(0.05)
            got = await ask(s)
    return first, got


def test_mcp_watch_keeps_the_answers_current(kb: Path) -> None:
    first, later = asyncio.run(_mcp_watching(kb))
    assert first["generation"]["number"] == 1 and "5 attempts" in first["answer"]
    assert later["generation"]["number"] >= 2
    assert later["freshness"] == {"state": "fresh", "changed": 0, "examples": []}
    assert run_cli("query", QUESTION, "--json", cwd=kb).json()["freshness"]["state"] == "fresh"


def test_ctrl_c_during_a_query_stops_it_and_its_walk_quietly(kb: Path, tmp_path: Path) -> None:
    """The CLI walks in a child process beside the query: Ctrl-C (to the process group, as a
    terminal sends it) ends both, with the one line the CLI prints and no traceback."""
    import signal

    from conftest import start_cli

    flag = tmp_path / "paused"
    env = {"RAYTSYSTEM_PAUSE_AT": "query.after_search:60", "RAYTSYSTEM_PAUSE_FLAG": str(flag)}
    proc = start_cli("query", QUESTION, cwd=kb, env=env)
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert err.strip() == "error[interrupted]: interrupted", err


def test_past_its_bound_a_moved_stat_is_unknown_unless_something_changed(kb: Path) -> None:
    """The verdict cannot hash past its bound: a file whose stat moved is then not called a
    change on its own (`unknown`), only beside a change it did find."""
    from raytsystem.pipeline.freshness import judge
    from raytsystem.pipeline.freshness_walk import observe
    from raytsystem.storage import generations

    os.utime(kb / "docs/payments.md")  # same bytes, a new stat
    with Session.open(kb, database_url=ledger_url(), freshness="off") as session:
        spent = time.monotonic() - 1  # a deadline already past
        with session._reader() as reader:
            head = generations.head(reader)
            assert head is not None
            obs = observe(session.ws, time.monotonic() + 30)
            assert list(obs.suspects) == ["docs/payments.md"]
            assert judge(obs, reader, head, head, spent).state == "unknown"
            assert judge(obs, reader, head, head, time.monotonic() + 30).state == "fresh"
            write(kb, "docs/new.md", "# New\n\nA new page.\n")
            obs = observe(session.ws, time.monotonic() + 30)
            got = judge(obs, reader, head, head, spent)
            assert (got.state, got.examples) == ("stale", ("docs/new.md", "docs/payments.md"))
