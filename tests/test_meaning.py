"""The meaning gap (ADR 0043, `pipeline/meaning.py`, `model/sentence_encoder.py`).

The encoder and the gap run on a small BERT made here (random weights, its own WordPiece
vocabulary, written as a sentence-transformers folder), so every path runs in every CI run;
the model measured, all-MiniLM-L6-v2, is tested too when `RAYTSYSTEM_TEST_MODEL` names its
folder (`.ci/run` fetches it)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, write

from raytsystem.config import DEFAULT_MIN_SIMILARITY
from raytsystem.model.sentence_encoder import ModelError, SentenceEncoder, gelu
from raytsystem.pipeline.meaning import JUDGED, READ, WEIGHT, Meaning
from raytsystem.pipeline.ranking import Candidate

DOC = """# Payments

Refunds are paid back to the card within five working days.
A refund over 500 euros needs a second approval.

# Search

The index is rebuilt every night from the ledger.
"""
WORDS = sorted(
    {
        w.strip(".,?").lower()
        for w in (DOC + " when are refunds paid back to the card what is the capital").split()
    }
    - {"#", ""}
)


def tiny_model(folder: Path, seed: int = 7) -> Path:
    """A two-layer BERT (width 16, two heads) with random weights, as a model folder."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    folder.mkdir(parents=True)
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS])}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    width, inner, layers = 16, 32, 2
    config = {
        "model_type": "bert",
        "hidden_size": width,
        "num_attention_heads": 2,
        "num_hidden_layers": layers,
        "intermediate_size": inner,
        "max_position_embeddings": 64,
        "type_vocab_size": 2,
        "vocab_size": len(vocab),
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-12,
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    rng = np.random.default_rng(seed)

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    weights = {
        "embeddings.word_embeddings.weight": normal(len(vocab), width),
        "embeddings.position_embeddings.weight": normal(64, width),
        "embeddings.token_type_embeddings.weight": normal(2, width),
        "embeddings.LayerNorm.weight": np.ones(width, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(width, np.float32),
    }
    for i in range(layers):
        at = f"encoder.layer.{i}."
        for name, out, into in [
            ("attention.self.query", width, width),
            ("attention.self.key", width, width),
            ("attention.self.value", width, width),
            ("attention.output.dense", width, width),
            ("intermediate.dense", inner, width),
            ("output.dense", width, inner),
        ]:
            weights[at + name + ".weight"] = normal(out, into)
            weights[at + name + ".bias"] = normal(out)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            weights[at + norm + ".weight"] = np.ones(width, np.float32)
            weights[at + norm + ".bias"] = np.zeros(width, np.float32)
    save_file(weights, str(folder / "model.safetensors"))
    return folder


def test_gelu_is_the_exact_one() -> None:
    xs = np.linspace(-8, 8, 4001, dtype=np.float32)
    want = np.array([0.5 * x * (1 + math.erf(x / math.sqrt(2))) for x in xs.tolist()])
    assert np.abs(gelu(np, xs) - want).max() < 2e-6


def test_vectors_are_unit_and_a_text_encodes_alike_in_any_batch(tmp_path: Path) -> None:
    encoder = SentenceEncoder(tiny_model(tmp_path / "m"))
    short = "Refunds take five days."
    longer = "The index is rebuilt every night from the ledger, and refunds are paid back."
    alone = encoder.encode([short])
    together = encoder.encode([longer, short, short.upper()])
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    # Padding to the longer text's length is masked out of attention and of the mean.
    assert np.abs(alone[0] - together[1]).max() < 1e-5
    assert np.abs(together[1] - together[2]).max() < 1e-5  # the tokenizer lowercases
    assert float(together[0] @ together[1]) < 0.999  # different texts, different vectors
    assert encoder.encode([short]).tobytes() == alone.tobytes()


@pytest.mark.parametrize(
    "damage, says",
    [
        ("missing", "no model folder"),
        ("not_bert", "not a BERT"),
        ("no_weights", "lacks a file"),
        ("max_pooling", "does not pool by mean"),
        ("heads_text", "no usable num_attention_heads"),
        ("layer_missing", "lack encoder.layer.1.attention.self.key.weight"),
        ("extra_layer", "more layers than its config"),
    ],
)
def test_a_model_folder_that_cannot_be_run_is_named(tmp_path: Path, damage: str, says: str) -> None:
    folder = tiny_model(tmp_path / "m")
    if damage == "missing":
        folder = tmp_path / "nowhere"
    elif damage == "not_bert":
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(config | {"model_type": "gpt2"}))
    elif damage == "no_weights":
        (folder / "model.safetensors").unlink()
    elif damage == "max_pooling":
        write(folder, "1_Pooling/config.json", json.dumps({"pooling_mode_max_tokens": True}))
    elif damage == "heads_text":
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(config | {"num_attention_heads": "two"}))
    else:
        from safetensors.numpy import load_file, save_file

        weights = load_file(str(folder / "model.safetensors"))
        if damage == "layer_missing":
            del weights["encoder.layer.1.attention.self.key.weight"]
        else:
            config = json.loads((folder / "config.json").read_text())
            (folder / "config.json").write_text(json.dumps(config | {"num_hidden_layers": 1}))
        save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(ModelError, match=says) as caught:
        SentenceEncoder(folder)
    assert caught.value.code == "semantic_model_invalid"


def test_the_first_citations_are_reordered_by_meaning_within_their_tiers(tmp_path: Path) -> None:
    folder = tiny_model(tmp_path / "m")
    meaning = Meaning(SentenceEncoder(folder), folder, -1.0, tmp_path / "state")
    lines = [w for w in DOC.replace("#", "").split("\n") if w.strip()]
    chosen = [
        Candidate(
            f"clm_{i}", f"src_{i % 3}", 1.0 - i / 50, f"k{i}", i, 1 if i else 0, text=lines[i % 5]
        )
        for i in range(READ + 3)
    ]
    question = "When are refunds paid back to the card?"
    alike = meaning.similarities(question, [c.text for c in chosen[:READ]])
    got, judged = meaning.judge(question, chosen, 50)
    assert judged["similarity"] == round(max(alike[:JUDGED]), 4)
    assert got[0].claim_id == chosen[0].claim_id  # tier 0 stays first
    fused = {c.claim_id: c.score + WEIGHT * a for c, a in zip(chosen, alike, strict=False)}
    head = [fused[c.claim_id] for c in got[1:READ]]
    assert head == sorted(head, reverse=True)
    assert got[READ:] == chosen[READ:]  # past the first READ, the composition's order
    assert sorted(c.claim_id for c in got) == sorted(c.claim_id for c in chosen)
    # With one claim per source before the demotion, the three sources lead.
    capped, _ = meaning.judge(question, chosen, 1)
    assert len({c.source_id for c in capped[1:4]}) == 3
    # Below the bar, nothing: a gap.
    strict = Meaning(meaning.encoder, folder, 1.0, tmp_path / "state")
    assert strict.judge(question, chosen, 2)[0] == []


def configure(workspace: Path, model: str, bar: float) -> None:
    config = workspace / "raytsystem.toml"
    text = config.read_text(encoding="utf-8").split("[meaning]")[0]
    rest = config.read_text(encoding="utf-8").split("[meaning]")[1].split("\n[", 1)
    tail = "\n[" + rest[1] if len(rest) > 1 else ""
    config.write_text(
        f'{text}[meaning]\nmodel = "{model}"\nmin_similarity = {bar}\n{tail}', encoding="utf-8"
    )


def _query(workspace: Path, question: str) -> dict:
    result = run_cli("query", question, "--json", "--limit", "3", cwd=workspace)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def test_the_meaning_gap_end_to_end(workspace: Path, tmp_path: Path) -> None:
    write(workspace, "knowledge/payments.md", DOC)
    assert run_cli("ingest", cwd=workspace).code == 0
    question = "When are refunds paid back to the card?"
    plain = _query(workspace, question)
    assert plain["status"] == "answered" and "meaning" not in plain

    tiny_model(workspace / "models" / "tiny")
    configure(workspace, "models/tiny", -1.0)  # workspace-relative; every citation passes
    kept = _query(workspace, question)
    assert kept["status"] == "answered"
    ids = [c["claim"]["id"] for c in kept["citations"]]
    assert ids == [c["claim"]["id"] for c in plain["citations"]]
    judged = kept["meaning"]
    assert judged["model"] == "tiny" and judged["min_similarity"] == -1.0
    assert judged["vectors"] == "query"  # named after the ingest: nothing is stored yet
    assert -1.0 <= judged["similarity"] <= 1.0

    configure(workspace, "models/tiny", 1.0)  # no statement is the question itself
    gap = _query(workspace, question)
    assert gap["status"] == "gap" and gap["citations"] == [] and gap["answer"] == ""
    assert gap["meaning"]["similarity"] == judged["similarity"]  # the same first citations
    again = _query(workspace, question)
    assert {k: v for k, v in again.items() if k != "timing"} == {
        k: v for k, v in gap.items() if k != "timing"
    }

    configure(workspace, "models/absent", 0.35)
    broken = run_cli("query", question, "--json", cwd=workspace)
    assert broken.code == 5
    assert json.loads(broken.stdout)["error"]["code"] == "semantic_model_invalid"
    configure(workspace, "models/tiny", 1.5)
    invalid = run_cli("query", question, "--json", cwd=workspace)
    assert invalid.code == 5
    error = json.loads(invalid.stdout)["error"]
    assert error["code"] == "config_invalid" and "meaning.min_similarity" in error["message"]


REAL_MODEL = os.environ.get("RAYTSYSTEM_TEST_MODEL", "")


@pytest.mark.skipif(not REAL_MODEL, reason="RAYTSYSTEM_TEST_MODEL names no model folder")
def test_the_measured_model_tells_an_off_topic_question(workspace: Path) -> None:
    encoder = SentenceEncoder(Path(REAL_MODEL))
    car, crimson, market = encoder.encode(
        ["This is a red car.", "A crimson automobile.", "The stock market fell."]
    )
    assert float(car @ crimson) > 0.5 > 0.2 > float(car @ market)

    write(workspace, "knowledge/payments.md", DOC)
    assert run_cli("ingest", cwd=workspace).code == 0
    # Its words meet in a sentence ("card", "five", "working") that is about something else.
    off_topic = "Which card did the five working horses play?"
    assert _query(workspace, off_topic)["status"] == "answered"
    configure(workspace, REAL_MODEL, DEFAULT_MIN_SIMILARITY)
    assert _query(workspace, "When are refunds paid back to the card?")["status"] == "answered"
    off = _query(workspace, off_topic)
    assert off["status"] == "gap" and off["meaning"]["similarity"] < DEFAULT_MIN_SIMILARITY
