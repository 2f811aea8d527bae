"""QUERY end to end through the CLI: the answer schema, citations re-checked by independent code,
gaps, determinism, literal handling of FTS syntax and SQL, and every fail-closed case."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPORA, Backend, blob_bytes, run_cli, tamper_blob, write

from raytsystem.ids import NEWEST
from raytsystem.model.objects import chain_ids, claim_hash

PAYMENTS = """# Payments

## Retries

Retries stop after at most 5 attempts. The backoff doubles each time, e.g. 1 s then 2 s.

- Refunds take 3 business days.
- Chargebacks are **rare** and go to [the risk team](https://example.com/risk).
"""
ONBOARDING = """# Onboarding

New engineers get a laptop on day one. Вход в систему занимает пять минут.
"""


@pytest.fixture
def kb(workspace: Path) -> Path:
    write(workspace, "docs/payments.md", PAYMENTS)
    write(workspace, "docs/onboarding.md", ONBOARDING)
    result = run_cli("ingest", "--json", cwd=workspace)
    assert result.code == 0, result.stderr
    return workspace


def query(ws: Path, *args: str) -> Any:
    result = run_cli("query", *args, "--json", cwd=ws)
    assert result.code == 0, (result.stdout, result.stderr)
    return result.json()


def fail_closed(ws: Path, *args: str) -> dict[str, Any]:
    result = run_cli("query", *args, "--json", cwd=ws)
    assert result.code == 3, (result.code, result.stdout, result.stderr)
    body = result.json()
    assert set(body) == {"error"}, "a failed query must carry no answer at all"
    return body["error"]


def check_independently(ws: Path, body: dict[str, Any]) -> None:
    """Re-check every citation with hashlib and the raw files, not with raytsystem's code."""
    answer = body["answer"]
    for citation in body["citations"]:
        span = citation["answer_span"]
        assert answer[span["start"] : span["end"]] == citation["claim"]["statement"]
        utf16 = answer.encode("utf-16-le")
        u = citation["answer_span_utf16"]
        assert (
            utf16[2 * u["start"] : 2 * u["end"]].decode("utf-16-le")
            == citation["claim"]["statement"]
        )
        for ev in citation["evidence"]:
            excerpt = ev["cited_excerpt"]
            assert hashlib.sha256(excerpt.encode("utf-8")).hexdigest() == ev["cited_excerpt_sha256"]
            assert (
                " ".join(excerpt.split()) == citation["claim"]["statement"]
                or ev["role"] == "citation"
            )
            import blake3

            raw = blob_bytes(ws / "_raw", ev["raw_blake3"])
            assert blake3.blake3(raw).hexdigest() == ev["raw_blake3"]
            raw_lines = (ws / ev["source_path"]).read_text(encoding="utf-8").splitlines()
            held = " ".join(raw_lines[ev["lines"]["start"] - 1 : ev["lines"]["end"]])
            for word in excerpt.split():
                assert word.strip(".,*[]()") in held


def test_answer_schema_and_citations_verify_independently(kb: Path) -> None:
    body = query(kb, "how many retry attempts")
    assert body["schema_version"] == "1"
    assert body["status"] == "answered"
    assert body["generation"]["number"] == 1 and len(body["generation"]["hash"]) == 64
    first = body["citations"][0]
    assert first["id"] == 1
    assert first["claim"]["statement"] == "Retries stop after at most 5 attempts."
    assert first["claim"]["status"] == "confirmed" and first["claim"]["authority"] == "extracted"
    ev = first["evidence"][0]
    assert ev["source_path"] == "docs/payments.md"
    assert ev["adapter"] == "markdown@1"
    assert ev["lines"] == {"start": 5, "end": 5}
    for key in ("source_id", "revision_id", "normalization_id", "segment_id"):
        assert ev[key].split("_")[0] in {"src", "rev", "nrm", "seg"}
    check_independently(kb, body)


def test_markup_is_stripped_but_excerpt_is_exact(kb: Path) -> None:
    body = query(kb, "chargebacks risk team")
    statements = [c["claim"]["statement"] for c in body["citations"]]
    assert "Chargebacks are rare and go to the risk team." in statements
    check_independently(kb, body)


def test_russian_word_forms_are_found(kb: Path) -> None:
    body = query(kb, "входа минуты")
    assert body["status"] == "answered"
    assert "Вход в систему занимает пять минут." in body["answer"]
    check_independently(kb, body)


def test_no_match_is_an_explicit_gap_without_claim_text(kb: Path) -> None:
    body = query(kb, "quantum chromodynamics lattice")
    assert body["status"] == "gap"
    assert body["answer"] == "" and body["citations"] == []


def test_words_in_no_source_are_named_as_written(kb: Path) -> None:
    """A gap says which words of the question no source holds, as the user wrote them (not
    their stems), so that the question can be rephrased; an answer says it too."""
    gap = query(kb, "Which databases should the payments service use?")
    assert gap["status"] == "gap"
    assert gap["unmatched_terms"] == ["databases", "service", "use"]
    answered = query(kb, "How many attempts before retries stop, per gateway?")
    assert answered["status"] == "answered"
    assert answered["unmatched_terms"] == ["before", "per", "gateway"]
    assert query(kb, "refunds")["unmatched_terms"] == []
    text = run_cli("query", "Which databases should the payments service use?", cwd=kb)
    assert "in no source: databases, service, use" in text.stdout


def test_same_question_same_generation_gives_identical_json(kb: Path) -> None:
    def strip_timing(text: str) -> str:
        import json

        data = json.loads(text)
        data.pop("timing")
        return json.dumps(data, sort_keys=True)

    a = run_cli("query", "refunds retries", "--json", cwd=kb)
    b = run_cli("query", "refunds retries", "--json", cwd=kb)
    assert strip_timing(a.stdout) == strip_timing(b.stdout)


@pytest.mark.parametrize(
    "text",
    [
        'NEAR("retries" attempts, 2)',
        "retries* OR 1=1",
        "'; DROP TABLE claims; --",
        '"unbalanced quote retries',
        "retries AND NOT attempts",
        "col:retries {a b} ^retries",
        "retries\x07\x1b[31m\x7f",
    ],
)
def test_fts_syntax_and_sql_are_plain_text(kb: Path, text: str) -> None:
    result = run_cli("query", text, "--json", cwd=kb)
    assert result.code == 0, result.stdout + result.stderr
    assert result.json()["status"] in {"answered", "gap"}
    # The ledger survived.
    assert query(kb, "retry attempts")["status"] == "answered"


def test_query_limits_have_clear_errors(kb: Path) -> None:
    too_long = run_cli("query", "retry " * 1000, "--json", cwd=kb)
    assert too_long.code == 2 and too_long.json()["error"]["code"] == "query_too_long"
    many = run_cli("query", " ".join(f"word{i}" for i in range(40)), "--json", cwd=kb)
    assert many.code == 2 and many.json()["error"]["code"] == "query_too_many_terms"
    empty = run_cli("query", " ?! ", "--json", cwd=kb)
    assert empty.code == 2 and empty.json()["error"]["code"] == "query_empty"
    human = run_cli("query", "", cwd=kb)
    assert (
        human.code == 2
        and human.stderr.startswith("error[query_empty]")
        and "Traceback" not in human.stderr
    )


def _cited(kb: Path) -> dict[str, Any]:
    body = query(kb, "how many retry attempts")
    return body["citations"][0]


def test_fails_closed_when_a_raw_blob_is_altered(kb: Path) -> None:
    raw = _cited(kb)["evidence"][0]["raw_blake3"]
    tamper_blob(kb / "_raw", raw, lambda b: b.replace(b"5", b"6"))
    assert fail_closed(kb, "how many retry attempts")["code"] == "raw_blob_corrupt"


def test_fails_closed_when_a_raw_blob_is_missing(kb: Path) -> None:
    raw = _cited(kb)["evidence"][0]["raw_blake3"]
    tamper_blob(kb / "_raw", raw, lambda b: None)
    assert fail_closed(kb, "how many retry attempts")["code"] == "blob_missing"


def test_fails_closed_when_the_normalized_text_is_altered(kb: Path, backend: Backend) -> None:
    nid = _cited(kb)["evidence"][0]["normalization_id"]
    with backend.db(kb) as db:
        ((blob,),) = db.execute("SELECT text_blob FROM normalizations WHERE id = ?", (nid,))
    tamper_blob(kb / "_raw", blob, lambda b: b.replace(b"at most", b"at least"))
    assert fail_closed(kb, "how many retry attempts")["code"] == "normalized_text_corrupt"


def _index_file(ws: Path, number: int) -> Path:
    (path,) = (ws / ".raytsystem/indexes").glob(f"{number:06d}-*.sqlite3")
    return path


def test_fails_closed_when_an_index_row_is_altered(kb: Path) -> None:
    index = _index_file(kb, 1)
    os.chmod(index, 0o644)
    db = sqlite3.connect(index)
    db.execute("UPDATE docs SET text = 'Retries never stop.' WHERE text LIKE 'Retries stop%'")
    db.commit()
    db.close()
    assert fail_closed(kb, "how many retry attempts")["code"] == "index_row_mismatch"


def test_fails_closed_when_another_generations_index_is_in_place(kb: Path) -> None:
    write(kb, "docs/extra.md", "Retries are logged in the audit trail.\n")
    assert run_cli("ingest", cwd=kb).code == 0
    old, new = _index_file(kb, 1), _index_file(kb, 2)
    new.write_bytes(old.read_bytes())
    assert fail_closed(kb, "how many retry attempts")["code"] == "index_generation_mismatch"


def test_fails_closed_when_a_cited_claims_ledger_row_is_altered(kb: Path, backend: Backend) -> None:
    claim = _cited(kb)["claim"]["id"]
    with backend.db(kb) as db:
        db.execute(
            "UPDATE claims SET statement = 'Retries stop after at most 50 attempts.' WHERE id = ?",
            (claim,),
        )
    assert fail_closed(kb, "how many retry attempts")["code"] == "ledger_mismatch"


def test_fails_closed_when_evidence_span_is_altered(kb: Path, backend: Backend) -> None:
    evidence = _cited(kb)["evidence"][0]
    with backend.db(kb) as db:
        claim = _cited(kb)["claim"]["id"]
        db.execute('UPDATE evidence SET "end" = "end" - 1 WHERE claim_id = ?', (claim,))
    assert evidence["span"]["end"] > 0
    assert fail_closed(kb, "how many retry attempts")["code"] == "ledger_mismatch"


def test_fails_closed_when_a_claim_cites_another_sentence_consistently(
    kb: Path, backend: Backend
) -> None:
    """A forgery that re-derives every ID and hash it touches: the claim keeps its statement,
    its evidence now cites the next sentence (its exact span and SHA-256), and the claim state,
    claim hash and index row follow. Every hash in the chain matches; only the statement no
    longer says what its evidence says."""
    cited = _cited(kb)
    claim, old = cited["claim"], cited["evidence"][0]
    other = query(kb, "backoff doubles")["citations"][0]["evidence"][0]
    assert other["segment_id"] == old["segment_id"] and other["span"] != old["span"]
    start, end = other["span"]["start"], other["span"]["end"]
    eid = chain_ids(NEWEST).evidence_id(
        claim["id"], other["segment_id"], start, end, other["cited_excerpt_sha256"], "statement"
    )
    forged = claim_hash(claim["id"], claim["statement"], claim["authority"], claim["status"], [eid])
    with backend.db(kb) as db:
        db.execute(
            'UPDATE evidence SET id = ?, "start" = ?, "end" = ?, sha256 = ? WHERE claim_id = ?',
            (eid, start, end, other["cited_excerpt_sha256"], claim["id"]),
        )
        db.execute(
            "UPDATE claim_states SET evidence_ids = ?, claim_hash = ? WHERE claim_id = ?",
            (json.dumps([eid]), forged, claim["id"]),
        )
    index = _index_file(kb, 1)
    os.chmod(index, 0o644)
    with contextlib.closing(sqlite3.connect(index)) as db, db:
        db.execute("UPDATE docs SET object_hash = ? WHERE object_id = ?", (forged, claim["id"]))
    error = fail_closed(kb, "how many retry attempts")
    assert (error["code"], error["details"]["subject"]) == ("excerpt_mismatch", claim["id"])


def test_expect_generation_stale_fails_closed(kb: Path) -> None:
    first = query(kb, "retry attempts")["generation"]["hash"]
    assert query(kb, "retry attempts", "--expect-generation", first)["status"] == "answered"
    write(kb, "docs/extra.md", "Retries are logged in the audit trail.\n")
    assert run_cli("ingest", cwd=kb).code == 0
    assert (
        fail_closed(kb, "retry attempts", "--expect-generation", first)["code"]
        == "generation_stale"
    )


def test_generation_option_answers_from_an_older_generation(kb: Path) -> None:
    write(kb, "docs/payments.md", PAYMENTS.replace("at most 5 attempts", "at most 7 attempts"))
    assert run_cli("ingest", cwd=kb).code == 0
    now = query(kb, "how many retry attempts")
    then = query(kb, "how many retry attempts", "--generation", "1")
    assert now["generation"]["number"] == 2 and "7 attempts" in now["answer"]
    assert then["generation"]["number"] == 1 and "5 attempts" in then["answer"]
    check_independently_old = then["citations"][0]["evidence"][0]
    assert (
        hashlib.sha256(check_independently_old["cited_excerpt"].encode()).hexdigest()
        == (check_independently_old["cited_excerpt_sha256"])
    )


def test_fails_closed_when_the_generation_moves_during_the_query(kb: Path, tmp_path: Path) -> None:
    flag = tmp_path / "paused"
    env = {
        **os.environ,
        "RAYTSYSTEM_PAUSE_AT": "query.after_search:60",
        "RAYTSYSTEM_PAUSE_FLAG": str(flag),
    }
    slow = subprocess.Popen(
        [sys.executable, "-m", "raytsystem", "query", "retry attempts", "--json"],
        cwd=kb,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not flag.exists() and slow.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert flag.exists(), slow.communicate()
    write(kb, "docs/extra.md", "Retries are logged in the audit trail.\n")
    assert run_cli("ingest", cwd=kb).code == 0
    flag.unlink()  # the query goes on
    out, err = slow.communicate(timeout=60)
    assert slow.returncode == 3, (out, err)
    import json

    assert json.loads(out) == {
        "error": {"code": "generation_moved", "message": json.loads(out)["error"]["message"]}
    }


def test_query_before_any_ingest_is_a_clear_error(workspace: Path) -> None:
    result = run_cli("query", "anything", "--json", cwd=workspace)
    assert result.code == 4
    assert result.json()["error"]["code"] == "no_generation"


def test_end_to_end_on_the_tldr_corpus(workspace: Path) -> None:
    corpus = CORPORA / "tldr-multilingual"
    if not corpus.is_dir():
        pytest.skip("shared corpora are not present")
    import shutil

    for lang in ("pages", "pages.zh", "pages.ja", "pages.ru"):
        src = corpus / lang / "common"
        for name in ("tar.md", "gzip.md", "zip.md", "grep.md"):
            if (src / name).is_file():
                dest = workspace / "docs" / lang / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(src / name, dest)
    assert run_cli("ingest", cwd=workspace).code == 0
    for question, lang in (
        ("archive files", "pages/"),
        ("压缩", "pages.zh/"),
        ("圧縮", "pages.ja/"),
        ("архив", "pages.ru/"),
    ):
        body = query(workspace, question)
        assert body["status"] == "answered", question
        assert any(
            ev["source_path"].startswith("docs/" + lang)
            for c in body["citations"]
            for ev in c["evidence"]
        ), question
        check_independently(workspace, body)


def test_a_query_of_the_embedded_ledger_never_imports_sqlalchemy(
    kb: Path, backend: Backend
) -> None:
    """ADR 0007: the query path reads SQLite with the standard library; importing SQLAlchemy
    would cost a CLI query most of its time budget."""
    if backend.url is not None:
        pytest.skip("another database is read through SQLAlchemy by design")
    code = (
        "import sys\n"
        "from raytsystem.cli import main\n"
        "try:\n"
        "    main(['query', 'refund window', '--json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sqlalchemy'), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=kb, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout)["status"] in ("answered", "gap")
    assert out.stderr.strip() == "[]"
