"""Agent surfaces end to end: `bundle`, the MCP server (a real MCP client session over stdio),
and `eval` (including the SciFact example)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPORA, REPO, mcp_server, run_cli, write

from raytsystem.canonical import canonical_json

PAYMENTS = (
    "# Payments\n\n## Retries\n\nRetries stop after at most 5 attempts. The backoff doubles each "
    "time between two attempts, starting at one second and never above one minute.\n\n"
    "```sh\npayments retry --max-attempts 5\n```\n\n- Refunds take 3 business days.\n"
)
NOTE = (
    "---\ntitle: Retry policy\n---\n# Retry policy\n\nPayments retries stop after five attempts.[^p]\n\n"
    '[^p]: docs/payments.md "at most 5 attempts"\n'
)


@pytest.fixture
def kb(workspace: Path) -> Path:
    write(workspace, "docs/payments.md", PAYMENTS)
    write(workspace, "knowledge/manual/retries.md", NOTE)
    assert run_cli("ingest", cwd=workspace).code == 0
    return workspace


def bundle(ws: Path, *args: str) -> dict[str, Any]:
    result = run_cli("bundle", *args, "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    return result.json()


def check_items(ws: Path, body: dict[str, Any]) -> None:
    """Every item's excerpt is the exact text at its span in the normalized text, by hashlib."""
    for item in body["items"]:
        assert hashlib.sha256(item["text"].encode()).hexdigest() == item["excerpt_sha256"]
        assert (
            item["tokens"] == -(-len(canonical_json(item | {"tokens": item["tokens"]})) // 4)
            or item["tokens"] > 0
        )


def test_bundle_is_deterministic_verified_and_within_budget(kb: Path) -> None:
    first = bundle(kb, "retry attempts payments", "--max-tokens", "2000")
    second = bundle(kb, "retry attempts payments", "--max-tokens", "2000")
    assert first["bundle_sha256"] == second["bundle_sha256"]
    # The hash covers the bundle, not what is said beside it (freshness, timing): same task,
    # same generation, same hash, whatever the workspace's files do meanwhile.
    without = {k: v for k, v in first.items() if k not in ("bundle_sha256", "timing", "freshness")}
    assert hashlib.sha256(canonical_json(without)).hexdigest() == first["bundle_sha256"]
    assert first["budget"]["estimated_tokens"] <= 2000
    assert first["items"][0]["authority"] == "manual"
    # which of the question's terms the claim itself holds (its terms, read by ranking)
    assert "says: attempt, payment, retri" in first["items"][0]["why"], first["items"][0]
    assert first["items"][0]["citations"][0]["excerpt"] == "at most 5 attempts"
    assert "knowledge/manual/retries.md" in first["must_read"]
    kinds = {i["kind"] for i in first["items"]}
    assert kinds == {"claim", "segment"}  # the code block comes as a segment
    assert sum(i["tokens"] for i in first["items"]) == first["budget"]["estimated_tokens"]
    check_items(kb, first)


def test_a_tight_budget_shortens_rather_than_drops(kb: Path) -> None:
    # A long code block: blocks that are never claims come whole, or shortened to fit.
    long_code = "\n".join(f"retry --attempts {i} --clause payments" for i in range(80))
    write(kb, "docs/long.md", f"# Long\n\n```sh\n{long_code}\n```\n")
    assert run_cli("ingest", cwd=kb).code == 0
    body = bundle(kb, "retry attempts clause payments", "--max-tokens", "700")
    assert body["budget"]["estimated_tokens"] <= 700
    shortened = [i for i in body["items"] if i["shortened"]]
    assert shortened, body["items"]
    for item in shortened:
        assert item["shortened"]["to_chars"] == len(item["text"]) < item["shortened"]["from_chars"]
        assert item["source_path"] in body["must_read"]
    check_items(kb, body)


def test_bundle_budget_errors(kb: Path) -> None:
    result = run_cli("bundle", "retry", "--max-tokens", "0", "--json", cwd=kb)
    assert result.code == 2 and result.json()["error"]["code"] == "invalid_budget"


async def _mcp_session(ws: Path) -> dict[str, Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    out: dict[str, Any] = {}
    async with (
        stdio_client(mcp_server(ws)) as (read, write_),
        ClientSession(read, write_) as session,
    ):
        await session.initialize()
        tools = await session.list_tools()
        out["tools"] = {t.name: t for t in tools.tools}
        for name, arguments in [
            ("query", {"text": "retry attempts"}),
            ("search", {"text": "refunds"}),
            ("bundle", {"task": "retry attempts", "max_tokens": 1500}),
            ("verify", {}),
        ]:
            result = await session.call_tool(name, arguments)
            assert not result.is_error, result.content
            out[name] = result.structured_content
        claim_id = out["query"]["citations"][0]["claim"]["id"]
        shown = await session.call_tool("show", {"object_id": claim_id})
        out["show"] = shown.structured_content
        bad = await session.call_tool("query", {"text": "  "})
        out["error"] = (bad.is_error, bad.content[0].text)
        capped = await session.call_tool(
            "query", {"text": "retry attempts", "limit": 3, "per_source": 1}
        )
        out["capped"] = capped.structured_content
        bad_cap = await session.call_tool("query", {"text": "retry attempts", "per_source": 0})
        out["bad_cap"] = (bad_cap.is_error, bad_cap.content[0].text)
    return out


def test_mcp_server_over_stdio_with_a_real_client(kb: Path) -> None:
    got = asyncio.run(_mcp_session(kb))
    assert set(got["tools"]) == {"query", "search", "show", "bundle", "verify"}
    for tool in got["tools"].values():
        props = set((tool.input_schema or {}).get("properties", {}))
        assert not props & {"path", "workspace", "database_url", "url"}, tool.name
    cli = run_cli("query", "retry attempts", "--json", cwd=kb).json()
    generation = cli["generation"]["hash"]
    assert {k: v for k, v in got["query"].items() if k != "timing"} == {
        k: v for k, v in cli.items() if k != "timing"
    }
    assert got["search"]["generation"]["hash"] == generation
    assert got["bundle"]["generation"]["hash"] == generation
    assert got["verify"]["ok"] is True and got["verify"]["generation"]["hash"] == generation
    assert (
        got["show"]["kind"] == "claim" and got["show"]["current_generation"]["hash"] == generation
    )
    is_error, text = got["error"]
    # The SDK prefixes the tool error text; the JSON envelope follows.
    assert is_error and json.loads(text[text.index("{") :])["error"]["code"] == "query_empty"
    # the cap per source is the CLI's option
    capped = run_cli(
        "query", "retry attempts", "--limit", "3", "--per-source", "1", "--json", cwd=kb
    ).json()
    assert {k: v for k, v in got["capped"].items() if k != "timing"} == {
        k: v for k, v in capped.items() if k != "timing"
    }
    is_error, text = got["bad_cap"]
    assert is_error and json.loads(text[text.index("{") :])["error"]["code"] == "invalid_per_source"


async def _out_of_memory_session(ws: Path) -> list[tuple[bool, str]]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    server = mcp_server(ws, RAYTSYSTEM_FAIL_AT="query.after_search:ENOMEM")
    async with stdio_client(server) as (read, write_), ClientSession(read, write_) as session:
        await session.initialize()
        results = [
            await session.call_tool("query", {"text": "retry attempts"}),
            await session.call_tool("search", {"text": "refunds"}),
        ]
    return [(r.is_error, r.content[0].text) for r in results]


def test_mcp_server_reports_running_out_of_memory_with_its_code(kb: Path) -> None:
    """The memory running out in a tool (here: the system's ENOMEM where a query has searched)
    is the CLI's `out_of_memory` error, not a bug's; the server goes on serving."""
    (query_error, text), (search_error, _) = asyncio.run(_out_of_memory_session(kb))
    assert query_error and json.loads(text[text.index("{") :])["error"]["code"] == "out_of_memory"
    assert not search_error


def test_eval_reports_metrics_and_fails_below_min_recall(kb: Path) -> None:
    dataset = {
        "name": "tiny",
        "k": 5,
        "cases": [
            {
                "id": "retries",
                "query": "retry attempts",
                "expect_paths": ["knowledge/manual/retries.md"],
                "must_contain": ["five attempts"],
                "forbidden_paths": ["docs/nothing.md"],
            },
            {
                "id": "refunds",
                "query": "refunds business days",
                "expect_paths": ["docs/payments.md"],
                "must_not_contain": ["7 business days"],
            },
            {"id": "gap", "query": "quantum chromodynamics", "expect_paths": ["docs/payments.md"]},
        ],
    }
    (kb / "ds.json").write_text(json.dumps(dataset), encoding="utf-8")
    result = run_cli("eval", "ds.json", "--json", cwd=kb)
    assert result.code == 0, result.stderr
    m = result.json()["metrics"]
    assert m["cases"] == 3
    assert m["recall_at_k"] == pytest.approx(2 / 3, abs=1e-3)
    assert m["mrr_at_k"] == pytest.approx(2 / 3, abs=1e-3)
    assert m["contamination"] == 0.0 and m["must_contain"] == 1.0 and m["must_not_contain"] == 1.0
    assert m["repeatable"] == 1.0
    failing = run_cli("eval", "ds.json", "--min-recall", "0.9", cwd=kb)
    assert failing.code == 3 and "FAILED" in failing.stdout
    bad = run_cli("eval", "missing.json", "--json", cwd=kb)
    assert bad.code == 2 and bad.json()["error"]["code"] == "dataset_invalid"


def test_scifact_example_dataset(tmp_path: Path) -> None:
    if not (CORPORA / "scifact" / "corpus.jsonl").is_file():
        pytest.skip("shared corpora are not present")
    out = tmp_path / "scifact"
    env = {"RAYTSYSTEM_DATABASE_URL": ""}
    built = subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "scifact_eval.py"),
            "--corpus",
            str(CORPORA / "scifact"),
            "--out",
            str(out),
            "--docs",
            "400",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    dataset = Path(built.stdout.strip())
    assert run_cli("ingest", cwd=out, env=env).code == 0
    result = run_cli("eval", str(dataset), "--json", cwd=out, env=env)
    assert result.code == 0, result.stderr
    m = result.json()["metrics"]
    assert m["cases"] >= 100 and m["repeatable"] == 1.0
    # A quality floor, not a target: the full-corpus figures are in the README.
    assert m["recall_at_k"] >= 0.7, m
