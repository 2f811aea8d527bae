"""Words meet across their forms and scripts, end to end through `raytsystem query`
(model/terms.py; ADR 0036): compounds and their parts, Russian noun forms, and Japanese words
that do not match through a particle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli, write

from raytsystem.model.terms import query_terms, terms


def cited(ws: Path, question: str) -> list[str]:
    result = run_cli("query", question, "--json", "--limit", "10", cwd=ws)
    assert result.code == 0, result.stderr
    body = result.json()
    return [c["evidence"][0]["source_path"] for c in body["citations"]]


@pytest.fixture
def kb(workspace: Path) -> Path:
    files = {
        "docs/rename.md": "# Rename\n\nThe tool rewrites file names in lower case.\n",
        "docs/sort.md": "# Sort\n\nAll filenames are sorted before the copy.\n",
        "docs/pick.md": "# Pick\n\nPick a file-name that is short.\n",
        "docs/other.md": "# Other\n\nThe names of people are kept.\n",
        "docs/ru1.md": "# Один\n\nСоздать архив из каталога.\n",
        "docs/ru2.md": "# Два\n\nРаспаковать содержимое архива.\n",
        "docs/ru3.md": "# Три\n\nВсе архивы хранятся отдельно.\n",
        "docs/ls.md": "# ls\n\nファイルを一覧表示します。\n",
        "docs/cat.md": "# cat\n\nファイルを表示します。\n",
        "docs/gzip.md": "# gzip\n\nファイルを圧縮します。\n",
    }
    for path, text in files.items():
        write(workspace, path, text)
    assert run_cli("ingest", cwd=workspace).code == 0
    return workspace


def test_filenames_meets_file_names_and_file_name(kb: Path) -> None:
    want = {"docs/rename.md", "docs/sort.md", "docs/pick.md"}
    assert set(cited(kb, "filenames")) == want
    assert set(cited(kb, "file names")) == want
    assert set(cited(kb, "which file-name")) == want


def test_russian_forms_of_a_noun_meet(kb: Path) -> None:
    want = {"docs/ru1.md", "docs/ru2.md", "docs/ru3.md"}
    for question in ("архив", "архива", "архивы"):
        assert set(cited(kb, question)) == want, question


def test_a_japanese_question_does_not_match_through_its_particle(kb: Path) -> None:
    """Before, ファイルを圧縮 was the bigrams ファ ァイ イル ルを 圧縮: a line with ファイルを alone
    held four of five and was cited. Now the question is ファイル (one phrase) and 圧縮."""
    assert cited(kb, "ファイルを圧縮") == ["docs/gzip.md"]
    assert cited(kb, "ファイルを圧縮する") == ["docs/gzip.md"]
    # Each page is still found by its own words.
    assert set(cited(kb, "ファイル")) == {"docs/ls.md", "docs/cat.md", "docs/gzip.md"}


def test_terms_are_the_same_in_a_fresh_process() -> None:
    """Analysis depends on the text alone (not on caches or on what was analyzed before): a
    new interpreter gives the same terms, in the same order."""
    samples = [
        "filenames and file-names",
        "архив архива архивы сделав",
        "ファイルを圧縮する 压缩文件 압축",
        "workspace overview database",
    ]
    here = [[terms(s), query_terms(s)] for s in samples]
    code = (
        "import json, sys; from raytsystem.model.terms import terms, query_terms; "
        "print(json.dumps([[terms(s), query_terms(s)] for s in json.loads(sys.argv[1])]))"
    )
    fresh = subprocess.run(
        [sys.executable, "-c", code, json.dumps(list(reversed(samples)))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(fresh.stdout) == list(reversed(here))
