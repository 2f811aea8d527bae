"""ID schemes end to end through the CLI, on both ledger backends (ADR 0030).

A workspace's raytsystem.toml names its scheme (`[ids] scheme`; none means 1, the scheme of
workspaces made before 2 existed), its ledger records it at the first ingest, and everything
that derives IDs afterwards (ingest's workers and writer, the manual layer, `verify`, every
query's chain check) derives them by the recorded scheme. Migration 0003 records 1 for a ledger
that already had rows.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import Backend, run_cli, write

from raytsystem.config import DEFAULT_CONFIG_TEXT

DOC = """# Operations

The quarterly audit happens in March.

The vault rotates keys every week.

- The pager rotation changes on Mondays.
- Backups run nightly at two.
"""
NOTE = """# Notes

Walruses confirm the audit calendar.[^a]

[^a]: docs/ops.md "quarterly audit happens in March"
"""
# raytsystem.toml as `raytsystem init` wrote it before ID schemes: no [ids] table.
CONFIG_WITHOUT_SCHEME = DEFAULT_CONFIG_TEXT[: DEFAULT_CONFIG_TEXT.index("\n[ids]")]


def name_scheme(ws: Path, scheme: int | None) -> None:
    """Make raytsystem.toml name `scheme` (None: name none, as an older workspace's)."""
    text = CONFIG_WITHOUT_SCHEME + ("" if scheme is None else f"\n[ids]\nscheme = {scheme}\n")
    (ws / "raytsystem.toml").write_text(text, encoding="utf-8")


def ok(ws: Path, *args: str) -> Any:
    result = run_cli(*args, "--json", cwd=ws)
    assert result.code == 0, (result.stdout, result.stderr)
    return result.json()


def recorded_scheme(ws: Path, backend: Backend) -> list[tuple[Any, ...]]:
    with backend.db(ws) as db:
        return db.execute("SELECT name, value FROM settings WHERE name = 'id_scheme'")


def parent_digits_shared(ws: Path, backend: Backend) -> dict[str, list[bool]]:
    """For each kind with a parent: does each row's ID start with its parent's 8 hex digits?"""
    pairs = {
        "revision": "SELECT id, source_id FROM revisions",
        "normalization": "SELECT id, revision_id FROM normalizations",
        "segment": "SELECT id, normalization_id FROM segments",
        "claim": "SELECT id, source_id FROM claims",
        "evidence": "SELECT id, claim_id FROM evidence",
    }
    with backend.db(ws) as db:
        return {
            kind: [own[4:12] == parent[4:12] for own, parent in db.execute(sql)]
            for kind, sql in pairs.items()
        }


@pytest.mark.parametrize("scheme", [1, 2])
def test_each_scheme_ingests_answers_retracts_and_verifies(
    workspace: Path, backend: Backend, scheme: int
) -> None:
    name_scheme(workspace, None if scheme == 1 else scheme)
    write(workspace, "docs/ops.md", DOC)
    write(workspace, "knowledge/manual/notes.md", NOTE)
    ok(workspace, "ingest")
    assert recorded_scheme(workspace, backend) == [("id_scheme", str(scheme))]

    shared = parent_digits_shared(workspace, backend)
    assert all(shared.values()) and sum(map(len, shared.values())) > 20
    for kind, rows in shared.items():
        assert all(rows) if scheme == 2 else not any(rows), (kind, rows)

    # A query's chain check, a manual note's citation and a retraction by claim ID.
    body = ok(workspace, "query", "quarterly audit March")
    assert body["status"] == "answered", body
    audit = next(
        c["claim"]["id"]
        for c in body["citations"]
        if c["claim"]["statement"] == "The quarterly audit happens in March."
    )
    manual = ok(workspace, "query", "walruses confirm the audit calendar")["citations"][0]
    assert manual["claim"]["authority"] == "manual", manual
    assert [e["role"] for e in manual["evidence"]] == ["statement", "citation"], manual
    write(workspace, "knowledge/manual/r.md", f"---\nretracts: [{audit}]\n---\n# R\n\nMoved.\n")
    report = ok(workspace, "ingest")
    assert report["created"] is True
    assert not [f for f in report["findings"] if f["code"] == "unknown_claim_id"], report
    assert ok(workspace, "show", audit)["states"][-1]["status"] == "retracted"
    assert ok(workspace, "verify")["ok"] is True


def test_the_same_files_give_the_same_generation_by_a_scheme_and_another_by_the_other(
    _workspace_template: Path, tmp_path: Path
) -> None:
    generations = {}
    for name, scheme in (("a", 2), ("b", 2), ("c", 1)):
        ws = tmp_path / name
        shutil.copytree(_workspace_template, ws, symlinks=True)
        name_scheme(ws, scheme)
        write(ws, "docs/ops.md", DOC)
        write(ws, "knowledge/manual/notes.md", NOTE)
        result = run_cli("ingest", "--json", cwd=ws, env={"RAYTSYSTEM_DATABASE_URL": ""})
        assert result.code == 0, result.stderr
        generations[name] = result.json()["generation"]["hash"]
    assert generations["a"] == generations["b"] != generations["c"]


def test_a_ledger_keeps_its_scheme_whatever_the_config_names_later(
    workspace: Path, backend: Backend
) -> None:
    write(workspace, "docs/ops.md", DOC)
    first = ok(workspace, "ingest")["generation"]
    name_scheme(workspace, None)  # names scheme 1
    write(workspace, "docs/more.md", "# More\n\nMore text arrives.\n")

    result = run_cli("ingest", "--json", cwd=workspace)
    assert result.code == 5, result.stdout
    error = result.json()["error"]
    assert error["code"] == "id_scheme_mismatch"
    assert "derived by ID scheme 3" in error["message"]
    assert "`scheme = 3` under [ids]" in error["message"]
    human = run_cli("ingest", cwd=workspace)
    assert human.code == 5 and "Traceback" not in human.stderr
    # Nothing was written, and reads go on by the ledger's own scheme.
    assert ok(workspace, "status")["generation"]["hash"] == first["hash"]
    assert ok(workspace, "query", "vault rotates keys")["status"] == "answered"
    assert ok(workspace, "verify")["ok"] is True
    assert recorded_scheme(workspace, backend) == [("id_scheme", "3")]


def test_migration_0003_records_scheme_1_for_a_ledger_that_has_rows(
    workspace: Path, backend: Backend
) -> None:
    """A ledger from before migration 0003 (its IDs derived the only way there was) is
    recorded as scheme 1, so a workspace that names scheme 2 cannot mix schemes in it."""
    name_scheme(workspace, None)
    write(workspace, "docs/ops.md", DOC)
    first = ok(workspace, "ingest")["generation"]
    with backend.db(workspace) as db:  # back to what a ledger at revision 0002 was
        db.execute("DROP TABLE settings")
        db.execute("UPDATE alembic_version SET version_num = '0002'")

    name_scheme(workspace, 2)
    result = run_cli("ingest", "--json", cwd=workspace)
    assert result.code == 5, result.stdout
    assert result.json()["error"]["code"] == "id_scheme_mismatch"
    assert recorded_scheme(workspace, backend) == [("id_scheme", "1")]

    name_scheme(workspace, None)
    assert ok(workspace, "ingest")["generation"]["hash"] == first["hash"]
    assert ok(workspace, "query", "quarterly audit March")["status"] == "answered"
    assert ok(workspace, "verify")["ok"] is True


def test_an_empty_ledger_from_before_migration_0003_takes_the_configs_scheme(
    workspace: Path, backend: Backend
) -> None:
    with backend.db(workspace) as db:  # `init` made the ledger; no ingest has run
        db.execute("DROP TABLE settings")
        db.execute("UPDATE alembic_version SET version_num = '0002'")
    write(workspace, "docs/ops.md", DOC)
    ok(workspace, "ingest")
    assert recorded_scheme(workspace, backend) == [("id_scheme", "3")]
    assert all(all(rows) for rows in parent_digits_shared(workspace, backend).values())


def test_a_changed_scheme_setting_fails_closed(workspace: Path, backend: Backend) -> None:
    write(workspace, "docs/ops.md", DOC)
    ok(workspace, "ingest")
    assert ok(workspace, "query", "vault rotates keys")["status"] == "answered"

    with backend.db(workspace) as db:
        db.execute("UPDATE settings SET value = '1' WHERE name = 'id_scheme'")
    # Every ID re-derived by the wrong scheme differs: no answer, and verify lists each one.
    result = run_cli("query", "vault rotates keys", "--json", cwd=workspace)
    assert result.code == 3, result.stdout
    assert result.json()["error"]["code"] == "ledger_mismatch"
    result = run_cli("verify", "--json", cwd=workspace)
    assert result.code == 3, result.stdout
    found = result.json()["findings"]
    assert {f["code"] for f in found} == {"id_mismatch"}
    assert {f["subject"][:3] for f in found} == {"rev", "nrm", "seg", "clm", "evd"}

    with backend.db(workspace) as db:
        db.execute("UPDATE settings SET value = '7' WHERE name = 'id_scheme'")
    for command in (("query", "vault rotates keys"), ("verify",), ("ingest",)):
        result = run_cli(*command, "--json", cwd=workspace)
        assert result.code == 6, (command, result.stdout)
        assert result.json()["error"]["code"] == "unknown_id_scheme"


def test_a_ledger_without_sources_takes_the_scheme_named_later(
    workspace: Path, backend: Backend
) -> None:
    """A first ingest that found no file derived no ID: naming another scheme afterwards is
    not a mismatch, and `status` shows the scheme the ledger then records."""
    report = ok(workspace, "ingest")
    assert report["created"] is False and report["counts"]["scanned"] == 0
    assert recorded_scheme(workspace, backend) == [("id_scheme", "3")]
    name_scheme(workspace, None)
    write(workspace, "docs/ops.md", DOC)
    assert ok(workspace, "ingest")["created"] is True
    assert recorded_scheme(workspace, backend) == [("id_scheme", "1")]
    assert ok(workspace, "status")["id_scheme"] == 1
    human = run_cli("status", cwd=workspace)
    assert "ID scheme  1 (ADR 0030)" in human.stdout.splitlines()


def test_one_process_derives_by_the_scheme_of_the_ledger_it_reads(tmp_path: Path) -> None:
    """Two ledgers of different schemes open in one process: each ledger and reader carries
    its own scheme, and a query through either verifies its chain (every ID re-derived) by
    that ledger's scheme, whichever was opened last."""
    from raytsystem.pipeline.query import query
    from raytsystem.storage.blobs import DiskBlobStore
    from raytsystem.storage.db import open_ledger, sqlite_url
    from raytsystem.storage.reader import open_reader

    urls, dirs = {}, {}
    for scheme in (1, 2):
        ws = tmp_path / f"s{scheme}"
        assert run_cli("init", str(ws), cwd=tmp_path, env={"RAYTSYSTEM_DATABASE_URL": ""}).code == 0
        name_scheme(ws, scheme)
        write(ws, "docs/ops.md", DOC)
        assert run_cli("ingest", cwd=ws, env={"RAYTSYSTEM_DATABASE_URL": ""}).code == 0
        urls[scheme] = sqlite_url(ws / ".raytsystem" / "ledger.sqlite3")
        dirs[scheme] = ws
    one, two = open_ledger(urls[1]), open_ledger(urls[2])
    readers = {1: open_reader(urls[1]), 2: open_reader(urls[2])}
    try:
        assert (one.ids.number, two.ids.number) == (1, 2)
        assert (readers[1].ids.number, readers[2].ids.number) == (1, 2)
        for scheme in (1, 2, 1):
            ws = dirs[scheme]
            body = query(
                readers[scheme],
                DiskBlobStore(ws / "_raw"),
                ws / ".raytsystem" / "indexes",
                "when does the quarterly audit happen",
            ).to_json()
            assert body["status"] == "answered"
            ids = [c["claim"]["id"] for c in body["citations"]]
            source = body["citations"][0]["evidence"][0]["source_id"]
            assert all((i[4:12] == source[4:12]) == (scheme == 2) for i in ids)
    finally:
        for reader in readers.values():
            reader.close()
        one.close()
        two.close()


@pytest.mark.parametrize("value", ["0", "4", "02", "²", "٢", "", " 2"])
def test_a_recorded_scheme_this_raytsystem_does_not_know_is_refused(value: str) -> None:
    from raytsystem.errors import DatabaseError
    from raytsystem.storage.db_meta import recorded_id_scheme

    with pytest.raises(DatabaseError) as info:
        recorded_id_scheme(value)
    assert info.value.code == "unknown_id_scheme" and repr(value) in str(info.value)
    assert recorded_id_scheme("1") == 1
    assert recorded_id_scheme(None) is None
