"""VERIFY: a full integrity check of the workspace, without changing anything.

1. Every blob in `_raw/` is re-hashed with BLAKE3 (shard folders and packs spread over worker
   processes); stray temp files are reported.
2. Every ledger row re-derives its ID from its content; every revision's blob exists; every
   normalization's text blob exists, every segment's text and every evidence excerpt hashes to
   its recorded SHA-256; every claim state's hash is recomputed; every reference between rows
   leads to a row.
3. Generations are replayed in order: each source state's digest is recomputed from the claims
   active with it, each manifest from the active source digests, each generation hash from
   (number, parent, manifest), and each parent link and the head are checked.
4. Every index file is checked against its own records (per-source row digests) and against its
   generation; the current generation's index is also compared with rows derived afresh from
   the ledger.

Step 2 is `verify_rows.py`, step 3 `verify_generations.py`; what they read, `storage/integrity.py`.
Findings carry a code and severity (`verify_report.py`); `ok` is false when any finding is an
error or warning.

Memory follows the largest unit checked, not the workspace: rows are streamed, segments and
evidence one normalization at a time, claim states one generation's changed sources at a time,
index rows one source (or 500 sources, derived from the ledger) at a time. What is held whole is
small per source: the normalizations, the source states, the blob addresses.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from .. import faults
from ..errors import BlobMissing, ChecksumMismatch
from ..ids import IdScheme
from ..model.objects import chain_ids
from ..progress import Progress
from ..storage import generations, index_file, index_folder, integrity, tombstones
from ..storage.addresses import ALGORITHM
from ..storage.blobs import DiskBlobStore
from ..storage.packs import PACKS
from ..syscalls import start_helper
from .indexing import generation_digest
from .verify_generations import check_generations
from .verify_report import VerifyReport
from .verify_rows import CLAIMS_HELPER_FROM, check_ledger, check_references, claims_checked_beside

if TYPE_CHECKING:
    from sqlalchemy import Connection

HASH_JOBS = 8  # processes re-hashing blobs (check_blobs)


def check_blobs(store: DiskBlobStore, report: VerifyReport, progress: Progress | None) -> set[str]:
    """Re-hash every blob; shards and packs are spread over worker processes when there are
    many."""
    started = time.perf_counter()
    units = store.hash_units()
    # More processes than cores: blobs not in the page cache are read from the disk, and more
    # reads in flight read faster (50,000 files' 577 MB from a cold cache: 63 MB/s with 2
    # processes, 125 MB/s with 8; from a warm one 8 cost nothing against 2 on 2 cores).
    jobs = HASH_JOBS if (os.cpu_count() or 1) > 1 else 1
    present = set()
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
                    present.add(address)
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
    names one is not missing a blob (ADR 0038). Returns them."""
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


def check_indexes(
    conn: Connection,
    store: DiskBlobStore,
    index_dir: Path,
    current: generations.GenerationRef | None,
    report: VerifyReport,
    progress: Progress | None = None,
) -> None:
    known = {g.hash: g for g in generations.generations(conn)}
    # Generations' index files only: a `.building-*` file is an ingest's work in progress.
    files = sorted(index_folder.index_files(index_dir)) if index_dir.is_dir() else []
    seen = set()
    for path in files:
        if not path.exists():
            continue  # pruned or taken as a spare by an ingest since the listing
        report.counts["indexes"] += 1
        checked = integrity.check_index_file(path)
        gen = _check_index(path, checked, index_dir, known, report)
        if gen is None:
            continue
        seen.add(gen.hash)
        if current is not None and gen.hash == current.hash:
            recorded = checked.meta.get("rows_digest")
            _compare_with_ledger(conn, store, gen, path, recorded, report, progress)
    if current is not None and current.hash not in seen:
        report.add(
            "warning",
            "index_missing",
            current.hash,
            "the current generation has no index: run `raytsystem index rebuild`",
        )


def _check_index(
    path: Path,
    checked: integrity.IndexFileCheck,
    index_dir: Path,
    known: dict[str, generations.GenerationRef],
    report: VerifyReport,
) -> generations.GenerationRef | None:
    """Check an index file against its own records; return the generation it is the index of,
    or None when it is none (unreadable, of another format, or not matching the ledger)."""
    if checked.unreadable is not None:
        report.add("error", "index_corrupt", path.name, checked.unreadable)
        return None
    meta = checked.meta
    if not checked.current_format:
        # Derived data another raytsystem wrote: queries refuse it, rebuilding replaces it.
        number = index_file.index_number(path)
        report.add(
            "warning",
            "index_format",
            path.name,
            f"written in index format {meta.get('format')}, this raytsystem reads "
            f"{index_file.FORMAT}: run `raytsystem index rebuild {number}`",
        )
        return None
    gen = known.get(meta.get("generation_hash", ""))
    if gen is None or index_file.index_path(index_dir, gen.number, gen.hash) != path:
        report.add(
            "error",
            "index_mismatch",
            path.name,
            "records a generation that does not match its file name or the ledger",
        )
        return None
    for problem in checked.problems:
        report.add("error", "index_mismatch", path.name, problem)
    return gen


def _compare_with_ledger(
    conn: Connection,
    store: DiskBlobStore,
    gen: generations.GenerationRef,
    path: Path,
    recorded: str | None,
    report: VerifyReport,
    progress: Progress | None,
) -> None:
    """The rows digest the index at `path` records, against the one the ledger derives."""
    try:
        derived = generation_digest(conn, store, gen, progress)
    except (BlobMissing, ChecksumMismatch) as exc:  # a normalized text: reported above
        address = str(exc.details.get("address", ""))
        if isinstance(exc, BlobMissing) and tombstones.tombstones(conn, [address]):
            report.add(
                "info",
                "index_unchecked",
                path.name,
                f"its rows hold the purged text {address} and cannot be derived to compare; "
                "the next ingest makes a generation without it",
            )
            return
        report.add(
            "warning",
            "index_unchecked",
            path.name,
            f"its rows cannot be derived to compare: {exc}",
        )
        return
    if derived != recorded:
        report.add(
            "error",
            "index_mismatch",
            path.name,
            "its rows differ from the rows the ledger derives for this generation",
        )


def verify(
    conn: Connection,
    ids: IdScheme,
    store: DiskBlobStore,
    index_dir: Path,
    *,
    progress: Progress | None = None,
    claims_helper_from: int = CLAIMS_HELPER_FROM,
) -> VerifyReport:
    started = time.perf_counter()
    report = VerifyReport()
    present = check_blobs(store, report, progress)
    present |= check_purged(conn, present, report)
    derive = chain_ids(ids)
    with claims_checked_beside(conn, derive, report, claims_helper_from):
        check_ledger(conn, derive, store, present, report, progress)
    check_references(conn, report)
    current = check_generations(conn, report)
    report.generation = current.to_json() if current else None
    check_indexes(conn, store, index_dir, current, report, progress)
    report.seconds = time.perf_counter() - started
    return report
