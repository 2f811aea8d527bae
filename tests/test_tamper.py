"""Every kind of tampering, one case each (issue 34): the query fails closed or answers exactly
what the untampered workspace answers, and `verify` names what was done.

One small workspace is ingested once per module in two states (`tamper_kit.build_templates`:
"one" generation with its spare index, "two" generations); each case copies one, tampers with
it as an attacker or a failing disk would (SQL on the ledger or an index file through sqlite3,
bytes of blobs and packs, files moved), optionally runs an ingest after it, and runs the real
CLI. Each kind is two tests, the query and the verify, so that a fix of one flips only its own.

`KINDS` is the table: for each kind, what is done, the question asked, what the query may
answer and the findings `verify` must report (empty: it must pass). A kind that fails today is
marked `xfail(strict=True)` with what happens today: the fix that makes it pass must remove the
mark. A kind whose fix is open names its proposed error or finding code (see `tamper_kit.EXIT`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import blob_file, run_cli, tamper_blob
from tamper_kit import (
    EXIT,
    SAME,
    SQLITE,
    STEPS,
    Baselines,
    Query,
    build_templates,
    check_query,
    claim_of,
    copy_of,
    current_revision,
    error_code,
    evidence_segment,
    fails,
    flip,
    index_of,
    indexes,
    ledger,
    no_internal_error,
    one,
    sql,
    verify_codes,
)

from raytsystem.model.generation import generation_hash, manifest_digest, source_digest
from raytsystem.model.objects import claim_hash

Q_REFUNDS = "refunds business days"
Q_RETRIES = "how many retry attempts"
Q_GATEWAY = "gateway gives up five tries"
Q_LAPTOP = "engineers laptop"
Q_PASSWORDS = "passwords rotate"
Q_VAULT = "vault door brass key"
Q_PIZZA = "pizza delivery pineapple"


# --- tamperings --------------------------------------------------------------------------------


def inject_terms(path: Path) -> None:
    """Words of another question added to a claim's and its source's full-text rows."""
    claim_row = one(path, "SELECT rowid FROM docs WHERE kind = 'claim' AND text LIKE 'Refunds%'")
    source_row = one(
        path, "SELECT rowid FROM docs WHERE kind = 'source' AND source_path = 'docs/payments.md'"
    )
    extra = " pizza deliveri pineappl"
    sql(path, "UPDATE claims_fts SET terms = terms || ? WHERE rowid = ?", (extra, claim_row))
    sql(path, "UPDATE sources_fts SET terms = terms || ? WHERE rowid = ?", (extra, source_row))


def inject_current(ws: Path) -> None:
    inject_terms(index_of(ws))


def inject_spare(ws: Path) -> None:
    inject_terms(indexes(ws) / ".spare.sqlite3")


def inject_recycled(ws: Path) -> None:
    # With `keep = 2` the next ingest takes generation 1's file (about to be pruned) and patches
    # it to the new generation's rows.
    inject_terms(index_of(ws, 1))


def delete_docs_row(ws: Path) -> None:
    claim = claim_of(ws, "Refunds")
    sql(index_of(ws), "DELETE FROM docs WHERE object_id = ?", (claim,))


def relabel_old_index(ws: Path) -> None:
    """Generation 1's index put in place of generation 2's, its meta saying generation 2."""
    old, new = index_of(ws, 1), index_of(ws, 2)
    number, digest = one(ledger(ws), "SELECT number, hash FROM generations WHERE number = 2")
    new.chmod(0o644)
    new.write_bytes(old.read_bytes())
    sql(new, "UPDATE meta SET value = ? WHERE key = 'generation_hash'", (digest,))
    sql(new, "UPDATE meta SET value = ? WHERE key = 'generation_number'", (str(number),))


def segment_lines(ws: Path) -> None:
    segment = evidence_segment(ws, claim_of(ws, "Refunds"))
    sql(ledger(ws), "UPDATE segments SET line_start = 99, line_end = 120 WHERE id = ?", (segment,))


def segment_heading(ws: Path) -> None:
    segment = evidence_segment(ws, claim_of(ws, "Refunds"))
    sql(
        ledger(ws),
        "UPDATE segments SET heading_path = ? WHERE id = ?",
        ('["Evil","Heading"]', segment),
    )


def _confirm_unverified_manual_claim(ws: Path) -> None:
    """The unverified manual claim set to confirmed, its claim hash recomputed to match."""
    claim = claim_of(ws, "The vault door")
    statement, authority = one(
        ledger(ws), "SELECT statement, authority FROM claims WHERE id = ?", (claim,)
    )
    evidence = json.loads(
        one(ledger(ws), "SELECT evidence_ids FROM claim_states WHERE claim_id = ?", (claim,))
    )
    forged = claim_hash(claim, statement, authority, "confirmed", evidence)
    sql(
        ledger(ws),
        "UPDATE claim_states SET status = 'confirmed', claim_hash = ? WHERE claim_id = ?",
        (forged, claim),
    )


def _rebuild_index(ws: Path) -> None:
    """The attacker has the tool make the index row of what the ledger now says."""
    for path in indexes(ws).glob("0*.sqlite3"):
        path.unlink()
    rebuilt = run_cli("index", "rebuild", "--json", cwd=ws, env=SQLITE)
    assert rebuilt.code == 0, rebuilt.stdout + rebuilt.stderr


def manual_confirmed(ws: Path) -> None:
    _confirm_unverified_manual_claim(ws)
    _rebuild_index(ws)


def rehash_chain(ws: Path) -> None:
    """Re-derive every source digest, manifest and generation hash from the claim states, move
    the head and the references to the new hashes: a forgery every hash of the chain agrees
    with."""
    import sqlite3

    conn = sqlite3.connect(ledger(ws))
    try:
        states = conn.execute(
            "SELECT id, source_id, revision_id, normalization_id, gen_from, gen_to "
            "FROM source_states"
        ).fetchall()
        for sid, source, revision, normalization, gen_from, _ in states:
            claims = conn.execute(
                "SELECT claim_id, source_id, status, claim_hash, evidence_ids FROM claim_states "
                "WHERE source_id = ? AND gen_from <= ? AND (gen_to IS NULL OR gen_to > ?)",
                (source, gen_from, gen_from),
            ).fetchall()
            got = source_digest(source, revision, normalization, claims)
            conn.execute("UPDATE source_states SET digest = ? WHERE id = ?", (got, sid))
        parent = None
        for number, old in conn.execute(
            "SELECT number, hash FROM generations ORDER BY number"
        ).fetchall():
            digests = dict(
                conn.execute(
                    "SELECT source_id, digest FROM source_states WHERE gen_from <= ? "
                    "AND (gen_to IS NULL OR gen_to > ?)",
                    (number, number),
                ).fetchall()
            )
            manifest = manifest_digest(digests)
            new = generation_hash(number, parent, manifest)
            conn.execute(
                "UPDATE generations SET hash = ?, parent_hash = ?, manifest_digest = ? "
                "WHERE number = ?",
                (new, parent, manifest, number),
            )
            conn.execute(
                "UPDATE head SET generation_hash = ? WHERE generation_hash = ?", (new, old)
            )
            conn.execute(
                "UPDATE ingest_runs SET generation_hash = ? WHERE generation_hash = ?", (new, old)
            )
            parent = new
        conn.commit()
    finally:
        conn.close()


def manual_confirmed_whole_chain(ws: Path) -> None:
    _confirm_unverified_manual_claim(ws)
    rehash_chain(ws)
    _rebuild_index(ws)


def _page_of(path: Path, name: str) -> int:
    page: int = one(path, "SELECT rootpage FROM sqlite_master WHERE name = ?", (name,))
    return page


def overwrite_page(path: Path, page: int, data: bytes | None = None) -> None:
    """Overwrite a page of a SQLite file (1-based) with garbage, as a failing disk would."""
    size: int = one(path, "PRAGMA page_size")
    path.chmod(0o644)
    with open(path, "r+b") as handle:
        handle.seek((page - 1) * size)
        handle.write(data if data is not None else bytes((i * 37 + 11) % 256 for i in range(size)))


def btree_page_unread(ws: Path) -> None:
    """A page of a B-tree index no query reads (the reviews' generation index)."""
    overwrite_page(ledger(ws), _page_of(ledger(ws), "ix_reviews_generation_hash"))


def btree_page_read(ws: Path) -> None:
    """A page of the B-tree index through which a query finds claim states."""
    overwrite_page(ledger(ws), _page_of(ledger(ws), "ix_claim_states_source"))


def summary_edited(ws: Path) -> None:
    """Generation 2's summary says it added more claims than it did. (An edit by `replace` of
    a count it does not hold changes nothing, though SQLite counts the row as changed.)"""
    summary = json.loads(one(ledger(ws), "SELECT summary FROM generations WHERE number = 2"))
    summary["claims_added"] += 7
    sql(
        ledger(ws),
        "UPDATE generations SET summary = ? WHERE number = 2",
        (json.dumps(summary, sort_keys=True),),
    )


def ledger_sql(statement: str, *, rows: int | None = 1) -> Callable[[Path], None]:
    def tamper(ws: Path) -> None:
        sql(ledger(ws), statement, rows=rows)

    tamper.__doc__ = statement
    return tamper


def building_file_of_killed_rebuild(ws: Path) -> None:
    killed = run_cli(
        "index", "rebuild", "--json", cwd=ws, env={**SQLITE, "RAYTSYSTEM_CRASH_AT": "rebuild.step"}
    )
    assert killed.code == -signal.SIGKILL, killed.stderr
    assert list(indexes(ws).glob(".building-*"))


def killed_ingest(ws: Path) -> None:
    """An ingest killed after it published the new generation's index, before the head moved."""
    (ws / "docs" / "onboarding.md").write_text(
        "# Onboarding\n\nNew engineers get a laptop on day four.\n"
    )
    killed = run_cli("ingest", cwd=ws, env={**SQLITE, "RAYTSYSTEM_CRASH_AT": "ingest.before_head"})
    assert killed.code == -signal.SIGKILL, killed.stderr


def states_left_ahead(ws: Path) -> None:
    """An ingest killed before its index: the claim states it wrote ahead stay behind."""
    (ws / "docs" / "onboarding.md").write_text(
        "# Onboarding\n\nNew engineers get a laptop on day five.\n"
    )
    killed = run_cli("ingest", cwd=ws, env={**SQLITE, "RAYTSYSTEM_CRASH_AT": "ingest.before_index"})
    assert killed.code == -signal.SIGKILL, killed.stderr


def raw_altered(ws: Path) -> None:
    raw, _ = current_revision(ws, "docs/payments.md")
    tamper_blob(ws / "_raw", raw, lambda b: b.replace(b"3 business", b"9 business"))


def raw_deleted(ws: Path) -> None:
    raw, _ = current_revision(ws, "docs/payments.md")
    tamper_blob(ws / "_raw", raw, lambda b: None)


def text_altered(ws: Path) -> None:
    _, text = current_revision(ws, "docs/payments.md")
    tamper_blob(ws / "_raw", text, lambda b: b.replace(b"3 business", b"9 business"))


def pack_table_broken(ws: Path) -> None:
    raw, _ = current_revision(ws, "docs/payments.md")
    path, _, _ = blob_file(ws / "_raw", raw)
    path.chmod(0o644)
    path.write_bytes(b"garbage!" + path.read_bytes()[8:])


def pack_bytes_flipped(ws: Path) -> None:
    """The last byte of the pack holding the cited raw blob flipped: the pack no longer hashes
    to its name, and the blob at its end (another file's, not cited) no longer to its address."""
    raw, _ = current_revision(ws, "docs/payments.md")
    path, _, _ = blob_file(ws / "_raw", raw)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.chmod(0o644)
    path.write_bytes(bytes(data))


def stray_raw_temp(ws: Path) -> None:
    shard = ws / "_raw" / "blake3" / "ab"
    shard.mkdir(exist_ok=True)
    (shard / ".tmp-abcdef0123456789-4242-deadbeef").write_bytes(b"half a blob")


def stray_in_packs(ws: Path) -> None:
    (ws / "_raw" / "blake3" / "packs" / "half-a-pack.tmp").write_bytes(b"half a pack")


def blob_in_wrong_shard(ws: Path) -> None:
    """A copy of a blob stored on its own under another address's shard."""
    raw, _ = current_revision(ws, "docs/onboarding.md")
    path, offset, length = blob_file(ws / "_raw", raw)
    data = path.read_bytes()[offset : offset + length]
    wrong = ws / "_raw" / "blake3" / "00"
    wrong.mkdir(exist_ok=True)
    (wrong / raw).write_bytes(data)


def forge_other_sentence(ws: Path) -> None:
    """The refunds claim's evidence moved to the next sentence, every ID and hash re-derived
    (test_query's consistent forgery)."""
    from raytsystem.ids import NEWEST
    from raytsystem.model.objects import chain_ids

    claim = claim_of(ws, "Refunds")
    other = claim_of(ws, "Chargebacks")
    statement, authority = one(
        ledger(ws), "SELECT statement, authority FROM claims WHERE id = ?", (claim,)
    )
    segment, start, end, sha = one(
        ledger(ws),
        'SELECT segment_id, "start", "end", sha256 FROM evidence WHERE claim_id = ?',
        (other,),
    )
    eid = chain_ids(NEWEST).evidence_id(claim, segment, start, end, sha, "statement")
    forged = claim_hash(claim, statement, authority, "confirmed", [eid])
    sql(
        ledger(ws),
        'UPDATE evidence SET id = ?, segment_id = ?, "start" = ?, "end" = ?, sha256 = ? '
        "WHERE claim_id = ?",
        (eid, segment, start, end, sha, claim),
    )
    sql(
        ledger(ws),
        "UPDATE claim_states SET evidence_ids = ?, claim_hash = ? WHERE claim_id = ?",
        (json.dumps([eid]), forged, claim),
    )
    sql(index_of(ws), "UPDATE docs SET object_hash = ? WHERE object_id = ?", (forged, claim))


def generation_hash_edited(ws: Path) -> None:
    """Generation 2's hash changed where it is recorded and where the head points; its index
    renamed to match."""
    old = one(ledger(ws), "SELECT hash FROM generations WHERE number = 2")
    new = "0" * 8 + old[8:]
    sql(ledger(ws), "UPDATE generations SET hash = ? WHERE number = 2", (new,))
    sql(ledger(ws), "UPDATE head SET generation_hash = ?", (new,))
    path = index_of(ws, 2)
    sql(path, "UPDATE meta SET value = ? WHERE key = 'generation_hash'", (new,))
    path.rename(path.with_name(f"000002-{new[:16]}.sqlite3"))


def head_moved_back(ws: Path) -> None:
    gen1 = one(ledger(ws), "SELECT hash FROM generations WHERE number = 1")
    sql(ledger(ws), "UPDATE head SET generation_hash = ?, number = 1", (gen1,))


def index_file_garbage(ws: Path) -> None:
    path = index_of(ws)
    path.chmod(0o644)
    path.write_bytes(b"not an index at all " * 100)


def index_another_generations_bytes(ws: Path) -> None:
    path = index_of(ws, 2)
    path.chmod(0o644)
    path.write_bytes(index_of(ws, 1).read_bytes())


def index_sql(statement: str, *, rows: int | None = 1) -> Callable[[Path], None]:
    def tamper(ws: Path) -> None:
        sql(index_of(ws), statement, rows=rows)

    tamper.__doc__ = statement
    return tamper


def source_removed_states_reopened(ws: Path) -> None:
    """The claim states of a source an ingest removed, reopened (test_verify's case)."""
    sql(
        ledger(ws),
        "UPDATE claim_states SET gen_to = NULL WHERE gen_to = 3 AND source_id IN "
        "(SELECT source_id FROM source_states WHERE gen_to = 3)",
    )


def cited_claim_deleted(ws: Path) -> None:
    claim = claim_of(ws, "Refunds")
    sql(ledger(ws), "DELETE FROM claims WHERE id = ?", (claim,))


def cited_evidence_deleted(ws: Path) -> None:
    claim = claim_of(ws, "Refunds")
    sql(ledger(ws), "DELETE FROM evidence WHERE claim_id = ?", (claim,))


def ledger_truncated(ws: Path) -> None:
    path = ledger(ws)
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)


# --- the table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    name: str
    tamper: Callable[[Path], None]
    question: str
    query: Query
    verify: frozenset[str]  # findings (warnings or errors) verify must report; empty: clean
    template: str = "two"
    prepare: str = ""  # a step (tamper_kit.STEPS) run before the tampering
    after: str = ""  # a step run after it
    query_today: str | None = None  # the xfail reason of the query test, if it fails today
    verify_today: str | None = None  # the same for the verify test
    verify_any: bool = False  # one of `verify` is enough (either names the damage)
    # Error codes verify may stop with instead (a ledger it cannot read at all).
    verify_fails: frozenset[str] = frozenset()


def findings(*codes: str) -> frozenset[str]:
    return frozenset(codes)


CLEAN = frozenset[str]()
FAIL_INDEX = ("index_row_mismatch", "index_corrupt")

KINDS = [
    # --- issue 34: wrong answers with exit 0 ---------------------------------------------------
    Kind(
        "index terms injected",
        inject_current,
        Q_PIZZA,
        fails(*FAIL_INDEX, same=True),
        findings("index_mismatch"),
    ),
    Kind(
        "spare index injected",
        inject_spare,
        Q_PIZZA,
        SAME,
        findings("index_mismatch"),
        template="one",
    ),
    Kind(
        "spare index injected, then an ingest",
        inject_spare,
        Q_PIZZA,
        fails(*FAIL_INDEX, same=True),
        findings("index_mismatch"),
        template="one",
        after="ingest a change",
    ),
    Kind(
        "index to be recycled injected, then an ingest",
        inject_recycled,
        Q_PIZZA,
        fails(*FAIL_INDEX, same=True),
        findings("index_mismatch"),
        after="ingest a change",
    ),
    Kind(
        "claim's docs row deleted from the index",
        delete_docs_row,
        Q_REFUNDS,
        fails(*FAIL_INDEX),
        findings("index_mismatch"),
    ),
    Kind(
        "older index relabelled as the current generation's",
        relabel_old_index,
        Q_PASSWORDS,
        fails(*FAIL_INDEX, "index_generation_mismatch"),
        findings("index_mismatch"),
    ),
    Kind(
        "older index relabelled, asked what it holds",
        relabel_old_index,
        Q_LAPTOP,
        fails(*FAIL_INDEX, "index_generation_mismatch", "not_a_member"),
        findings("index_mismatch"),
    ),
    Kind(
        "segment line numbers edited",
        segment_lines,
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("id_mismatch"),
    ),
    Kind(
        "segment heading path edited",
        segment_heading,
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("id_mismatch"),
    ),
    Kind(
        "unverified manual claim confirmed, claim hash recomputed, index rebuilt",
        manual_confirmed,
        Q_VAULT,
        # The rebuilt index holds the forged claim: its rows are not the ones the ledger
        # recorded for the generation.
        fails("ledger_mismatch", "index_generation_mismatch"),
        findings("source_digest_mismatch"),
    ),
    Kind(
        "unverified manual claim confirmed, the whole chain re-hashed",
        manual_confirmed_whole_chain,
        Q_VAULT,
        fails("ledger_mismatch", "index_generation_mismatch"),
        # A confirmed manual claim without the citation evidence its note gives it.
        findings("claim_unsupported"),
    ),
    # --- issue 34: what verify must see --------------------------------------------------------
    Kind(
        "ledger B-tree index page no query reads overwritten",
        btree_page_unread,
        Q_REFUNDS,
        SAME,
        # SQLite's PRAGMA quick_check finds the page.
        findings("ledger_corrupt"),
    ),
    Kind(
        "ledger B-tree index page a query reads overwritten",
        btree_page_read,
        Q_REFUNDS,
        fails("database_corrupt"),
        findings("ledger_corrupt"),
        verify_fails=frozenset({"database_corrupt"}),
    ),
    Kind(
        "settings row deleted",
        ledger_sql("DELETE FROM settings WHERE name = 'id_scheme'"),
        Q_REFUNDS,
        fails("database_corrupt", "ledger_mismatch", same=True),
        # The ledger has sources but records no ID scheme.
        findings("settings_missing"),
    ),
    Kind(
        "generation summary edited",
        summary_edited,
        Q_REFUNDS,
        SAME,
        findings("generation_counts_mismatch"),
    ),
    Kind(
        "generation claim count edited",
        ledger_sql("UPDATE generations SET claim_count = claim_count + 5 WHERE number = 2"),
        Q_REFUNDS,
        SAME,
        findings("generation_counts_mismatch"),
    ),
    Kind(
        "generation source count edited",
        ledger_sql("UPDATE generations SET source_count = source_count - 1 WHERE number = 2"),
        Q_REFUNDS,
        SAME,
        findings("generation_counts_mismatch"),
    ),
    Kind(
        "revision size edited",
        ledger_sql(
            "UPDATE revisions SET size = size + 100 WHERE rowid = (SELECT min(rowid) FROM revisions)"
        ),
        Q_REFUNDS,
        SAME,
        findings("revision_mismatch"),
    ),
    Kind(
        "revision media type edited",
        ledger_sql(
            "UPDATE revisions SET media_type = 'application/x-evil' "
            "WHERE rowid = (SELECT min(rowid) FROM revisions)"
        ),
        Q_REFUNDS,
        SAME,
        findings("revision_mismatch"),
    ),
    Kind(
        "normalization text length edited",
        ledger_sql(
            "UPDATE normalizations SET text_length = text_length + 7 "
            "WHERE rowid = (SELECT min(rowid) FROM normalizations)"
        ),
        Q_REFUNDS,
        SAME,
        findings("normalization_mismatch"),
    ),
    Kind(
        "normalization segment count edited",
        ledger_sql(
            "UPDATE normalizations SET segment_count = segment_count + 3 "
            "WHERE rowid = (SELECT min(rowid) FROM normalizations)"
        ),
        Q_REFUNDS,
        SAME,
        findings("normalization_mismatch"),
    ),
    Kind(
        "normalization meta edited",
        ledger_sql(
            "UPDATE normalizations SET meta = replace(meta, 'at most 5 attempts', "
            "'at most 9 attempts') WHERE meta LIKE '%at most 5 attempts%'"
        ),
        Q_GATEWAY,
        fails("ledger_mismatch", same=True),
        findings("normalization_mismatch"),
    ),
    Kind(
        "killed index rebuild left its building file",
        building_file_of_killed_rebuild,
        Q_REFUNDS,
        SAME,
        findings("stray_file"),
    ),
    Kind(
        "ingest killed after publishing its index (no false alarm)",
        killed_ingest,
        Q_LAPTOP,
        SAME,
        CLEAN,
    ),
    Kind(
        "ingest killed before its index (no false alarm)",
        states_left_ahead,
        Q_LAPTOP,
        SAME,
        CLEAN,
    ),
    # --- kinds tested elsewhere in tests/ -------------------------------------------------------
    Kind(
        "raw blob altered",
        raw_altered,
        Q_REFUNDS,
        fails("raw_blob_corrupt"),
        findings("blob_corrupt", "pack_corrupt"),
    ),
    Kind(
        "raw blob deleted",
        raw_deleted,
        Q_REFUNDS,
        fails("blob_missing"),
        findings("blob_missing", "pack_corrupt"),
    ),
    Kind(
        "normalized text altered",
        text_altered,
        Q_REFUNDS,
        fails("normalized_text_corrupt"),
        findings("blob_corrupt", "pack_corrupt"),
    ),
    Kind(
        "pack table broken",
        pack_table_broken,
        Q_REFUNDS,
        fails("blob_missing"),
        findings("pack_corrupt", "blob_missing"),
    ),
    Kind(
        "pack byte flipped (another file's blob)",
        pack_bytes_flipped,
        Q_REFUNDS,
        fails("blob_missing", "raw_blob_corrupt", same=True),
        findings("pack_corrupt"),
    ),
    Kind(
        "stray temp file in the raw store", stray_raw_temp, Q_REFUNDS, SAME, findings("stray_file")
    ),
    Kind("stray file among the packs", stray_in_packs, Q_REFUNDS, SAME, findings("stray_file")),
    Kind(
        "blob copy in the wrong shard", blob_in_wrong_shard, Q_REFUNDS, SAME, findings("stray_file")
    ),
    Kind(
        "claim statement edited",
        ledger_sql(
            "UPDATE claims SET statement = 'Refunds take 30 business days.' "
            "WHERE statement LIKE 'Refunds%'"
        ),
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("id_mismatch", "excerpt_mismatch"),
    ),
    Kind(
        "evidence span moved",
        ledger_sql(
            'UPDATE evidence SET "end" = "end" - 1 WHERE claim_id = '
            "(SELECT id FROM claims WHERE statement LIKE 'Refunds%')"
        ),
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("id_mismatch"),
    ),
    Kind(
        "cited claim's evidence moved to another sentence, every hash re-derived",
        forge_other_sentence,
        Q_REFUNDS,
        fails("excerpt_mismatch"),
        findings("excerpt_mismatch", "source_digest_mismatch"),
    ),
    Kind(
        "claim state status edited",
        ledger_sql(
            "UPDATE claim_states SET status = 'disputed' WHERE claim_id = "
            "(SELECT id FROM claims WHERE statement LIKE 'Refunds%')"
        ),
        Q_REFUNDS,
        fails("ledger_mismatch", "index_row_mismatch"),
        findings("claim_hash_mismatch"),
    ),
    Kind(
        "claim hash edited",
        ledger_sql(
            "UPDATE claim_states SET claim_hash = " + flip("claim_hash") + " WHERE claim_id = "
            "(SELECT id FROM claims WHERE statement LIKE 'Refunds%')"
        ),
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("claim_hash_mismatch"),
    ),
    Kind(
        "cited claim row deleted",
        cited_claim_deleted,
        Q_REFUNDS,
        fails("not_a_member", "ledger_mismatch"),
        findings("dangling_reference"),
    ),
    Kind(
        "cited claim's evidence row deleted",
        cited_evidence_deleted,
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("dangling_reference"),
    ),
    Kind(
        "cited claim's evidence IDs made invalid JSON",
        ledger_sql(
            "UPDATE claim_states SET evidence_ids = '[\"evd_' WHERE claim_id = "
            "(SELECT id FROM claims WHERE statement LIKE 'Refunds%')"
        ),
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("claim_hash_mismatch"),
    ),
    Kind(
        "cited segment deleted",
        ledger_sql(
            "DELETE FROM segments WHERE id = (SELECT segment_id FROM evidence WHERE claim_id = "
            "(SELECT id FROM claims WHERE statement LIKE 'Refunds%'))"
        ),
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("dangling_reference"),
    ),
    Kind(
        "source path edited",
        ledger_sql("UPDATE sources SET path = 'docs/other.md' WHERE path = 'docs/payments.md'"),
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("id_mismatch"),
    ),
    Kind(
        "revision blob address edited",
        ledger_sql(
            "UPDATE revisions SET blob = (SELECT min(blob) FROM revisions WHERE source_id <> "
            "(SELECT id FROM sources WHERE path = 'docs/payments.md')) "
            "WHERE source_id = (SELECT id FROM sources WHERE path = 'docs/payments.md')"
        ),
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("id_mismatch"),
    ),
    Kind(
        "normalization adapter version edited",
        ledger_sql(
            "UPDATE normalizations SET adapter_version = adapter_version + 1 WHERE revision_id IN "
            "(SELECT r.id FROM revisions r JOIN sources s ON s.id = r.source_id "
            "WHERE s.path = 'docs/payments.md')"
        ),
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("id_mismatch"),
    ),
    Kind(
        "source state digest edited",
        ledger_sql(
            "UPDATE source_states SET digest = " + flip("digest") + " WHERE gen_to IS NULL "
            "AND source_id = (SELECT id FROM sources WHERE path = 'docs/payments.md')"
        ),
        Q_REFUNDS,
        fails("ledger_mismatch", same=True),
        findings("source_digest_mismatch"),
    ),
    Kind(
        "claims of a removed source reopened",
        source_removed_states_reopened,
        Q_LAPTOP,
        SAME,
        findings("source_digest_mismatch"),
        prepare="remove a source",
    ),
    Kind(
        "manifest digest edited",
        ledger_sql(
            "UPDATE generations SET manifest_digest = " + flip("manifest_digest") + " "
            "WHERE number = 2"
        ),
        Q_REFUNDS,
        fails("ledger_mismatch", same=True),
        findings("manifest_mismatch", "generation_hash_mismatch"),
        verify_any=True,
    ),
    Kind(
        "generation parent edited",
        ledger_sql(
            "UPDATE generations SET parent_hash = " + flip("parent_hash") + " WHERE number = 2"
        ),
        Q_REFUNDS,
        fails("ledger_mismatch", same=True),
        findings("chain_broken", "generation_hash_mismatch"),
    ),
    Kind(
        "generation hash edited (head and index follow)",
        generation_hash_edited,
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("generation_hash_mismatch"),
    ),
    Kind(
        "head moved back to generation 1",
        head_moved_back,
        Q_LAPTOP,
        fails("ledger_mismatch"),
        findings("head_mismatch"),
    ),
    Kind(
        "head names a generation that does not exist",
        ledger_sql("UPDATE head SET generation_hash = " + flip("generation_hash") + ""),
        Q_REFUNDS,
        fails("ledger_mismatch"),
        findings("head_mismatch"),
    ),
    Kind(
        "index row text altered",
        index_sql("UPDATE docs SET text = 'Refunds never happen.' WHERE text LIKE 'Refunds%'"),
        Q_REFUNDS,
        fails("index_row_mismatch"),
        findings("index_mismatch"),
    ),
    Kind(
        "index deleted",
        lambda ws: index_of(ws).unlink(),
        Q_REFUNDS,
        fails("index_missing"),
        findings("index_missing"),
    ),
    Kind(
        "index file overwritten with garbage",
        index_file_garbage,
        Q_REFUNDS,
        fails("index_corrupt"),
        findings("index_corrupt"),
    ),
    Kind(
        "another generation's index file in place",
        index_another_generations_bytes,
        Q_REFUNDS,
        fails("index_generation_mismatch"),
        findings("index_mismatch"),
    ),
    Kind(
        "index meta generation hash edited",
        index_sql("UPDATE meta SET value = " + flip("value") + " WHERE key = 'generation_hash'"),
        Q_REFUNDS,
        fails("index_generation_mismatch"),
        findings("index_mismatch"),
    ),
    Kind(
        "index meta format edited",
        index_sql("UPDATE meta SET value = '3' WHERE key = 'format'"),
        Q_REFUNDS,
        fails("index_missing"),
        findings("index_format"),
    ),
    Kind(
        "index meta rows digest edited",
        index_sql("UPDATE meta SET value = " + flip("value") + " WHERE key = 'rows_digest'"),
        Q_REFUNDS,
        fails(*FAIL_INDEX, "index_generation_mismatch", same=True),
        findings("index_mismatch"),
    ),
    Kind(
        "index source digest edited",
        index_sql(
            "UPDATE source_digests SET digest = " + flip("digest") + " WHERE source_id = "
            "(SELECT source_id FROM docs WHERE source_path = 'docs/payments.md' LIMIT 1)"
        ),
        Q_REFUNDS,
        fails(*FAIL_INDEX, same=True),
        findings("index_mismatch"),
    ),
    Kind(
        "index block edited",
        index_sql(
            "UPDATE blocks SET high = high - 1 WHERE source_id = "
            "(SELECT source_id FROM docs WHERE source_path = 'docs/payments.md' LIMIT 1)"
        ),
        Q_REFUNDS,
        fails(*FAIL_INDEX, same=True),
        findings("index_mismatch"),
    ),
    Kind(
        "index claim row's status edited",
        index_sql("UPDATE docs SET status = 'disputed' WHERE text LIKE 'Refunds%'"),
        Q_REFUNDS,
        fails(*FAIL_INDEX, same=True),
        findings("index_mismatch"),
    ),
    Kind(
        "ledger file truncated to half",
        ledger_truncated,
        Q_REFUNDS,
        fails("database_corrupt"),
        findings("ledger_corrupt"),
        verify_fails=frozenset({"database_corrupt"}),
    ),
]

BY_NAME = {k.name: k for k in KINDS}
assert len(BY_NAME) == len(KINDS), "kind names are unique"


def _params(which: str) -> list[Any]:
    out = []
    for kind in KINDS:
        reason = kind.query_today if which == "query" else kind.verify_today
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(kind.name, marks=marks, id=kind.name))
    return out


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory, _workspace_template: Path) -> Baselines:
    root = tmp_path_factory.mktemp("tamper")
    return Baselines(build_templates(root, _workspace_template), root)


def tampered(bases: Baselines, kind: Kind, tmp_path: Path) -> Path:
    ws = copy_of(bases.templates[kind.template], tmp_path / "ws")
    if kind.prepare:
        STEPS[kind.prepare](ws)
    kind.tamper(ws)
    if kind.after:
        STEPS[kind.after](ws)
    return ws


@pytest.mark.parametrize("name", _params("query"))
def test_query_fails_closed_or_answers_as_untampered(
    bases: Baselines, tmp_path: Path, name: str
) -> None:
    kind = BY_NAME[name]
    baseline = bases.answer(kind.template, kind.question, (kind.prepare, kind.after))
    ws = tampered(bases, kind, tmp_path)
    result = run_cli("query", kind.question, "--json", cwd=ws, env=SQLITE)
    check_query(result, baseline, kind.query)


@pytest.mark.parametrize("name", _params("verify"))
def test_verify_names_the_tampering(bases: Baselines, tmp_path: Path, name: str) -> None:
    kind = BY_NAME[name]
    ws = tampered(bases, kind, tmp_path)
    result = run_cli("verify", "--json", cwd=ws, env=SQLITE)
    no_internal_error(result)
    code = error_code(result)
    if code is not None:
        assert code in kind.verify_fails, result.stdout
        assert result.code == EXIT[code], (result.code, code)
        return
    found, body = verify_codes(result)
    if not kind.verify:
        assert result.code == 0 and body["ok"] is True, body["findings"]
        return
    assert result.code == 3 and body["ok"] is False, body
    if kind.verify_any:
        assert found & kind.verify, found
    else:
        assert kind.verify <= found, found


def test_there_are_at_least_forty_kinds() -> None:
    assert len(KINDS) >= 40


def verify_while_paused(ws: Path, command: list[str], pause: str, ready: str) -> Any:
    """Run `command` paused at the point `pause` (for a minute), wait until a file matching
    the glob `ready` is in the index folder, and run a verify meanwhile."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(SQLITE, RAYTSYSTEM_PAUSE_AT=f"{pause}:60")
    running = subprocess.Popen(
        [sys.executable, "-m", "raytsystem", *command],
        cwd=ws,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(indexes(ws).glob(ready)) and time.monotonic() < deadline:
            assert running.poll() is None, running.communicate()
            time.sleep(0.05)
        assert list(indexes(ws).glob(ready)), f"{command} never got to {pause}"
        return run_cli("verify", "--json", cwd=ws, env=SQLITE)
    finally:
        running.kill()
        running.communicate()


def test_verify_during_an_ingest_reports_no_damage(bases: Baselines, tmp_path: Path) -> None:
    """An ingest paused after it published the new generation's index and before the head
    moved: a verify run meanwhile must tell the work in progress from damage."""
    ws = copy_of(bases.templates["two"], tmp_path / "ws")
    (ws / "docs" / "onboarding.md").write_text(
        "# Onboarding\n\nNew engineers get a laptop on day six.\n"
    )
    result = verify_while_paused(ws, ["ingest", "--json"], "ingest.before_head", "000003-*.sqlite3")
    no_internal_error(result)
    _, body = verify_codes(result)
    assert result.code == 0 and body["ok"] is True, body["findings"]
    assert {f["code"] for f in body["findings"]} == {"interrupted_ingest"}, body["findings"]


def test_verify_during_an_index_rebuild_reports_no_damage(bases: Baselines, tmp_path: Path) -> None:
    """An index rebuild paused with its file half made: that file is its work in progress,
    not a leftover (which a killed rebuild's is, `stray_file`)."""
    ws = copy_of(bases.templates["two"], tmp_path / "ws")
    result = verify_while_paused(ws, ["index", "rebuild", "--json"], "rebuild.step", ".building-*")
    no_internal_error(result)
    _, body = verify_codes(result)
    assert result.code == 0 and body["ok"] is True and body["findings"] == [], body["findings"]


def test_the_templates_verify_clean(bases: Baselines) -> None:
    """Every case starts from a workspace verify passes."""
    for name in ("one", "two"):
        result = run_cli("verify", "--json", cwd=bases.templates[name], env=SQLITE)
        assert result.code == 0, result.stdout
