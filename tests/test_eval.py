"""`eval` beside its BM25 baselines: every figure of a tiny dataset, worked out by hand.

The workspace has three one-paragraph files; the comments give each case's citations and
baseline hits, and why, from the rules of ADR 0012 and FTS5's BM25."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write

FILES = {
    # line 1: heading, line 3: the paragraph
    "docs/cats.md": "# Cats\n\nCats sleep sixteen hours a day. Cats purr when content.\n",
    "docs/dogs.md": "# Dogs\n\nDogs bark at strangers. Dogs sleep twelve hours a day.\n",
    "docs/birds.md": "# Birds\n\nBirds migrate south in winter.\n",
}

DATASET: dict[str, Any] = {
    "name": "tiny",
    "k": 2,
    "evidence_k": 2,
    "cases": [
        {
            # raytsystem: only cats.md holds the words; of its claims only "Cats purr when
            # content." holds two of them (the other has "cat" alone) -> one citation.
            # Baseline sentences: that one, then "Cats sleep sixteen hours a day." (cat).
            "id": "purr",
            "query": "cats purr content",
            "expect_paths": ["docs/cats.md"],
            "expect_evidence": [
                {"path": "docs/cats.md", "text": "Cats  purr when\ncontent."},
                {"path": "docs/dogs.md", "text": "Dogs bark at strangers."},
            ],
        },
        {
            # raytsystem: terms long, dog, sleep; over 3 sources cats.md holds only "sleep"
            # (19% of the IDF weight, 38% needed), dogs.md 60%; its claim "Dogs sleep twelve
            # hours a day." holds two terms, "Dogs bark at strangers." one -> one citation.
            # Baseline sources: dogs.md, then cats.md (sleep). Baseline sentences: "Dogs sleep
            # twelve hours a day.", then "Dogs bark at strangers." (dog; shorter than "Cats
            # sleep sixteen hours a day.", same IDF), which lacks "sleep".
            "id": "sleep",
            "query": "how long do dogs sleep",
            "expect_paths": ["docs/dogs.md", "docs/cats.md"],
            "expect_words": [["sleep", "sleeps"], ["dog"]],
        },
        {
            # A line range: raytsystem cites birds.md's claim on line 3; the baseline's
            # sentences have no lines, so it is not judged on this case's evidence.
            "id": "birds",
            "query": "birds migrate winter",
            "expect_evidence": [{"path": "docs/birds.md", "lines": [3, 3]}],
        },
        # Off-topic: no word is known (a gap for both), and one common word that covers too
        # little of the question for raytsystem (50% of the IDF weight, 55% needed) but is
        # enough for BM25 to return cats.md.
        {"id": "off1", "query": "quantum chromodynamics lattice", "expect": "gap"},
        {"id": "off2", "query": "cats chromodynamics", "expect": "gap"},
    ],
}


@pytest.fixture
def tiny(workspace: Path) -> Path:
    for path, text in FILES.items():
        write(workspace, path, text)
    assert run_cli("ingest", cwd=workspace).code == 0
    (workspace / "tiny.json").write_text(json.dumps(DATASET), encoding="utf-8")
    return workspace


def test_eval_figures_beside_the_baseline_checked_by_hand(tiny: Path) -> None:
    result = run_cli("eval", "tiny.json", "--json", cwd=tiny)
    assert result.code == 0, result.stderr
    body = result.json()
    cases = {c["id"]: c for c in body["cases"]}
    assert cases["purr"]["ranked_paths"] == ["docs/cats.md"]
    assert cases["sleep"]["ranked_paths"] == ["docs/dogs.md"]
    assert cases["sleep"]["baseline"]["ranked_paths"] == ["docs/dogs.md", "docs/cats.md"]
    assert [cases[c]["status"] for c in ("off1", "off2")] == ["gap", "gap"]
    assert cases["off2"]["baseline"]["ranked_paths"] == ["docs/cats.md"]

    m = body["metrics"]
    assert m["cases"] == 5 and m["offtopic_cases"] == 2
    assert m["recall_at_k"] == 0.75  # (1 + 1/2) / 2
    assert m["hit_at_k"] == 1.0  # each case cites one of its expected sources
    assert m["mrr_at_k"] == 1.0 and m["top1"] == 1.0
    assert m["evidence_recall_at_e"] == 0.75  # purr: 1 of 2 units, birds: 1 of 1
    assert m["evidence_hit_at_e"] == 1.0
    assert m["word_precision_at_e"] == 1.0
    assert m["gap_rate_offtopic"] == 1.0 and m["gap_rate_answerable"] == 0.0
    assert m["sources_in_e_citations"] == 1.0
    assert m["repeatable"] == 1.0

    b = body["baseline"]["metrics"]
    assert b["sources"] == 3 and b["sentences"] == 5
    assert b["recall_at_k"] == 1.0 and b["hit_at_k"] == 1.0 and b["mrr_at_k"] == 1.0
    assert b["evidence_recall_at_e"] == 0.5  # purr only: birds names lines
    assert b["evidence_hit_at_e"] == 1.0
    assert b["word_precision_at_e"] == 0.5
    assert b["gap_rate_offtopic"] == 0.5 and b["gap_rate_answerable"] == 0.0

    text = run_cli("eval", "tiny.json", cwd=tiny)
    assert text.code == 0
    assert "gap rate, off-topic" in text.stdout and "BM25" in text.stdout


@pytest.mark.parametrize(
    "unit",
    [
        {"path": "docs/cats.md"},
        {"path": "docs/cats.md", "text": "Cats purr.", "lines": [1, 1]},
        {"path": "docs/cats.md", "lines": [3, 2]},
    ],
)
def test_eval_refuses_an_evidence_unit_that_is_not_one_text_or_one_range(
    workspace: Path, unit: dict[str, Any]
) -> None:
    dataset = {"cases": [{"id": "c", "query": "cats", "expect_evidence": [unit]}]}
    (workspace / "bad.json").write_text(json.dumps(dataset), encoding="utf-8")
    result = run_cli("eval", "bad.json", "--json", cwd=workspace)
    assert result.code == 2 and result.json()["error"]["code"] == "dataset_invalid"


def test_the_example_datasets_load_and_name_text_their_files_hold() -> None:
    """The committed datasets are valid, and each decision sentence they name is in its ADR
    (Markdown's backticks and asterisks aside): an ADR edited or renumbered shows here, not as
    a silently lower figure."""
    from conftest import REPO

    from raytsystem.pipeline.evaluate import load_dataset

    decisions = load_dataset(REPO / "examples" / "decisions-eval.json")
    assert len(decisions.cases) >= 15 and decisions.evidence_k == 3
    for case in decisions.cases:
        assert case.expect_evidence, case.id
        for unit in case.expect_evidence:
            raw = (REPO / unit.path).read_text(encoding="utf-8").replace("`", "").replace("*", "")
            assert unit.text is not None and unit.text in " ".join(raw.split()), (case.id, unit)
    questions = json.loads(
        (REPO / "examples" / "tldr-multilingual-questions.json").read_text(encoding="utf-8")
    )
    multilingual = load_dataset_from(questions)
    langs = [case.id.split("-")[0] for case in multilingual.cases]
    assert {lang: langs.count(lang) for lang in set(langs)} == {"zh": 10, "ja": 10, "ru": 10}
    assert all(case.expect_words and case.expect_paths for case in multilingual.cases)
    general = json.loads((REPO / "examples" / "offtopic-general.json").read_text(encoding="utf-8"))[
        "questions"
    ]
    assert len(general) == len(set(general)) >= 40


def load_dataset_from(data: dict[str, Any]) -> Any:
    from raytsystem.pipeline.evaluate import Dataset

    return Dataset.model_validate({k: v for k, v in data.items() if k != "about"} | {"about": ""})


def test_the_baseline_finds_a_sentence_by_its_heading(workspace: Path) -> None:
    """The baseline's sentences are searched with their heading path, as plain sentence search
    over titled documents is: a sentence that never names its topic is found by its title."""
    write(workspace, "docs/lighthouses.md", "# Lighthouses\n\nThey guide ships at night.\n")
    write(workspace, "docs/ships.md", "# Harbours\n\nShips dock at the quay.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    dataset = {
        "evidence_k": 1,
        "cases": [
            {
                "id": "c",
                "query": "lighthouses",
                "expect_evidence": [
                    {"path": "docs/lighthouses.md", "text": "They guide ships at night."}
                ],
            }
        ],
    }
    (workspace / "d.json").write_text(json.dumps(dataset), encoding="utf-8")
    result = run_cli("eval", "d.json", "--json", cwd=workspace)
    assert result.code == 0, result.stderr
    assert result.json()["baseline"]["metrics"]["evidence_hit_at_e"] == 1.0
