"""The gap rule and the one-term claim rule of QUERY (ADR 0012, `pipeline/meeting.py`), end to
end through the CLI over a knowledge base whose topics have words of their own: a question
whose words meet only by chance is a gap naming the words no source holds, a question about a
topic is answered, and a source whose sentences each hold one of the question's words is
found."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write

from raytsystem.pipeline.meeting import KNOWN_WORDS_SOURCES, MIN_G, g_statistic, mostly_unmatched

TOPICS = {
    "payments": ["retry", "backoff", "gateway", "refund", "chargeback", "settlement"],
    "search": ["index", "token", "stemmer", "ranking", "snippet", "analyzer"],
    "storage": ["blob", "hash", "pack", "compaction", "checksum", "replica"],
    "deploy": ["container", "rollout", "canary", "cluster", "helm", "probe"],
}
# Words of every topic, two per sentence at random: they meet each other only by chance.
FILLER = ["list", "service", "team", "update", "value", "report", "change", "process"]
MAINTENANCE = """# Maintenance

Canary builds are promoted by hand. Each cluster is drained first. Patching happens on Sundays.
The work is done overnight.
"""


def _document(rng: random.Random, topic: str, n: int) -> str:
    words = TOPICS[topic]
    lines = [f"# {topic.title()} {n}", ""]
    for _ in range(12):
        a, b = rng.sample(words, 2)
        c, d = rng.sample(FILLER, 2)
        lines.append(f"The {a} works with the {b} of each {c} and {d}.")
    return "\n".join(lines) + "\n"


@pytest.fixture
def topical(workspace: Path) -> Path:
    rng = random.Random(3)
    for topic in TOPICS:
        for n in range(8):
            write(workspace, f"docs/{topic}/{n}.md", _document(rng, topic, n))
    write(workspace, "docs/ops/maintenance.md", MAINTENANCE)
    result = run_cli("ingest", "--json", cwd=workspace)
    assert result.code == 0, result.stderr
    return workspace


def _query(ws: Path, text: str, *args: str) -> dict[str, Any]:
    result = run_cli("query", text, "--json", *args, cwd=ws)
    assert result.code == 0, (result.stdout, result.stderr)
    body: dict[str, Any] = result.json()
    return body


def test_words_that_meet_only_by_chance_make_a_gap_naming_the_unknown_words(
    topical: Path,
) -> None:
    # `list` and `service` are in the knowledge base (filler words of many sentences) and
    # meet in some sentences, but no more often than chance: the question is about something
    # the knowledge base does not hold.
    gap = _query(topical, "List the service sessions for the payroll audit")
    assert gap["status"] == "gap"
    assert gap["answer"] == "" and gap["citations"] == []
    assert gap["unmatched_terms"] == ["sessions", "payroll", "audit"]
    text = run_cli("query", "List the service sessions for the payroll audit", cwd=topical)
    assert "in no source: sessions, payroll, audit" in text.stdout
    # Every word known, each pair in some sentences by chance (the two-term rule answered it).
    assert _query(topical, "Which team should update the process list?")["status"] == "gap"
    # The same shape of question about a topic the knowledge base holds is answered.
    answered = _query(topical, "Which gateway retry uses a backoff?")
    assert answered["status"] == "answered"
    assert "docs/payments/" in answered["citations"][0]["evidence"][0]["source_path"]


@pytest.fixture
def many_sources(workspace: Path) -> Path:
    """The topics' documents, enough of them for a word no source holds to count."""
    rng = random.Random(5)
    per_topic = -(-KNOWN_WORDS_SOURCES // len(TOPICS))
    for topic in TOPICS:
        for n in range(per_topic):
            write(workspace, f"docs/{topic}/{n}.md", _document(rng, topic, n))
    write(workspace, "docs/ops/maintenance.md", MAINTENANCE)
    result = run_cli("ingest", "--json", cwd=workspace)
    assert result.code == 0, result.stderr
    return workspace


def test_a_question_mostly_unmatched_in_the_knowledge_base_is_a_gap(many_sources: Path) -> None:
    """Two of the question's words meet, in one sentence of maintenance.md; when as many of
    its words are in no source of a knowledge base of `KNOWN_WORDS_SOURCES` sources, what it
    holds is half of what the question asks: a gap, naming the words it does not hold. One
    unknown word of three is not enough."""
    answered = _query(many_sources, "patching on sundays for payroll")
    assert answered["status"] == "answered"
    assert answered["unmatched_terms"] == ["payroll"]
    gap = _query(many_sources, "patching on sundays for payroll auditors")
    assert gap["status"] == "gap" and gap["citations"] == []
    assert gap["unmatched_terms"] == ["payroll", "auditors"]


def test_a_small_knowledge_base_lacks_words_by_its_size(topical: Path) -> None:
    """33 sources: half the question unknown is no reason for a gap there."""
    body = _query(topical, "patching on sundays for payroll auditors")
    assert body["status"] == "answered"
    assert body["unmatched_terms"] == ["payroll", "auditors"]


def test_mostly_unmatched_counts_the_words_no_source_holds() -> None:
    big, small = KNOWN_WORDS_SOURCES, KNOWN_WORDS_SOURCES - 1
    assert mostly_unmatched(["a", "b"], {"a": 3, "b": 0}, big)
    assert not mostly_unmatched(["a", "b"], {"a": 3, "b": 0}, small)
    assert not mostly_unmatched(["a", "b", "c"], {"a": 3, "b": 1, "c": 0}, big)
    assert mostly_unmatched(["a", "b", "c", "d"], {"a": 3, "b": 1, "c": 0, "d": 0}, big)
    five = {"a": 3, "b": 1, "c": 2, "d": 0, "e": 0}
    assert not mostly_unmatched(["a", "b", "c", "d", "e"], five, big)
    # A one-term question is the other rule's (its term must be known).
    assert not mostly_unmatched(["a"], {"a": 0}, big)
    # Chinese bigrams are pieces of words: 搜索文本's 索文 spans two words and is in no source;
    # only the words count (none here but the Latin one, known).
    zh = {"搜索": 40, "索文": 0, "文本": 12, "grep": 3}
    assert not mostly_unmatched(["搜索", "索文", "文本", "grep"], zh, big)
    # A phrase term (a Japanese or Korean word of three or more characters) is a word.
    ja = {"フォ ォル ルダ": 0, "圧縮": 0, "zip": 5}
    assert mostly_unmatched(["フォ ォル ルダ", "圧縮", "zip"], ja, big)


def test_a_source_whose_sentences_each_hold_one_word_is_found(topical: Path) -> None:
    """No sentence of maintenance.md holds two of the question's words (nor does its heading
    or path), yet it is the only source holding all four: it answers first."""
    body = _query(topical, "canary cluster patching overnight")
    assert body["status"] == "answered"
    cited = [c["evidence"][0]["source_path"] for c in body["citations"]]
    assert cited[0] == "docs/ops/maintenance.md"
    statements = {c["claim"]["statement"] for c in body["citations"]}
    assert "Patching happens on Sundays." in statements


def test_gaps_and_answers_are_deterministic(topical: Path) -> None:
    for question in ("List the service sessions for the payroll audit", "canary cluster"):
        runs = [_query(topical, question, "--limit", "10") for _ in range(2)]
        for body in runs:
            body.pop("timing")
        assert json.dumps(runs[0], sort_keys=True) == json.dumps(runs[1], sort_keys=True)


def test_the_g_statistic() -> None:
    assert g_statistic(0, 0.5) == 0.0
    assert g_statistic(2, 2.0) == 0.0  # as often as chance: no evidence
    assert g_statistic(1, 0.375) < MIN_G  # once, where chance gives a third: not enough
    assert g_statistic(5, 0.5) > MIN_G
    # 2 (o ln(o/e) - (o - e)), by hand: o = 4, e = 1 -> 2 (4 ln 4 - 3) = 5.0904
    assert abs(g_statistic(4, 1.0) - 5.0904) < 1e-4


def test_an_index_whose_row_count_is_damaged_fails_closed() -> None:
    """Terms held by rows while FTS5's own record counts none: the chance a pair meets by
    cannot be computed, and an index in that state is damaged (never a division by zero)."""
    import sqlite3

    from raytsystem.errors import IntegrityError
    from raytsystem.pipeline.claim_scoring import fts_totals, vocabulary
    from raytsystem.pipeline.meeting import words_meet

    def meet(terms: list[str]) -> bool:
        held = vocabulary(conn, "claims_fts", terms)
        return words_meet(conn, terms, held, fts_totals(conn, "claims_fts")[0])

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE claims_fts USING fts5(terms, heading, path)")
    conn.executemany(
        "INSERT INTO claims_fts VALUES (?, '', '')", [("retri gateway",), ("refund list",)]
    )
    conn.commit()  # FTS5 writes its record of rows and tokens when the transaction ends
    assert meet(["retri", "gateway"])
    conn.execute("UPDATE claims_fts_data SET block = zeroblob(2) WHERE id = 1")
    conn.commit()
    with pytest.raises(IntegrityError) as caught:
        meet(["retri", "gateway"])
    assert caught.value.code == "index_corrupt"


def test_a_named_model_judges_instead_of_the_word_gaps(topical: Path) -> None:
    """With `[meaning] model` named, the word rules make no gap (ADR 0043): the question whose
    words meet only by chance gets the claims they found, judged by meaning; at a bar every
    citation passes, it is answered."""
    from test_meaning import configure, tiny_model

    question = "Which team should update the process list?"
    assert _query(topical, question)["status"] == "gap"
    tiny_model(topical.parent / "model")
    configure(topical, str(topical.parent / "model"), -1.0)
    judged = _query(topical, question)
    assert judged["status"] == "answered" and judged["meaning"]["similarity"] is not None
