"""Stored vectors (ADR 0044, `storage/vectors.py`, `pipeline/encoding.py`, `meaning.Fused`).

With `[meaning] model` named, an ingest encodes the current generation's statements once each
and its sources; a query of an encoded generation ranks with them and fails closed on a
vector that is missing or was not made by the encoder. Runs on the small BERT of
`test_meaning`, through the CLI."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, write
from test_meaning import DOC, REAL_MODEL, configure, tiny_model

from raytsystem.config import DEFAULT_MIN_SIMILARITY, MeaningConfig
from raytsystem.model.scripts import declared_languages, reads, scripts_read
from raytsystem.pipeline.encoding import in_context
from raytsystem.pipeline.meaning import (
    CLAIM_WEIGHT,
    JUDGED,
    SOURCE_BEST_WEIGHT,
    SOURCE_MEAN_WEIGHT,
    Fused,
    Meaning,
)
from raytsystem.pipeline.query import parse_query, searched_terms
from raytsystem.pipeline.ranking import candidates
from raytsystem.storage.vectors import FILE_NAME, VectorStore

QUESTION = "When are refunds paid back to the card?"
MORE = """# Refunds

Refunds are paid back to the card within five working days.

The ledger keeps every refund for ten years.
"""


def _ingest(workspace: Path) -> dict:
    result = run_cli("ingest", "--json", cwd=workspace)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def _ask(workspace: Path, question: str = QUESTION) -> dict:
    result = run_cli("query", question, "--json", "--limit", "3", cwd=workspace)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def _modelled(workspace: Path, bar: float = -1.0) -> Path:
    write(workspace, "knowledge/payments.md", DOC)
    folder = tiny_model(workspace / "models" / "tiny")
    configure(workspace, "models/tiny", bar)
    return folder


def _index(workspace: Path) -> Path:
    return max((workspace / ".raytsystem" / "indexes").glob("0*.sqlite3"))


def _texts(workspace: Path) -> set[str]:
    """What an ingest encodes: each claim's statement alone and in context."""
    with sqlite3.connect(_index(workspace)) as conn:
        rows = conn.execute("SELECT heading_path, text FROM docs WHERE kind = 'claim'")
        return {text for h, t in rows for text in (t, in_context(h, t))}


def test_a_claim_in_context_is_its_headings_then_its_statement() -> None:
    assert in_context('["Payments","Refunds"]', "Refunds take a week.") == (
        "Payments / Refunds: Refunds take a week."
    )
    assert in_context("[]", "Refunds take a week.") == "Refunds take a week."
    assert in_context('[" ", "Refunds"]', "X.") == "Refunds: X."


def test_each_statement_is_encoded_once_and_queries_rank_with_the_vectors(
    workspace: Path, tmp_path: Path
) -> None:
    _modelled(workspace)
    first = _ingest(workspace)
    assert first["created"] and first["vectors_encoded"] == len(_texts(workspace)) > 0
    again = _ingest(workspace)
    assert not again["created"] and again["vectors_encoded"] == 0

    answer = _ask(workspace)
    assert answer["status"] == "answered" and answer["meaning"]["vectors"] == "stored"
    twice = _ask(workspace)
    assert {k: v for k, v in twice.items() if k != "timing"} == {
        k: v for k, v in answer.items() if k != "timing"
    }

    dataset = write(
        tmp_path,
        "eval.json",
        json.dumps({"name": "tiny", "cases": [{"id": "1", "query": QUESTION}]}),
    )
    evaluated = run_cli("eval", str(dataset), "--json", cwd=workspace)
    assert evaluated.code == 0, evaluated.stderr
    assert json.loads(evaluated.stdout)["meaning"]["vectors"] == "stored"

    # A new file: its new sentence alone and in context, its other sentence (stated before)
    # in its new context only.
    before = _texts(workspace)
    write(workspace, "knowledge/more.md", MORE)
    third = _ingest(workspace)
    assert third["created"] and third["vectors_encoded"] == len(_texts(workspace) - before) == 3


def test_the_rescoring_adds_the_documented_similarities(workspace: Path, tmp_path: Path) -> None:
    folder = _modelled(workspace)
    write(workspace, "knowledge/more.md", MORE)
    _ingest(workspace)
    meaning = Meaning.named(
        workspace,
        MeaningConfig(model="models/tiny", min_similarity=-1.0),
        workspace / ".raytsystem",
    )
    assert meaning.folder == folder
    index = _index(workspace)
    store = VectorStore.reading(
        workspace / ".raytsystem", meaning.encoder.digest, meaning.encoder.width
    )
    assert store is not None
    with sqlite3.connect(f"file:{index}?mode=ro", uri=True) as conn:
        terms, df = searched_terms(conn, parse_query(QUESTION))
        plain = {c.rowid: c for c in candidates(conn, terms, df, word_gaps=False)}
        found = candidates(conn, terms, df, word_gaps=False)
        fused = Fused(meaning, store, conn, QUESTION)
        rescored = fused.rescore(found)
        judged = fused.similarities(c.rowid for c in found)
        claims = conn.execute(
            "SELECT rowid, source_id, heading_path, text FROM docs WHERE kind = 'claim'"
        ).fetchall()
    store.close()
    # The expected scores from the encoder itself, not from the store: sources read their
    # claims in context.
    q = meaning.encoder.encode([QUESTION])[0]
    texts = [in_context(h, t) for _, _, h, t in claims]
    assert "Refunds: Refunds are paid back to the card within five working days." in texts
    vectors = dict(zip([r for r, *_ in claims], meaning.encoder.encode(texts), strict=True))
    # A claim itself, and the meaning gap, read its statement alone.
    statements = meaning.encoder.encode([t for *_, t in claims])
    alone = {r: float(v @ q) for (r, *_), v in zip(claims, statements, strict=True)}
    by_source: dict[str, list[int]] = {}
    for rowid, source_id, *_ in claims:
        by_source.setdefault(source_id, []).append(rowid)
    assert len(found) >= 2 and {c.source_id for c in found} <= set(by_source)

    def source_terms(source_id: str) -> float:
        own = by_source[source_id]
        mean = np.sum([vectors[r] for r in own], axis=0)
        mean /= np.linalg.norm(mean)
        return SOURCE_MEAN_WEIGHT * float(mean @ q) + SOURCE_BEST_WEIGHT * max(
            float(vectors[r] @ q) for r in own
        )

    for c in found:
        want = plain[c.rowid].score + source_terms(c.source_id) + CLAIM_WEIGHT * alone[c.rowid]
        assert c.score == pytest.approx(want, abs=1e-5)
        assert judged[c.rowid] == pytest.approx(alone[c.rowid], abs=1e-5)

    # The first two sources' other claims join, with their source's least relevance by
    # words: "The ledger keeps every refund for ten years." holds one of the four words.
    added = rescored[len(found) :]
    assert added and not any(c.judged for c in added)
    assert not {c.rowid for c in added} & set(plain)
    ledger = next(r for r, _, _, t in claims if t.startswith("The ledger keeps"))
    assert ledger in {c.rowid for c in added}
    order = [c.source_id for c in sorted(found, key=lambda c: (c.tier, -c.score))]
    assert {c.source_id for c in added} <= set(list(dict.fromkeys(order))[:2])
    for c in added:
        words = min(plain[x.rowid].score for x in found if x.source_id == c.source_id)
        want = words + source_terms(c.source_id) + CLAIM_WEIGHT * alone[c.rowid]
        assert c.score == pytest.approx(want, abs=1e-5)
    # They are cited, never judged: with none of the words' claims, an answer is a gap even
    # at the lowest bar.
    assert meaning.judge_ranked(added, fused)[0] == []
    assert meaning.judge_ranked(rescored, fused)[0] == rescored
    # Only the first 10 citations are judged, whatever the limit: a claim the words found at
    # the 11th place does not answer a question; one merged into a citation is judged.
    words = next(c for c in found if c.judged)
    unjudged = [replace(added[0], merged=[]) for _ in range(JUDGED)]
    assert meaning.judge_ranked([*unjudged, words], fused)[0] == []
    carrying = [replace(added[0], merged=[words]), *unjudged]
    assert meaning.judge_ranked(carrying, fused)[0] == carrying


@pytest.mark.parametrize(
    "damage, code",
    [
        ("DELETE FROM vectors", "vector_missing"),
        ("DELETE FROM source_vectors", "vector_missing"),
        ("UPDATE vectors SET vector = substr(vector, 1, 8)", "vector_invalid"),
        ("scaled", "vector_invalid"),
    ],
)
def test_a_damaged_store_fails_the_query_closed(workspace: Path, damage: str, code: str) -> None:
    _modelled(workspace)
    _ingest(workspace)
    with sqlite3.connect(workspace / ".raytsystem" / FILE_NAME) as conn:
        if damage == "scaled":  # a vector made larger ranks its claim higher: not the encoder's
            rows = conn.execute("SELECT model, text_hash, vector FROM vectors").fetchall()
            for model, key, vector in rows:
                bigger = (np.frombuffer(vector, "<f4") * 2).astype("<f4").tobytes()
                conn.execute(
                    "UPDATE vectors SET vector = ? WHERE model = ? AND text_hash = ?",
                    (bigger, model, key),
                )
        else:
            conn.execute(damage)
    result = run_cli("query", QUESTION, "--json", cwd=workspace)
    assert result.code == 3, result.stderr
    assert json.loads(result.stdout)["error"]["code"] == code


def test_without_the_generations_vectors_the_first_citations_are_encoded(
    workspace: Path,
) -> None:
    _modelled(workspace)
    _ingest(workspace)
    (workspace / ".raytsystem" / FILE_NAME).unlink()
    assert _ask(workspace)["meaning"]["vectors"] == "query"
    assert _ingest(workspace)["vectors_encoded"] > 0  # nothing changed, but encoded again
    assert _ask(workspace)["meaning"]["vectors"] == "stored"

    # Another model's vectors are not this one's: encoded again, under its own name.
    tiny_model(workspace / "models" / "other", seed=8)
    configure(workspace, "models/other", -1.0)
    assert _ask(workspace)["meaning"]["vectors"] == "query"
    assert _ingest(workspace)["vectors_encoded"] == len(_texts(workspace))
    assert _ask(workspace)["meaning"]["vectors"] == "stored"


def _verify(workspace: Path) -> dict:
    result = run_cli("verify", "--json", cwd=workspace)
    return json.loads(result.stdout) | {"exit": result.code}


def test_verify_encodes_again_and_finds_a_vector_replaced(workspace: Path) -> None:
    _modelled(workspace)
    write(workspace, "knowledge/more.md", MORE)
    _ingest(workspace)
    clean = _verify(workspace)
    assert clean["ok"] and clean["exit"] == 0, clean["findings"]
    assert clean["counts"]["vectors"] == len(_texts(workspace))
    # Fewer statements than the sample: every one is encoded again.
    assert clean["counts"]["vectors_encoded_again"] == clean["counts"]["vectors"]

    # Two statements' vectors swapped: each is still a unit vector, which a query cannot tell.
    with sqlite3.connect(workspace / ".raytsystem" / FILE_NAME) as conn:
        (a, va), (b, vb) = conn.execute("SELECT text_hash, vector FROM vectors LIMIT 2")
        conn.execute("UPDATE vectors SET vector = ? WHERE text_hash = ?", (vb, a))
        conn.execute("UPDATE vectors SET vector = ? WHERE text_hash = ?", (va, b))
        (digest,) = conn.execute("SELECT digest FROM source_vectors LIMIT 1").fetchone()
        conn.execute("UPDATE source_vectors SET vector = ? WHERE digest = ?", (va, digest))
    damaged = _verify(workspace)
    assert not damaged["ok"] and damaged["exit"] != 0
    found = {(f["code"], f["subject"]) for f in damaged["findings"]}
    assert ("vector_mismatch", f"text {a.hex()}") in found
    assert ("vector_mismatch", f"text {b.hex()}") in found
    assert ("vector_mismatch", f"source {digest}") in found


def test_verify_notes_a_generation_not_encoded(workspace: Path) -> None:
    _modelled(workspace)
    _ingest(workspace)
    (workspace / ".raytsystem" / FILE_NAME).unlink()
    report = _verify(workspace)
    assert report["ok"], report["findings"]
    assert [f["code"] for f in report["findings"]] == ["vectors_not_encoded"]


@pytest.mark.skipif(not REAL_MODEL, reason="RAYTSYSTEM_TEST_MODEL names no model folder")
def test_the_measured_model_ranks_with_stored_vectors(workspace: Path) -> None:
    write(workspace, "knowledge/payments.md", DOC)
    write(workspace, "knowledge/more.md", MORE)
    configure(workspace, REAL_MODEL, DEFAULT_MIN_SIMILARITY)
    assert _ingest(workspace)["vectors_encoded"] == len(_texts(workspace))
    answer = _ask(workspace)
    assert answer["status"] == "answered" and answer["meaning"]["vectors"] == "stored"
    assert "Refunds are paid back" in answer["answer"].split("[1]")[0]
    off = _ask(workspace, "Which card did the five working horses play?")
    assert off["status"] == "gap" and off["meaning"]["similarity"] < DEFAULT_MIN_SIMILARITY


@pytest.mark.parametrize(
    "card, languages",
    [
        ("---\nlanguage: en\nlicense: apache-2.0\n---\n# all-MiniLM", ("en",)),
        (
            "---\nlicense: mit\nlanguage:\n- en\n- ZH\n- pt-br\ntags:\n- x\n---\n",
            ("en", "zh", "pt-br"),
        ),
        ("---\nlanguage: [ru, 'uk']\n---\n", ("ru", "uk")),
        ("---\ntags:\n- language\n---\nlanguage: en\n", ()),  # outside the front matter
        ("# A model\n\nlanguage: en\n", ()),  # no front matter
    ],
)
def test_a_model_card_declares_its_languages(tmp_path: Path, card: str, languages: tuple) -> None:
    (tmp_path / "README.md").write_text(card, encoding="utf-8")
    assert declared_languages(tmp_path) == languages
    assert declared_languages(tmp_path / "absent") == ()


def test_a_model_reads_the_scripts_of_its_languages() -> None:
    english = scripts_read(["en"])
    assert english == frozenset({"LATIN"})
    assert scripts_read(["ja"]) == frozenset({"CJK", "HIRAGANA", "KATAKANA"})
    assert scripts_read([]) is None and scripts_read(["en", "xx"]) is None  # unknown: all
    assert reads(english, "What is the capital city of Australia?")
    assert reads(english, "Wie öffne ich eine Datei?")
    assert not reads(english, "显示磁盘使用情况")
    assert not reads(english, "ファイルを圧縮する")
    assert not reads(english, "Как архивировать файлы")
    assert reads(english, "AZT 与 ribavirin")  # most letters are Latin
    assert reads(english, "2024?") and reads(None, "显示磁盘使用情况")
    assert reads(scripts_read(["ru"]), "Как архивировать файлы")


def test_a_question_the_model_cannot_read_is_answered_by_the_words(workspace: Path) -> None:
    write(
        workspace, "knowledge/disk.md", "# 磁盘\n\n显示磁盘使用情况。\n\n清理磁盘上的临时文件。\n"
    )
    _ingest(workspace)
    plain = _ask(workspace, "显示磁盘使用情况")
    assert plain["status"] == "answered" and "meaning" not in plain
    folder = _modelled(workspace, 1.0)  # a bar no statement reaches: a gap if it judged
    (folder / "README.md").write_text("---\nlanguage: en\n---\n", encoding="utf-8")
    _ingest(workspace)
    answer = _ask(workspace, "显示磁盘使用情况")
    assert answer["status"] == "answered"
    assert answer["meaning"]["read"] is False and answer["meaning"]["similarity"] is None
    assert [c["claim"]["id"] for c in answer["citations"]] == [
        c["claim"]["id"] for c in plain["citations"]
    ]
    english = _ask(workspace)
    assert english["meaning"]["read"] is True and english["status"] == "gap"


def test_the_next_ingest_mends_a_store_that_lost_vectors(workspace: Path) -> None:
    _modelled(workspace)
    encoded = _ingest(workspace)["vectors_encoded"]
    with sqlite3.connect(workspace / ".raytsystem" / FILE_NAME) as conn:
        conn.execute("DELETE FROM vectors")
        conn.execute("DELETE FROM source_vectors")
    assert run_cli("query", QUESTION, "--json", cwd=workspace).code == 3
    assert _ingest(workspace)["vectors_encoded"] == encoded  # the generation was marked
    assert _ask(workspace)["meaning"]["vectors"] == "stored"


def test_a_store_that_is_not_a_database_is_a_finding_not_a_crash(workspace: Path) -> None:
    _modelled(workspace)
    (workspace / ".raytsystem").mkdir(exist_ok=True)
    (workspace / ".raytsystem" / FILE_NAME).write_bytes(b"not a database" * 100)
    report = _ingest(workspace)
    assert report["created"]  # the generation is made whatever happens to its vectors
    assert [f["code"] for f in report["findings"]] == ["vectors_not_encoded"]
    checked = _verify(workspace)
    assert checked["exit"] == 3 and "vector_invalid" in {f["code"] for f in checked["findings"]}


def test_verify_refuses_a_vector_that_is_not_a_number(workspace: Path) -> None:
    _modelled(workspace)
    _ingest(workspace)
    with sqlite3.connect(workspace / ".raytsystem" / FILE_NAME) as conn:
        (key,) = conn.execute("SELECT text_hash FROM vectors LIMIT 1").fetchone()
        nan = np.full(16, np.nan, "<f4").tobytes()
        conn.execute("UPDATE vectors SET vector = ? WHERE text_hash = ?", (nan, key))
    found = {(f["code"], f["subject"]) for f in _verify(workspace)["findings"]}
    assert ("vector_invalid", f"text {key.hex()}") in found


def test_verify_runs_its_other_checks_when_the_model_cannot_be_read(workspace: Path) -> None:
    _modelled(workspace)
    _ingest(workspace)
    configure(workspace, "models/absent", 0.38)
    report = _verify(workspace)
    assert report["exit"] == 3 and report["counts"]  # the other checks ran and counted
    assert [f["code"] for f in report["findings"]] == ["semantic_model_invalid"]
