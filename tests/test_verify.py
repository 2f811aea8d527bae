"""VERIFY through the CLI: a clean workspace passes; each kind of corruption of the raw blobs,
the ledger rows or the index files is found with exit status 3, `ok: false` and its own code;
`index rebuild` repairs a missing index.

One workspace (two generations, extracted and manual claims, a verified citation) is built once;
each corruption is made on a copy of it."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Backend, blob_file, run_cli, tamper_blob, write

from raytsystem.storage.blobs import DiskBlobStore

FILES = {
    "docs/payments.md": """# Payments

## Retries

Retries stop after at most 5 attempts. The backoff doubles each time.

- Refunds take 3 business days.
""",
    "docs/onboarding.md": "# Onboarding\n\nNew engineers get a laptop on day one.\n",
    "knowledge/manual/retries.md": """# Retries

The gateway gives up after five tries.[^p]

[^p]: docs/payments.md "at most 5 attempts"
""",
}


def verify(ws: Path) -> tuple[int, dict[str, Any]]:
    result = run_cli("verify", "--json", cwd=ws)
    return result.code, result.json()


def codes(body: dict[str, Any]) -> set[str]:
    return {f["code"] for f in body["findings"]}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, _workspace_template: Path) -> Path:
    ws = tmp_path_factory.mktemp("verify") / "ws"
    shutil.copytree(_workspace_template, ws, symlinks=True)
    for rel, text in FILES.items():
        write(ws, rel, text)
    assert run_cli("ingest", "--json", cwd=ws).json()["created"] is True
    write(ws, "docs/onboarding.md", "# Onboarding\n\nNew engineers get a laptop on day two.\n")
    assert run_cli("ingest", "--json", cwd=ws).json()["generation"]["number"] == 2
    return ws


@pytest.fixture
def copy(built: Path, tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(built, ws, symlinks=True)
    return ws


def test_clean_workspace_verifies(built: Path) -> None:
    code, body = verify(built)
    assert code == 0, body
    assert body["ok"] is True
    assert body["findings"] == []
    assert body["generation"]["number"] == 2
    for key in ("blobs", "claims", "evidence", "generations", "indexes"):
        assert body["counts"][key] > 0, key
    assert body["counts"]["generations"] == 2 and body["counts"]["indexes"] == 2
    throughput = body["throughput"]
    assert throughput["blob_bytes"] > 0
    assert isinstance(throughput["mb_per_s"], int | float)
    human = run_cli("verify", cwd=built)
    assert human.code == 0
    assert human.stdout.splitlines()[0].startswith("ok: ")


# --- corruptions -----------------------------------------------------------------------------


def first_blob(ws: Path) -> str:
    return next(iter(DiskBlobStore(ws / "_raw").addresses()))


def ledger_sql(sql: str) -> Callable[[Path], None]:
    def corrupt(ws: Path) -> None:
        conn = sqlite3.connect(ws / ".raytsystem" / "ledger.sqlite3")
        try:
            assert conn.execute(sql).rowcount == 1
            conn.commit()
        finally:
            conn.close()

    return corrupt


def alter_blob(ws: Path) -> None:
    tamper_blob(ws / "_raw", first_blob(ws), lambda b: b + b" tampered")


def delete_blob(ws: Path) -> None:
    tamper_blob(ws / "_raw", first_blob(ws), lambda b: None)


def break_pack_table(ws: Path) -> None:
    """A pack whose first bytes are no longer a pack's: none of its blobs can be found."""
    path, _, _ = blob_file(ws / "_raw", first_blob(ws))
    path.chmod(0o644)
    path.write_bytes(b"garbage!" + path.read_bytes()[8:])


def stray_in_packs(ws: Path) -> None:
    (ws / "_raw" / "blake3" / "packs" / "half-a-pack.tmp").write_bytes(b"half a pack")


def stray_temp_file(ws: Path) -> None:
    shard = ws / "_raw" / "blake3" / "ab"
    shard.mkdir(exist_ok=True)
    (shard / ".tmp-abcdef0123456789-4242-deadbeef").write_bytes(b"half a blob")


def current_index(ws: Path) -> Path:
    return sorted((ws / ".raytsystem" / "indexes").glob("*.sqlite3"))[-1]


def alter_index_row(ws: Path) -> None:
    conn = sqlite3.connect(current_index(ws))
    try:
        edited = conn.execute(
            "UPDATE docs SET text = text || ' (edited)' WHERE rowid = (SELECT min(rowid) FROM docs)"
        )
        assert edited.rowcount == 1
        conn.commit()
    finally:
        conn.close()


def delete_index(ws: Path) -> None:
    current_index(ws).unlink()


CORRUPTIONS: dict[str, tuple[Callable[[Path], None], set[str]]] = {
    # Ingest packs its blobs: altering one also changes its pack, which no longer hashes to
    # its name; deleting one rewrites the pack without it.
    "blob altered": (alter_blob, {"blob_corrupt", "pack_corrupt"}),
    "blob deleted": (delete_blob, {"blob_missing", "pack_corrupt"}),
    "pack table broken": (break_pack_table, {"pack_corrupt", "blob_missing"}),
    "stray temp file": (stray_temp_file, {"stray_file"}),
    "stray file among the packs": (stray_in_packs, {"stray_file"}),
    "claim statement": (
        ledger_sql(
            "UPDATE claims SET statement = statement || ' Not.' "
            "WHERE rowid = (SELECT min(rowid) FROM claims)"
        ),
        # Its ID no longer derives, and it no longer says what its evidence does.
        {"id_mismatch", "excerpt_mismatch"},
    ),
    "evidence end": (
        ledger_sql(
            'UPDATE evidence SET "end" = "end" - 1 WHERE rowid = (SELECT min(rowid) FROM evidence)'
        ),
        {"id_mismatch"},
    ),
    "claim state status": (
        ledger_sql(
            "UPDATE claim_states SET status = 'disputed' "
            "WHERE id = (SELECT min(id) FROM claim_states WHERE status = 'confirmed')"
        ),
        {"claim_hash_mismatch"},
    ),
    "source state digest": (
        ledger_sql(
            "UPDATE source_states SET digest = '0' || substr(digest, 2) "
            "WHERE id = (SELECT min(id) FROM source_states WHERE digest NOT LIKE '0%')"
        ),
        {"source_digest_mismatch"},
    ),
    "manifest digest": (
        ledger_sql(
            "UPDATE generations SET manifest_digest = '0' || substr(manifest_digest, 2) "
            "WHERE number = 2 AND manifest_digest NOT LIKE '0%'"
        ),
        {"manifest_mismatch", "generation_hash_mismatch"},
    ),
    "segment of an evidence deleted": (
        ledger_sql(
            "DELETE FROM segments WHERE rowid = "
            "(SELECT min(s.rowid) FROM segments s JOIN evidence e ON e.segment_id = s.id)"
        ),
        {"dangling_reference"},
    ),
    "index row": (alter_index_row, {"index_mismatch"}),
    "index deleted": (delete_index, {"index_missing"}),
}


# Ledger corruptions made through the backend's own SQL: on PostgreSQL, verify's streams are
# ordered with COLLATE "C" and two of them are open at once.
ON_EITHER_BACKEND = {
    "claim statement": (
        "UPDATE claims SET statement = statement || ' Not.' "
        "WHERE id = (SELECT min(id) FROM claims WHERE authority = 'extracted')",
        {"id_mismatch", "excerpt_mismatch"},
    ),
    "evidence end": (
        'UPDATE evidence SET "end" = "end" - 1 WHERE id = (SELECT min(id) FROM evidence)',
        {"id_mismatch"},
    ),
    "claim state status": (
        "UPDATE claim_states SET status = 'disputed' "
        "WHERE id = (SELECT min(id) FROM claim_states WHERE status = 'confirmed')",
        {"claim_hash_mismatch"},
    ),
    # A claim state's evidence IDs are a JSON array: no foreign key checks them.
    "evidence a claim state lists, deleted": (
        "DELETE FROM evidence WHERE id = (SELECT min(id) FROM evidence WHERE role = 'statement')",
        {"dangling_reference"},
    ),
    "claim state's evidence IDs not JSON": (
        "UPDATE claim_states SET evidence_ids = '[\"evd_' WHERE id = (SELECT min(id) FROM claim_states)",
        {"claim_hash_mismatch"},
    ),
}


@pytest.mark.parametrize("name", list(ON_EITHER_BACKEND))
def test_ledger_corruption_is_found_on_either_backend(
    workspace: Path, backend: Backend, name: str
) -> None:
    for rel, text in FILES.items():
        write(workspace, rel, text)
    assert run_cli("ingest", "--json", cwd=workspace).code == 0
    code, body = verify(workspace)
    assert code == 0 and body["findings"] == [], body
    sql, expected = ON_EITHER_BACKEND[name]
    with backend.db(workspace) as db:
        db.execute(sql)
    code, body = verify(workspace)
    assert code == 3 and expected <= codes(body), body


def test_claims_of_a_removed_source_left_active_are_found(copy: Path) -> None:
    """Generation 3 removes a source; its claim states reopened (gen_to back to NULL) would keep
    them in every later generation, where review, graph and diff read them as active."""
    (copy / "docs" / "onboarding.md").unlink()
    assert run_cli("ingest", "--json", cwd=copy).json()["counts"]["removed_sources"] == 1
    assert verify(copy)[0] == 0
    with sqlite3.connect(copy / ".raytsystem" / "ledger.sqlite3") as conn:
        reopened = conn.execute(
            "UPDATE claim_states SET gen_to = NULL WHERE gen_to = 3 AND source_id IN "
            "(SELECT source_id FROM source_states WHERE gen_to = 3)"
        ).rowcount
    assert reopened > 0
    code, body = verify(copy)
    assert code == 3
    assert any(
        f["code"] == "source_digest_mismatch" and "removed source" in f["message"]
        for f in body["findings"]
    ), body


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_corruption_is_found(copy: Path, name: str) -> None:
    corrupt, expected = CORRUPTIONS[name]
    corrupt(copy)
    code, body = verify(copy)
    assert code == 3, body
    assert body["ok"] is False
    found = codes(body)
    if name == "manifest digest":
        assert found & expected, found  # either code tells the generation is wrong
        assert found <= expected, found
    else:
        assert expected <= found, found
    assert body["findings"]
    for finding in body["findings"]:
        assert set(finding) == {"code", "severity", "subject", "message"}
    if name == "stray temp file":
        [stray] = body["findings"]
        assert stray["severity"] == "warning"
        assert stray["subject"].endswith(".tmp-abcdef0123456789-4242-deadbeef")
        human = run_cli("verify", cwd=copy)
        assert human.code == 3
        assert human.stdout.splitlines()[0].startswith("PROBLEMS FOUND: ")


def test_a_corrupt_text_under_parallel_index_checks_is_reported_not_waited_on(
    workspace: Path, backend: Backend
) -> None:
    """Past DIGEST_STEP sources the index rows are derived in helper processes; a helper that
    meets a corrupt normalized text raises, and its error must come back (it once could not
    be unpickled, and verify waited forever): the index is reported as unchecked."""
    from raytsystem.pipeline.indexing import DIGEST_STEP

    for i in range(DIGEST_STEP + 20):
        write(workspace, f"docs/p{i:03d}.md", f"# Part {i}\n\nPart {i} has {i} steel bolts.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    with backend.db(workspace) as db:
        ((text,),) = db.execute("SELECT text_blob FROM normalizations ORDER BY id LIMIT 1")
    tamper_blob(workspace / "_raw", text, lambda b: b.replace(b"steel", b"brass"))
    result = run_cli("verify", "--json", cwd=workspace, timeout=120)
    assert result.code == 3
    found = codes(result.json())
    assert {"blob_corrupt", "index_unchecked"} <= found, found


def test_the_readme_repair_of_a_damaged_pack_keeps_its_intact_blobs(workspace: Path) -> None:
    """A pack holds several files' blobs, some of them of revisions no file has any more.
    `unpack` keeps every intact one on its own and removes the pack; the damaged one comes
    back from its file with the next ingest (stat cache deleted); verify passes again."""
    write(workspace, "docs/a.md", "Alpha is first.\n")
    write(workspace, "docs/b.md", "Beta is second.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    write(workspace, "docs/a.md", "Alpha is now third.\n")  # a's first revision: only in P1
    assert run_cli("ingest", cwd=workspace).code == 0
    import blake3

    b_address = blake3.blake3(b"Beta is second.\n").hexdigest()
    tamper_blob(workspace / "_raw", b_address, lambda b: b.replace(b"Beta", b"Bota"))

    code, body = verify(workspace)
    assert code == 3 and {"blob_corrupt", "pack_corrupt"} <= codes(body)
    [pack] = [f["subject"] for f in body["findings"] if f["code"] == "pack_corrupt"]
    assert pack.startswith("blake3/packs/")

    unpacked = run_cli("unpack", str(workspace / "_raw" / pack), "--json", cwd=workspace)
    assert unpacked.code == 0, unpacked.stderr
    assert unpacked.json()["damaged"] == [b_address] and unpacked.json()["kept"] == 3
    assert not (workspace / "_raw" / pack).exists()
    found = codes(verify(workspace)[1])  # b's raw bytes are gone until the file gives them
    assert "blob_missing" in found and not found & {"blob_corrupt", "pack_corrupt"}, found

    (workspace / ".raytsystem" / "statcache.sqlite3").unlink()
    assert run_cli("ingest", cwd=workspace).code == 0
    code, body = verify(workspace)
    assert code == 0, body

    again = run_cli("unpack", pack, "--json", cwd=workspace)
    assert again.code == 4 and again.json()["error"]["code"] == "pack_not_found"
    bad = run_cli("unpack", "../../etc/passwd", "--json", cwd=workspace)
    assert bad.code == 2 and bad.json()["error"]["code"] == "invalid_pack"


def test_index_rebuild_repairs_a_missing_index(copy: Path) -> None:
    # Rebuilding an intact index gives the same rows.
    rebuilt = run_cli("index", "rebuild", "--json", cwd=copy).json()
    assert rebuilt["generation"]["number"] == 2
    assert rebuilt["previous_rows_digest"] == rebuilt["rows_digest"]
    assert rebuilt["same_as_previous"] is True
    # A deleted index: verify says so, rebuild brings it back, verify is clean again.
    digest = rebuilt["rows_digest"]
    delete_index(copy)
    code, body = verify(copy)
    assert code == 3 and codes(body) == {"index_missing"}
    again = run_cli("index", "rebuild", "--json", cwd=copy).json()
    assert again["previous_rows_digest"] is None and again["same_as_previous"] is None
    assert again["rows_digest"] == digest
    code, body = verify(copy)
    assert code == 0 and body["ok"] is True, body
    answer = run_cli("query", "gateway gives up five tries", "--json", cwd=copy)
    assert answer.code == 0 and answer.json()["status"] == "answered"


def test_an_index_of_an_older_format_is_named_with_its_rebuild(copy: Path) -> None:
    conn = sqlite3.connect(current_index(copy))
    try:
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'format'")
        conn.execute("DROP TABLE blocks")  # what a format-3 index lacks
        conn.commit()
    finally:
        conn.close()
    code, body = verify(copy)
    assert code == 3
    found = {f["code"]: f for f in body["findings"]}
    assert found["index_format"]["severity"] == "warning"
    assert "raytsystem index rebuild 2" in found["index_format"]["message"]
    assert "index_corrupt" not in found
    query = run_cli("query", "gateway gives up five tries", "--json", cwd=copy)
    assert query.code == 4 and query.json()["error"]["code"] == "index_missing"
    assert run_cli("index", "rebuild", "--json", cwd=copy).code == 0
    code, body = verify(copy)
    assert code == 0 and body["ok"] is True, body


def test_index_rows_derived_in_helper_processes_are_the_ones_one_process_derives(
    workspace: Path, backend: Backend
) -> None:
    """A large generation's index rows are re-derived by helper processes, each on its own
    ledger connection (PostgreSQL too): the digest is the one a single process derives and
    the one the ingest recorded, and a recorded digest that differs is found."""
    from raytsystem.pipeline.indexing import DIGEST_STEP, generation_digest
    from raytsystem.storage import generations
    from raytsystem.storage.blobs import DiskBlobStore
    from raytsystem.storage.db import open_ledger

    for i in range(2 * DIGEST_STEP + 30):  # three steps
        write(workspace, f"docs/p{i:03d}.md", f"# Part {i}\n\nPart {i} has {i} steel bolts.\n")
    assert run_cli("ingest", cwd=workspace).code == 0
    (index,) = (workspace / ".raytsystem" / "indexes").glob("0*.sqlite3")
    with sqlite3.connect(index) as db:
        (recorded,) = db.execute("SELECT value FROM meta WHERE key = 'rows_digest'").fetchone()
    ledger = open_ledger(
        backend.url or f"sqlite:///{workspace / '.raytsystem' / 'ledger.sqlite3'}", create=False
    )
    try:
        with ledger.reading() as conn:
            head = generations.require_head(conn)
            blobs = DiskBlobStore(workspace / "_raw")
            one = generation_digest(conn, blobs, head, jobs=1)
            helpers = generation_digest(conn, blobs, head, jobs=2)
    finally:
        ledger.close()
    assert one == helpers == recorded
    with sqlite3.connect(index) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'rows_digest'", ("0" * 64,))
    code, body = verify(workspace)
    assert code == 3, body
    assert "its rows differ from the rows the ledger derives for this generation" in {
        f["message"] for f in body["findings"]
    }


@pytest.mark.parametrize("id_scheme", [1, 2, 3])
def test_claims_checked_in_a_helper_process_find_the_same(
    workspace: Path, backend: Backend, id_scheme: int
) -> None:
    """A large ledger's claims are checked by a helper process (its own connection, SQLite or
    PostgreSQL; spawned, and given the ledger's ID scheme) beside the rest: the same findings
    and counts as checked in the command."""
    from raytsystem.pipeline.verify import verify as run_verify
    from raytsystem.storage.blobs import DiskBlobStore
    from raytsystem.storage.db import open_ledger

    config = workspace / "raytsystem.toml"
    config.write_text(config.read_text().replace("scheme = 3", f"scheme = {id_scheme}"))
    for rel, text in FILES.items():
        write(workspace, rel, text)
    assert run_cli("ingest", "--json", cwd=workspace).code == 0
    with backend.db(workspace) as db:
        for name in ("claim statement", "claim state status"):
            db.execute(ON_EITHER_BACKEND[name][0])
    ledger = open_ledger(
        backend.url or f"sqlite:///{workspace / '.raytsystem' / 'ledger.sqlite3'}", create=False
    )
    reports = []
    try:
        for helper_from in (0, 10**9):  # always a helper; never
            with ledger.reading() as conn:
                report = run_verify(
                    conn,
                    ledger.ids,
                    DiskBlobStore(workspace / "_raw"),
                    workspace / ".raytsystem" / "indexes",
                    claims_helper_from=helper_from,
                ).to_json()
            report.pop("seconds")
            report.pop("throughput")
            reports.append(report)
    finally:
        ledger.close()
    assert reports[0] == reports[1]
    assert {"id_mismatch", "claim_hash_mismatch"} <= codes(reports[0])
    assert len([f for f in reports[0]["findings"] if f["code"] == "id_mismatch"]) == 1
    assert reports[0]["counts"]["claims"] > 0 and reports[0]["counts"]["claim_states"] > 0
