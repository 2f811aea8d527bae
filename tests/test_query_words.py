"""Words meet across their forms and scripts, end to end through `raytsystem query`
(model/terms.py; ADR 0036): compounds and their parts, Russian noun forms, Japanese words
that do not match through a particle, and Chinese words that do not match through a bigram
across two of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli, write

from raytsystem.model.terms import query_terms, terms
from raytsystem.pipeline.query import word_terms


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
        "docs/pdfgrep.md": "# pdfgrep\n\n在 PDF 文件中搜索文本。\n",
        "docs/find.md": "# find\n\n按名称搜索文件。\n",
        "docs/ugrep.md": "# ugrep\n\n递归搜索文件。\n",
        "docs/web.md": "# web\n\n在网页上搜索。\n",
        "docs/cat-zh.md": "# cat\n\n打印文本。\n",
        "docs/tr.md": "# tr\n\n替换文本中的字符。\n",
        "docs/wc.md": "# wc\n\n统计文本的行数。\n",
        "docs/web2.md": "# web\n\n搜索网页。\n",
        # Sentences on other things: without them, two words in one sentence of so few are
        # no more than chance (the gap rule, `meeting.py`).
        "docs/grep-zh.md": "# grep\n\n在文件中搜索文本模式。\n",
        "docs/misc-zh.md": "# 其他\n\n"
        + "".join(f"第{n}行显示当前时间。" for n in range(80))
        + "\n",
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


def test_a_chinese_question_does_not_match_through_a_bigram_across_its_words(kb: Path) -> None:
    """搜索文本 ("search text") is the bigrams 搜索 索文 文本; 索文 spans the two words, and the
    lines on 搜索文件 ("search files") hold it with 搜索: two of three terms. It is held by
    fewer sources than either word beside it, so it is left out: only the lines that hold
    both words answer."""
    body = json.loads(run_cli("query", "搜索文本", "--json", cwd=kb).stdout)
    assert body["query_terms"] == ["搜索", "文本"]
    cited_paths = [c["evidence"][0]["source_path"] for c in body["citations"]]
    assert sorted(cited_paths) == ["docs/grep-zh.md", "docs/pdfgrep.md"]


def test_word_terms_leave_out_the_rarer_bigram_between_two_others() -> None:
    held = {"授予": 4, "予文": 0, "文件": 567, "件权": 4, "权限": 33}
    assert word_terms(list(held), held) == ["授予", "文件", "权限"]
    # A three-character word has no bigram between two others: nothing is left out.
    assert word_terms(["数据", "据库"], {"数据": 90, "据库": 3}) == ["数据", "据库"]
    # Held by as many sources as a neighbour: kept (复制文件, "copy files", is common).
    assert word_terms(["复制", "制文", "文件"], {"复制": 28, "制文": 28, "文件": 567}) == [
        "复制",
        "制文",
        "文件",
    ]
    # Only a run's overlapping bigrams: other terms, and bigrams of separate runs, stay.
    assert word_terms(["压缩", "gzip", "文件"], {"压缩": 9, "gzip": 1, "文件": 99}) == [
        "压缩",
        "gzip",
        "文件",
    ]
    assert word_terms(["文件", "件夹", "夹子"], {"文件": 9, "件夹": 9, "夹子": 9}) == [
        "文件",
        "件夹",
        "夹子",
    ]


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
