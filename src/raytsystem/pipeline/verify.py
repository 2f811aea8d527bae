"""VERIFY: a full integrity check of the workspace, without changing anything.

1. Every blob in `_raw/` is re-hashed with BLAKE3 (shard folders and packs spread over worker
   processes); stray temp files are reported.
2. The ledger file's structure is checked by SQLite itself (`PRAGMA quick_check`), and its
   settings are there.
3. Every ledger row re-derives its ID from its content; every revision's blob exists; every
   normalization's text blob exists, every segment's text and every evidence excerpt hashes to
   its recorded SHA-256; every claim state's hash is recomputed; every reference between rows
   leads to a row; the fields no ID covers match what they describe.
4. Generations are replayed in order: each source state's digest is recomputed from the claims
   active with it, each manifest from the active source digests, each generation hash from
   (number, parent, manifest), each generation's counts and summary; each parent link and the
   head are checked.
5. Every index file is checked against its own records (per-source row digests) and against its
   generation; the current generation's index is also compared with rows derived afresh from
   the ledger; the spare too, and what writers left in the folder.
6. With a model named, the current generation's stored vectors (`verify_vectors.py`).

Step 2 is `verify_structure.py`, step 3 `verify_rows.py` (and `verify_fields.py`), step 4
`verify_generations.py`, step 5 `verify_indexes.py`; what they read, `storage/integrity.py`.
Findings carry a code and severity (`verify_report.py`); `ok` is false when any finding is an
error or warning. A damaged page met while reading the ledger stops the checks that read it,
and the report says so (`verify_structure.stops_at_damage`).

Memory follows the largest unit checked, not the workspace: rows are streamed, segments and
evidence one normalization at a time, claim states one generation's changed sources at a time,
index rows one source (or 500 sources, derived from the ledger) at a time. What is held whole is
small per source: the normalizations, the source states, the blob addresses and sizes.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from .. import faults
from ..ids import IdScheme
from ..model.objects import chain_ids
from ..model.sentence_encoder import ModelError
from ..progress import Progress
from ..storage import tombstones
from ..storage.addresses import ALGORITHM
from ..storage.blobs import DiskBlobStore
from ..storage.packs import PACKS
from ..syscalls import start_helper
from .verify_fields import PURGED
from .verify_generations import check_generations
from .verify_indexes import check_indexes
from .verify_manual import check_manual_claims
from .verify_report import VerifyReport
from .verify_rows import CLAIMS_HELPER_FROM, check_ledger, check_references, claims_checked_beside
from .verify_structure import check_settings, check_structure, stops_at_damage
from .verify_vectors import check_vectors

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from .meaning import Meaning

HASH_JOBS = 8  # processes re-hashing blobs (check_blobs)


def check_blobs(
    store: DiskBlobStore, report: VerifyReport, progress: Progress | None
) -> dict[str, int]:
    """Re-hash every blob; shards and packs are spread over worker processes when there are
    many. Returns the size of each blob that hashes to its address."""
    started = time.perf_counter()
    units = store.hash_units()
    # More processes than cores: blobs not in the page cache are read from the disk, and more
    # reads in flight read faster (50,000 files' 577 MB from a cold cache: 63 MB/s with 2
    # processes, 125 MB/s with 8; from a warm one 8 cost nothing against 2 on 2 cores).
    jobs = HASH_JOBS if (os.cpu_count() or 1) > 1 else 1
    present: dict[str, int] = {}
    count = 0
    with contextlib.ExitStack() as stack:
        if jobs > 1 and len(units) > 16:
            pool = ProcessPoolExecutor(
                max_workers=jobs,
                mp_context=multiprocessing.get_context("fork"),
                initializer=start_helper,
                initargs=(os.getpid(),),
            )
            # Stopped (Ctrl-C, an error): the shards and packs not started are dropped, not hashed.
            stack.callback(pool.shutdown, wait=True, cancel_futures=True)
            per_unit = pool.map(store.rehash_unit, units, chunksize=8)
        else:
            per_unit = map(store.rehash_unit, units)
        for done, (unit, (rows, problem)) in enumerate(zip(units, per_unit, strict=True), 1):
            faults.point("verify.blobs")
            where = f" (in {ALGORITHM}/{unit})" if unit.startswith(PACKS) else ""
            if problem:
                report.add("error", "pack_corrupt", f"{ALGORITHM}/{unit}", f"pack {unit} {problem}")
            for address, got, size in rows:
                count += 1
                report.raw_bytes += size
                if not got:
                    report.add(
                        "error", "blob_unreadable", address, f"blob {address} cannot be read{where}"
                    )
                elif got != address:
                    report.add(
                        "error", "blob_corrupt", address, f"blob {address} hashes to {got}{where}"
                    )
                else:
                    present[address] = size
            if progress:
                progress("hash blobs (shards and packs)", done, len(units), report.raw_bytes)
    report.hash_seconds = time.perf_counter() - started
    report.counts["blobs"] = count
    for stray in store.stray_files():
        report.add(
            "warning",
            "stray_file",
            str(stray.relative_to(store.root)),
            "not a blob: a leftover temp file or a foreign file",
        )
    return present


def check_purged(conn: Connection, present: set[str], report: VerifyReport) -> set[str]:
    """The purged blobs that are gone, each reported as `blob_purged` (info): a row that
    names one is not missing a blob (ADR 0040). Returns them."""
    with_tombstone = tombstones.purged_addresses(conn)
    gone = with_tombstone - present
    for t in tombstones.tombstones(conn, sorted(gone)).values():
        report.add(
            "info",
            "blob_purged",
            t.address,
            f"the {t.kind} blob was purged on {t.purged_at}"
            + (f" in generation {t.generation_number}" if t.generation_number else "")
            + f": {t.reason}",
        )
    for address in sorted(with_tombstone & present):
        report.add(
            "warning",
            "purge_incomplete",
            address,
            "has a tombstone but its bytes are still stored: run the purge again",
        )
    return gone


def verify(
    conn: Connection,
    ids: IdScheme,
    store: DiskBlobStore,
    index_dir: Path,
    *,
    progress: Progress | None = None,
    claims_helper_from: int = CLAIMS_HELPER_FROM,
    state_dir: Path | None = None,
    meaning: Callable[[], Meaning | None] | None = None,
) -> VerifyReport:
    """`state_dir`: the workspace's folder where writers take their lock and the vector store
    is (default: the one `index_dir` is in, as `Workspace` lays them out); `meaning`: the
    model whose stored vectors are checked (`verify_vectors.py`), read only then: a model
    folder that cannot be read is a finding, and never stops the other checks."""
    started = time.perf_counter()
    state_dir = state_dir or index_dir.parent
    report = VerifyReport()
    present = check_blobs(store, report, progress)
    for address in check_purged(conn, set(present), report):
        present[address] = PURGED  # its rows are not missing a blob; its size is unknown
    derive = chain_ids(ids)
    current = None  # until the generations are checked: damage may stop the checks before
    with stops_at_damage(report) as reading:
        reading.check = "the file's structure"
        check_structure(conn, report)
        reading.check = "its settings"
        check_settings(conn, ids, report)
        reading.check = "its rows"
        with claims_checked_beside(conn, derive, report, claims_helper_from):
            check_ledger(conn, derive, store, present, report, progress)
        reading.check = "the references between its rows"
        check_references(conn, report)
        reading.check = "its manual claims"
        check_manual_claims(conn, report)
        reading.check = "the generations"
        current = check_generations(conn, report)
        report.generation = current.to_json() if current else None
        reading.check = "the index files"
        check_indexes(conn, store, index_dir, state_dir, current, report, progress)
    if meaning is not None and not any(f["code"] == "ledger_corrupt" for f in report.findings):
        try:
            model = meaning()
        except ModelError as exc:
            report.add("warning", exc.code, "[meaning] model", str(exc))
            model = None
        if model is not None:
            check_vectors(model, state_dir, index_dir, current, report)
    report.seconds = time.perf_counter() - started
    return report
