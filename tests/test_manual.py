"""Manual notes in `knowledge/manual/` end to end through the CLI: claims with authority
`manual`, footnote citations located in the cited source's normalized text (re-checked here with
hashlib and the stored blobs), unverifiable citations, re-resolution when a cited source changes,
front matter (status, retracts, disputes), `[[links]]`, ranking and determinism."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import blob_bytes, run_cli, write

DOC_X = """# Payments

## Retries

Retries stop after at most 5 attempts. The backoff doubles
each time the gateway fails.

Support is open daily. Refunds take 3 business days.

Support is open daily on weekends too.
"""
DOC_Y = """# Ledger

Entries are immutable once written.
"""
PAY_NOTE = """# Payment notes

Walrus retries stop at five.[^r] Narwhal backoff doubles on failure.[^b] Ocelot refunds are \
cited twice.[^two] Pelican quotes are curly.[^cq] Quokka quotes a wrong word.[^nf] Raccoon \
quotes an ambiguous phrase.[^am] Salamander cites a missing file.[^ms] Tapir has a malformed \
footnote.[^mal] Urchin needs no citation.

[^r]: docs/x.md "at most 5 attempts"
[^b]: docs/x.md "The backoff doubles each time the gateway fails"
[^two]: docs/x.md "Refunds take 3 business days", docs/y.md "immutable once written"
[^cq]: docs/y.md \u201cEntries are immutable\u201d
[^nf]: docs/x.md "at most 6 attempts"
[^am]: docs/x.md "open daily"
[^ms]: docs/missing.md "anything at all"
[^mal]: just some words
"""
UNDEFINED_NOTE = """# Undefined

Vicuna cites a footnote nobody defined.[^ghost]
"""
ENTITIES = """# Entities

- Payments API: the service that takes money
- Ledger Service: the book of record
"""
LINKS_NOTE = """# Links

The [[Payments API]] settles with [[Ledger Service|the ledger]] nightly. Xerus reads \
[[other-note]] first. Yak follows [[Nowhere Thing]] blindly.
"""
OTHER_NOTE = """# Other

The other note exists.
"""
# Longer than the extracted sentence it matches, so BM25 alone would rank it lower.
REFUNDS_NOTE = """# Refund notes

In our experience refunds usually take about three full business days for every customer in \
every region.
"""
FRONT_MATTER_NOTES = {
    "draft": ("status: draft", "Zebra draft sentence stays hidden."),
    "outdated": ("status: outdated", "Yeti outdated sentence stays hidden."),
    "badyaml": ("status: [unclosed", "Wombat yaml sentence is unverified."),
    "unknownkey": ("colour: red", "Koala key sentence is unverified."),
    "bogus": ("status: bogus", "Bison status sentence is unverified."),
    "badid": ("retracts: [clm_123]", "Gecko retracts sentence is unverified."),
}
INVALID = ("badyaml", "unknownkey", "bogus", "badid")


# --- helpers -------------------------------------------------------------------------------

# The ledger of a second, independent workspace in a test: the embedded SQLite one, whatever
# backend the test's `workspace` runs on.
OWN_LEDGER = {"RAYTSYSTEM_DATABASE_URL": ""}
Env = dict[str, str] | None


def ingest(ws: Path, env: Env = None) -> dict[str, Any]:
    result = run_cli("ingest", "--json", cwd=ws, env=env)
    assert result.code == 0, (result.stdout, result.stderr)
    return result.json()


def query(ws: Path, text: str, env: Env = None) -> dict[str, Any]:
    result = run_cli("query", text, "--json", cwd=ws, env=env)
    assert result.code == 0, (result.stdout, result.stderr)
    return result.json()


def show(ws: Path, object_id: str) -> dict[str, Any]:
    result = run_cli("show", object_id, "--json", cwd=ws)
    assert result.code == 0, (result.stdout, result.stderr)
    return result.json()


def diff(ws: Path, a: int, b: int) -> dict[str, Any]:
    result = run_cli("diff", str(a), str(b), "--json", cwd=ws)
    assert result.code == 0, (result.stdout, result.stderr)
    return result.json()


def top_claim(ws: Path, text: str, statement: str, env: Env = None) -> dict[str, Any]:
    """The first citation of the answer to `text`, which must be the claim `statement`."""
    body = query(ws, text, env)
    assert body["status"] == "answered", body
    citation = body["citations"][0]
    assert citation["claim"]["statement"] == statement, body
    return citation


def claim_id_of(ws: Path, text: str, statement: str, env: Env = None) -> str:
    return str(top_claim(ws, text, statement, env)["claim"]["id"])


def assert_gap(ws: Path, text: str, env: Env = None) -> None:
    body = query(ws, text, env)
    assert body["status"] == "gap", body
    assert body["answer"] == "" and body["citations"] == []


def statuses(ws: Path, claim_id: str) -> list[str]:
    """Statuses of a claim's states, oldest generation first (from `show`)."""
    states = sorted(show(ws, claim_id)["states"], key=lambda s: s["from_generation"])
    return [s["status"] for s in states]


def ledger(ws: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """From an SQLite ledger (read-only sqlite3): statement -> claim ID for every claim, and
    claim ID -> the statuses of its states, oldest first."""
    conn = sqlite3.connect(f"file:{ws / '.raytsystem' / 'ledger.sqlite3'}?mode=ro", uri=True)
    try:
        ids = {s: i for i, s in conn.execute("SELECT id, statement FROM claims")}
        states: dict[str, list[str]] = {i: [] for i in ids.values()}
        for cid, status in conn.execute(
            "SELECT claim_id, status FROM claim_states ORDER BY gen_from, id"
        ):
            states[cid].append(status)
        return ids, states
    finally:
        conn.close()


def findings(report: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["code"] == code]


def subjects(report: dict[str, Any], code: str) -> set[str]:
    return {f["subject"] for f in findings(report, code)}


def normalized_text(ws: Path, normalization_id: str) -> str:
    """The normalized text, read from its blob in _raw/ (located through `show`)."""
    blob = show(ws, normalization_id)["normalization"]["text_blob"]
    return blob_bytes(ws / "_raw", blob).decode("utf-8")


def check_evidence(ws: Path, citations: list[dict[str, Any]]) -> None:
    """Each excerpt is the normalized text at its span and hashes to its recorded SHA-256."""
    texts: dict[str, str] = {}
    for citation in citations:
        for ev in citation["evidence"]:
            nid = ev["normalization_id"]
            if nid not in texts:
                texts[nid] = normalized_text(ws, nid)
            assert texts[nid][ev["span"]["start"] : ev["span"]["end"]] == ev["cited_excerpt"]
            digest = hashlib.sha256(ev["cited_excerpt"].encode("utf-8")).hexdigest()
            assert digest == ev["cited_excerpt_sha256"]


def roles(citation: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((e["role"], e["source_path"]) for e in citation["evidence"])


def citation_excerpts(citation: dict[str, Any]) -> dict[str, str]:
    return {
        e["source_path"]: e["cited_excerpt"]
        for e in citation["evidence"]
        if e["role"] == "citation"
    }


# --- one workspace with every kind of note, ingested once ----------------------------------


@pytest.fixture(scope="module")
def kb(
    tmp_path_factory: pytest.TempPathFactory, _workspace_template: Path
) -> tuple[Path, dict[str, Any]]:
    ws = tmp_path_factory.mktemp("manual") / "ws"
    shutil.copytree(_workspace_template, ws, symlinks=True)
    write(ws, "docs/x.md", DOC_X)
    write(ws, "docs/y.md", DOC_Y)
    write(ws, "knowledge/manual/pay.md", PAY_NOTE)
    write(ws, "knowledge/manual/undefined.md", UNDEFINED_NOTE)
    write(ws, "knowledge/manual/entities.md", ENTITIES)
    write(ws, "knowledge/manual/links.md", LINKS_NOTE)
    write(ws, "knowledge/manual/other-note.md", OTHER_NOTE)
    write(ws, "docs/refunds.md", "# Refunds\n\nRefunds take three business days.\n")
    write(ws, "knowledge/manual/refunds.md", REFUNDS_NOTE)
    for name, (front, sentence) in FRONT_MATTER_NOTES.items():
        write(ws, f"knowledge/manual/{name}.md", f"---\n{front}\n---\n# {name}\n\n{sentence}\n")
    report = ingest(ws)
    assert report["created"] is True
    return ws, report


def test_verified_citations_are_exact_spans_of_the_cited_text(
    kb: tuple[Path, dict[str, Any]],
) -> None:
    ws, _ = kb
    # One quote, straight double quotes.
    walrus = top_claim(ws, "walrus retries stop", "Walrus retries stop at five.")
    assert walrus["claim"]["authority"] == "manual"
    assert walrus["claim"]["status"] == "confirmed"
    assert roles(walrus) == [("citation", "docs/x.md"), ("statement", "knowledge/manual/pay.md")]
    assert citation_excerpts(walrus) == {"docs/x.md": "at most 5 attempts"}
    statement_ev = next(e for e in walrus["evidence"] if e["role"] == "statement")
    assert statement_ev["cited_excerpt"] == "Walrus retries stop at five."

    # A quote written on one line matches text that the source breaks over two lines;
    # the excerpt is the source's exact text, line break included.
    narwhal = top_claim(ws, "narwhal backoff doubles", "Narwhal backoff doubles on failure.")
    excerpt = citation_excerpts(narwhal)["docs/x.md"]
    assert excerpt == "The backoff doubles\neach time the gateway fails"

    # Several `path "quote"` pairs in one footnote, in two sources.
    ocelot = top_claim(ws, "ocelot refunds cited", "Ocelot refunds are cited twice.")
    assert citation_excerpts(ocelot) == {
        "docs/x.md": "Refunds take 3 business days",
        "docs/y.md": "immutable once written",
    }

    # Curly quotes.
    pelican = top_claim(ws, "pelican quotes curly", "Pelican quotes are curly.")
    assert citation_excerpts(pelican) == {"docs/y.md": "Entries are immutable"}

    check_evidence(ws, [walrus, narwhal, ocelot, pelican])


def test_unverifiable_citations_make_only_their_claim_unverified(
    kb: tuple[Path, dict[str, Any]],
) -> None:
    ws, report = kb
    ids, states = ledger(ws)
    expected = {
        "citation_not_found": "Quokka quotes a wrong word.",  # one word differs from the text
        "citation_ambiguous": "Raccoon quotes an ambiguous phrase.",  # two paragraphs have it
        "citation_source_missing": "Salamander cites a missing file.",
        "citation_malformed": "Tapir has a malformed footnote.",
    }
    for code, statement in expected.items():
        assert subjects(report, code) == {f"knowledge/manual/pay.md {ids[statement]}"}, code
        assert states[ids[statement]] == ["unverified"], statement
        assert_gap(ws, statement.rstrip("."))
    # `show` presents the state too.
    assert statuses(ws, ids["Quokka quotes a wrong word."]) == ["unverified"]
    # The rest of the note and the other files are ingested and answerable.
    urchin = top_claim(ws, "urchin needs no citation", "Urchin needs no citation.")
    assert roles(urchin) == [("statement", "knowledge/manual/pay.md")]
    top_claim(ws, "entries immutable once written", "Entries are immutable once written.")


def test_undefined_footnote_is_a_finding(kb: tuple[Path, dict[str, Any]]) -> None:
    ws, report = kb
    assert_gap(ws, "vicuna cites footnote nobody defined")
    assert any(
        f["subject"].startswith("knowledge/manual/undefined.md")
        for f in findings(report, "citation_undefined")
    )


def test_front_matter_status_and_validation(kb: tuple[Path, dict[str, Any]]) -> None:
    ws, report = kb
    ids, states = ledger(ws)
    # draft: the note makes no claims at all.
    assert "Zebra draft sentence stays hidden." not in ids
    assert_gap(ws, "zebra draft sentence stays hidden")
    # outdated: its claims exist but are not active, and an info finding says so.
    outdated = ids["Yeti outdated sentence stays hidden."]
    assert states[outdated] == []
    assert_gap(ws, "yeti outdated sentence stays hidden")
    [note_outdated] = findings(report, "note_outdated")
    assert (note_outdated["subject"], note_outdated["severity"]) == (
        "knowledge/manual/outdated.md",
        "info",
    )
    # invalid front matter: a finding per note, and the note's claims are unverified.
    assert subjects(report, "front_matter_invalid") == {f"knowledge/manual/{n}.md" for n in INVALID}
    for name in INVALID:
        statement = FRONT_MATTER_NOTES[name][1]
        assert states[ids[statement]] == ["unverified"], name
        assert_gap(ws, statement.rstrip("."))


def test_links_to_entities_and_notes_and_dead_links(kb: tuple[Path, dict[str, Any]]) -> None:
    ws, report = kb
    # Link text stays readable: [[Name]] -> Name, [[target|alias]] -> alias.
    statement = "The Payments API settles with the ledger nightly."
    top_claim(ws, "payments api settles nightly", statement)
    top_claim(ws, "xerus reads other-note", "Xerus reads other-note first.")
    dead = findings(report, "dead_link")
    assert [(f["subject"], f["message"]) for f in dead] == [
        ("knowledge/manual/links.md", "[[Nowhere Thing]] links to nothing")
    ]


def test_manual_claims_rank_above_extracted_ones(kb: tuple[Path, dict[str, Any]]) -> None:
    ws, _ = kb
    body = query(ws, "refunds take three business days")
    top = [(c["claim"]["authority"], c["evidence"][0]["source_path"]) for c in body["citations"]]
    assert top[:2] == [
        ("manual", "knowledge/manual/refunds.md"),
        ("extracted", "docs/refunds.md"),
    ]


# --- citations follow the cited source from generation to generation -----------------------


def test_changed_source_re_resolves_an_unchanged_note(workspace: Path) -> None:
    write(workspace, "docs/x.md", DOC_X)
    write(
        workspace,
        "knowledge/manual/n.md",
        'Walrus retries stop at five.[^r]\n\n[^r]: docs/x.md "at most 5 attempts"\n',
    )
    ingest(workspace)
    claim = top_claim(workspace, "walrus retries stop", "Walrus retries stop at five.")
    cid = claim["claim"]["id"]
    assert claim["claim"]["status"] == "confirmed"
    [first_cited] = [e for e in claim["evidence"] if e["role"] == "citation"]

    # The quote vanishes from the source: the note did not change, yet its claim is unverified.
    write(workspace, "docs/x.md", DOC_X.replace("at most 5 attempts", "at most 7 attempts"))
    report = ingest(workspace)
    assert report["created"] is True
    assert report["counts"]["new_revisions"] == 1  # only docs/x.md
    assert subjects(report, "citation_not_found") == {f"knowledge/manual/n.md {cid}"}
    assert_gap(workspace, "walrus retries")  # both words: the claim itself, not the source's

    # The text comes back: confirmed again, with a citation into the source's current revision.
    write(workspace, "docs/x.md", DOC_X)
    report = ingest(workspace)
    assert not findings(report, "citation_not_found")
    back = top_claim(workspace, "walrus retries stop", "Walrus retries stop at five.")
    assert back["claim"]["status"] == "confirmed"
    assert citation_excerpts(back) == {"docs/x.md": "at most 5 attempts"}
    [cited] = [e for e in back["evidence"] if e["role"] == "citation"]
    assert cited["cited_excerpt_sha256"] == hashlib.sha256(b"at most 5 attempts").hexdigest()
    assert cited["span"]["end"] - cited["span"]["start"] == len("at most 5 attempts")
    assert cited["raw_blake3"] == first_cited["raw_blake3"]  # the same bytes as generation 1

    # The cited source is deleted: the citation's source is missing.
    (workspace / "docs" / "x.md").unlink()
    report = ingest(workspace)
    assert subjects(report, "citation_source_missing") == {f"knowledge/manual/n.md {cid}"}
    assert statuses(workspace, cid) == ["confirmed", "unverified", "confirmed", "unverified"]


# --- retracts and disputes -----------------------------------------------------------------

DIRECTIVE_DOC = """# Operations

The quarterly audit happens in March.

The vault rotates keys every week.

The pager rotation changes on Mondays.
"""
UNKNOWN = "clm_0123456789abcdef0123456789abcdef"


def test_retracts_and_disputes_change_statuses_until_removed(workspace: Path) -> None:
    write(workspace, "docs/ops.md", DIRECTIVE_DOC)
    write(workspace, "knowledge/manual/m.md", "# M\n\nManatees guard the staging cluster.\n")
    ingest(workspace)
    audit = claim_id_of(workspace, "quarterly audit march", "The quarterly audit happens in March.")
    vault = claim_id_of(workspace, "vault rotates keys", "The vault rotates keys every week.")
    manatee = claim_id_of(
        workspace, "manatees guard staging", "Manatees guard the staging cluster."
    )

    # `audit` is both retracted and disputed: retracted wins. A manual claim can be retracted too.
    write(
        workspace,
        "knowledge/manual/r.md",
        f"---\nretracts: [{audit}, {manatee}]\ndisputes: [{vault}, {audit}, {UNKNOWN}]\n---\n"
        "# R\n\nThe audit moved to April.\n",
    )
    report = ingest(workspace)
    assert report["created"] is True
    assert [
        (f["subject"], UNKNOWN in f["message"]) for f in findings(report, "unknown_claim_id")
    ] == [("knowledge/manual/r.md", True)]
    for text in ("quarterly audit march", "vault rotates keys", "manatees guard staging"):
        assert_gap(workspace, text)
    top_claim(workspace, "pager rotation mondays", "The pager rotation changes on Mondays.")
    changes = diff(workspace, 1, 2)
    assert {c["id"]: (c["from_status"], c["to_status"]) for c in changes["status_changed"]} == {
        audit: ("confirmed", "retracted"),
        vault: ("confirmed", "disputed"),
        manatee: ("confirmed", "retracted"),
    }

    # Without the directives the claims are confirmed again.
    write(workspace, "knowledge/manual/r.md", "# R\n\nThe audit moved to April.\n")
    report = ingest(workspace)
    assert not findings(report, "unknown_claim_id")
    changes = diff(workspace, 2, 3)
    assert {c["id"]: (c["from_status"], c["to_status"]) for c in changes["status_changed"]} == {
        audit: ("retracted", "confirmed"),
        vault: ("disputed", "confirmed"),
        manatee: ("retracted", "confirmed"),
    }
    assert changes["added"] == [] and changes["removed"] == []
    for text, statement in (
        ("quarterly audit march", "The quarterly audit happens in March."),
        ("vault rotates keys", "The vault rotates keys every week."),
        ("manatees guard staging", "Manatees guard the staging cluster."),
    ):
        assert top_claim(workspace, text, statement)["claim"]["status"] == "confirmed"


def test_directive_on_a_note_ingested_in_the_same_run(
    _workspace_template: Path, tmp_path: Path
) -> None:
    # Learn the (deterministic) claim ID in a scratch workspace.
    scratch, fresh = tmp_path / "scratch", tmp_path / "fresh"
    for ws in (scratch, fresh):
        shutil.copytree(_workspace_template, ws, symlinks=True)
        write(ws, "knowledge/manual/a.md", "# A\n\nThe pager rotation is weekly.\n")
    ingest(scratch, OWN_LEDGER)
    claim_id = claim_id_of(
        scratch, "pager rotation weekly", "The pager rotation is weekly.", OWN_LEDGER
    )
    # A fresh clone: the note and the note disputing it are ingested together.
    write(fresh, "knowledge/manual/r.md", f"---\ndisputes: [{claim_id}]\n---\n# R\n\nDaily.\n")
    report = ingest(fresh, OWN_LEDGER)
    assert_gap(fresh, "pager rotation weekly", OWN_LEDGER)  # the directive is applied...
    assert findings(report, "unknown_claim_id") == []  # ...so the ID is not unknown


def test_same_files_give_the_same_generation_hash(
    workspace: Path, _workspace_template: Path, tmp_path: Path
) -> None:
    """The test's workspace (on its backend) and a twin on its own SQLite ledger, files written
    in another order, give the same generations."""
    files = {
        "docs/x.md": DOC_X,
        "docs/y.md": DOC_Y,
        "knowledge/manual/pay.md": PAY_NOTE,
        "knowledge/manual/entities.md": ENTITIES,
        "knowledge/manual/links.md": LINKS_NOTE,
        "knowledge/manual/other-note.md": OTHER_NOTE,
    }
    twin = tmp_path / "twin"
    shutil.copytree(_workspace_template, twin, symlinks=True)
    for rel, text in files.items():
        write(workspace, rel, text)
    for rel, text in reversed(files.items()):
        write(twin, rel, text)
    first = ingest(workspace)["generation"]
    assert ingest(twin, OWN_LEDGER)["generation"] == first
