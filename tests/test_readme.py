"""The README's main command works on the repository's own knowledge: ingest a copy of the
repository as a workspace and ask the README's question; it must be answered, manual note
first, and every citation must check out with hashlib."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

from conftest import REPO, run_cli

SQLITE = {"RAYTSYSTEM_DATABASE_URL": ""}


def readme_question() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r'uv run raytsystem ingest && uv run raytsystem query "([^"]+)"', text)
    assert match, "the README's first command must ingest and query"
    return match.group(1)


def test_the_readme_question_is_answered_from_the_repository(tmp_path: Path) -> None:
    ws = tmp_path / "repo"
    ws.mkdir()
    shutil.copy(REPO / "raytsystem.toml", ws)
    for path in REPO.glob("*.md"):
        shutil.copy(path, ws)
    for folder in ("knowledge", "ops/decisions"):
        shutil.copytree(REPO / folder, ws / folder)
    ingest = run_cli("ingest", "--json", cwd=ws, env=SQLITE)
    assert ingest.code == 0, ingest.stderr
    assert ingest.json()["findings"] == [], "the repository's own notes must all resolve"

    result = run_cli("query", readme_question(), "--json", cwd=ws, env=SQLITE)
    assert result.code == 0, result.stderr
    body = result.json()
    assert body["status"] == "answered"
    assert body["citations"][0]["claim"]["authority"] == "manual"
    for citation in body["citations"]:
        for evidence in citation["evidence"]:
            excerpt = evidence["cited_excerpt"].encode("utf-8")
            assert hashlib.sha256(excerpt).hexdigest() == evidence["cited_excerpt_sha256"]
