from pathlib import Path

from conftest import run_cli, write


def test_ingest_then_query_answers_with_citation(workspace: Path) -> None:
    write(workspace, "docs/payments.md", "# Payments\n\nRetries stop after at most 5 attempts.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    result = run_cli("query", "retry attempts", "--json", cwd=workspace)
    assert result.code == 0, result.stderr
    body = result.json()
    assert body["status"] == "answered"
    assert body["citations"][0]["claim"]["statement"] == "Retries stop after at most 5 attempts."
