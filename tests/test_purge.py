"""PURGE (issue 38, ADR 0040): a raw blob's bytes and its normalized texts' leave the store,
packs included; a tombstone keeps the chain verifiable; queries that would cite the purged
bytes fail closed, and the next ingest's generation no longer answers from them."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli, tamper_blob, write

SENTENCE = "The vault quorum rotates every ninety days."


def _json(ws: Path, *args: str) -> dict:
    result = run_cli(*args, "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    return result.json()


def _all_bytes(root: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()]


def test_purge_removes_the_bytes_and_keeps_the_chain_verifiable(workspace: Path) -> None:
    ws = workspace
    raw = f"# Vault\n\n{SENTENCE}\n".encode()
    (ws / "docs").mkdir(exist_ok=True)
    (ws / "docs/vault.md").write_bytes(raw)
    write(ws, "docs/other.md", "# Other\n\nThe pager rotates weekly.\n")
    _json(ws, "ingest")
    [revision] = _json(ws, "history", "docs/vault.md")["revisions"]
    blob = revision["blob"]
    assert any(raw in data for _, data in _all_bytes(ws / "_raw")), "stored in a pack"
    asked = _json(ws, "query", "vault quorum rotates")
    assert asked["status"] == "answered"

    purged = _json(ws, "purge", "docs/vault.md", "--reason", "legal hold lifted: remove")
    assert purged["raw_blobs"] == [blob]
    assert len(purged["text_blobs"]) == 1
    assert sorted(purged["tombstones_recorded"]) == sorted([blob, *purged["text_blobs"]])
    # The bytes are gone from the store, loose files and packs alike.
    for path, data in _all_bytes(ws / "_raw"):
        assert raw not in data and SENTENCE.encode() not in data, path
    # The tombstone: in history and show, with its reason and generation.
    [revision] = _json(ws, "history", "docs/vault.md")["revisions"]
    assert revision["purged"]["reason"] == "legal hold lifted: remove"
    assert revision["purged"]["generation_number"] == 1
    shown = run_cli("show", revision["id"], cwd=ws).json()
    assert shown["tombstone"]["address"] == blob
    # verify: clean, the purged blobs reported as such; the other file's blob, rewritten
    # into a new pack, hashes as before.
    checked = run_cli("verify", "--json", cwd=ws)
    assert checked.code == 0, checked.stdout
    purged_findings = [f for f in checked.json()["findings"] if f["code"] == "blob_purged"]
    assert {f["subject"] for f in purged_findings} == {blob, *purged["text_blobs"]}
    assert all(f["severity"] == "info" for f in purged_findings)
    # A query that would cite it fails closed with its own code.
    failed = run_cli("query", "vault quorum rotates", "--json", cwd=ws)
    assert failed.code == 3
    assert failed.json()["error"]["code"] == "blob_purged"
    for args in (("search", "vault quorum"), ("bundle", "vault quorum")):
        refused = run_cli(*args, "--json", cwd=ws)
        assert refused.code == 3, refused.stdout
        assert refused.json()["error"]["code"] == "blob_purged"
    # The next ingest: a generation without the purged source; the file's bytes (still on
    # disk, unchanged) are not stored again.
    again = _json(ws, "ingest")
    assert again["created"] is True and again["counts"]["removed_sources"] == 1
    assert [f["code"] for f in again["findings"]] == ["purged_content"]
    for path, data in _all_bytes(ws / "_raw"):
        assert raw not in data, path
    after = _json(ws, "query", "vault quorum rotates")
    cited = {c["evidence"][0]["source_path"] for c in after.get("citations", [])}
    assert "docs/vault.md" not in cited
    assert _json(ws, "query", "pager rotates weekly")["status"] == "answered"
    assert run_cli("verify", cwd=ws).code == 0
    # An edit with new, clean content is a new revision, ingested as usual.
    write(ws, "docs/vault.md", "# Vault\n\nThe vault is sealed.\n")
    _json(ws, "ingest")
    assert _json(ws, "query", "vault sealed")["status"] == "answered"


def test_a_missing_blob_without_a_tombstone_still_fails_verify(workspace: Path) -> None:
    ws = workspace
    write(ws, "docs/a.md", "# A\n\nAlpha is first.\n")
    write(ws, "docs/b.md", "# B\n\nBeta is second.\n")
    _json(ws, "ingest")
    _json(ws, "purge", "docs/a.md", "--reason", "test")
    blob_b = _json(ws, "history", "docs/b.md")["revisions"][0]["blob"]
    tamper_blob(ws / "_raw", blob_b, lambda _data: None)
    checked = run_cli("verify", "--json", cwd=ws)
    assert checked.code == 3
    codes = {(f["code"], f["severity"]) for f in checked.json()["findings"]}
    assert ("blob_missing", "error") in codes and ("blob_purged", "info") in codes


def test_purge_needs_a_reason_and_a_known_target(workspace: Path) -> None:
    ws = workspace
    write(ws, "docs/a.md", "# A\n\nAlpha is first.\n")
    _json(ws, "ingest")
    blank = run_cli("purge", "docs/a.md", "--reason", "  ", "--json", cwd=ws)
    assert blank.code == 2 and blank.json()["error"]["code"] == "purge_reason"
    unknown = run_cli("purge", "docs/nope.md", "--reason", "x", "--json", cwd=ws)
    assert unknown.code == 4 and unknown.json()["error"]["code"] == "source_not_found"
    nowhere = run_cli("purge", "0" * 64, "--reason", "x", "--json", cwd=ws)
    assert nowhere.code == 4 and nowhere.json()["error"]["code"] == "blob_not_found"
    # Purging twice records nothing new and changes nothing.
    first = _json(ws, "purge", "docs/a.md", "--reason", "x")
    second = _json(ws, "purge", "docs/a.md", "--reason", "x")
    assert first["tombstones_recorded"] and second["tombstones_recorded"] == []
    assert second["store_files_changed"] == 0
