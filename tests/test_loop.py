"""The loop a user follows (README "The loop"), end to end through the CLI:
ingest -> query -> review finds a problem -> edit a note in knowledge/manual/ (add a cited claim,
retract a wrong one) -> ingest -> query shows the change, the manual claim first, its citation
verified."""

from __future__ import annotations

import hashlib
from pathlib import Path

from conftest import run_cli, write


def test_the_user_loop(workspace: Path) -> None:
    write(
        workspace,
        "docs/payments.md",
        "# Payments\n\nRetries stop after at most 5 attempts.\n\nThe retry delay is 2 seconds.\n",
    )
    write(workspace, "docs/legacy.md", "# Legacy\n\nRetries stop after at most 3 attempts.\n")
    assert run_cli("ingest", cwd=workspace).code == 0

    first = run_cli("query", "retries stop attempts", "--json", cwd=workspace).json()
    statements = [c["claim"]["statement"] for c in first["citations"]]
    assert "Retries stop after at most 3 attempts." in statements
    wrong = next(
        c["claim"]["id"] for c in first["citations"] if "3 attempts" in c["claim"]["statement"]
    )

    audit = run_cli("review", "--json", cwd=workspace).json()
    contradictions = [f for f in audit["findings"] if f["code"] == "possible_contradiction"]
    assert contradictions and wrong in contradictions[0]["subjects"]

    write(
        workspace,
        "knowledge/manual/retries.md",
        f"---\ntitle: Retry policy\nretracts: [{wrong}]\n---\n# Retry policy\n\n"
        "Payments retries stop after five attempts.[^p]\n\n"
        '[^p]: docs/payments.md "at most 5 attempts"\n',
    )
    report = run_cli("ingest", "--json", cwd=workspace).json()
    assert report["created"] and report["findings"] == []

    after = run_cli("query", "retries stop attempts", "--json", cwd=workspace).json()
    assert after["generation"]["number"] == 2
    top = after["citations"][0]
    assert top["claim"]["authority"] == "manual"
    assert top["claim"]["statement"] == "Payments retries stop after five attempts."
    roles = {e["role"]: e for e in top["evidence"]}
    assert roles["citation"]["source_path"] == "docs/payments.md"
    assert roles["citation"]["cited_excerpt"] == "at most 5 attempts"
    for ev in top["evidence"]:
        assert (
            hashlib.sha256(ev["cited_excerpt"].encode()).hexdigest() == ev["cited_excerpt_sha256"]
        )
    assert wrong not in [c["claim"]["id"] for c in after["citations"]]
    diff = run_cli("diff", "1", "2", "--json", cwd=workspace).json()
    assert {"id": wrong, "from_status": "confirmed", "to_status": "retracted"}.items() <= next(
        c for c in diff["status_changed"] if c["id"] == wrong
    ).items()
    assert run_cli("verify", cwd=workspace).code == 0
