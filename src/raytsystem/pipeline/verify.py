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

Findings carry a code and severity; `ok` is false when any finding is an error or warning.

Memory follows the largest unit checked, not the workspace: rows are streamed, segments and
evidence one normalization at a time, claim states one generation's changed sources at a time,
index rows one source (or 500 sources, derived from the ledger) at a time. What is held whole is
small per source: the normalizations, the source states, the blob addresses.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, func, select

from .. import faults
from ..canonical import sha256_hex
from ..errors import BlobMissing, ChecksumMismatch
from ..ids import IdScheme, scheme
from ..model.generation import generation_hash, manifest_digest, source_digest
from ..model.objects import ChainIds, chain_ids, claim_hash, source_id_for, statement_of
from ..progress import Progress
from ..storage import generations, index_file, index_folder
from ..storage import states as state
from ..storage.blobs import ALGORITHM, PACKS, DiskBlobStore
from ..storage.tables import (
    Claim,
    Evidence,
    Generation,
    Head,
    Normalization,
    Revision,
    Segment,
    Source,
    SourceState,
)
from ..storage.tables import (
    ClaimState as ClaimStateRow,
)
from ..syscalls import start_helper
from .indexing import generation_digest
from .ledger_pool import helper_engine, ledger_helpers

HASH_JOBS = 8  # processes re-hashing blobs (check_blobs)


@dataclass
class VerifyReport:
    findings: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    raw_bytes: int = 0
    hash_seconds: float = 0.0
    seconds: float = 0.0
    generation: dict[str, Any] | None = None

    def add(self, severity: str, code: str, subject: str, message: str) -> None:
        self.findings.append(
            {"code": code, "severity": severity, "subject": subject, "message": message}
        )

    @property
    def ok(self) -> bool:
        return not any(f["severity"] in ("error", "warning") for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        mb = self.raw_bytes / 1e6
        return {
            "ok": self.ok,
            "generation": self.generation,
            "counts": dict(sorted(self.counts.items())),
            "throughput": {
                "blob_bytes": self.raw_bytes,
                "hash_seconds": round(self.hash_seconds, 3),
                "mb_per_s": round(mb / self.hash_seconds, 1) if self.hash_seconds > 0 else None,
            },
            "findings": sorted(
                self.findings, key=lambda f: (f["severity"] != "error", f["code"], f["subject"])
            ),
            "seconds": round(self.seconds, 3),
        }


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


def _rows(conn: Connection, stmt: Any) -> Iterator[Any]:
    yield from conn.execution_options(yield_per=5000).execute(stmt)


def check_ledger(
    conn: Connection,
    ids: ChainIds,
    store: DiskBlobStore,
    present: set[str],
    report: VerifyReport,
    progress: Progress | None,
) -> None:
    for sid, path in _rows(conn, select(Source.c.id, Source.c.path)):
        report.counts["sources"] += 1
        if source_id_for(path) != sid:
            report.add(
                "error", "id_mismatch", sid, f"source {sid} does not derive from its path {path!r}"
            )
    for rid, sid, blob in _rows(conn, select(Revision.c.id, Revision.c.source_id, Revision.c.blob)):
        report.counts["revisions"] += 1
        if ids.revision_id(sid, blob) != rid:
            report.add("error", "id_mismatch", rid, f"revision {rid} does not derive from its row")
        if blob not in present:
            report.add(
                "error",
                "blob_missing",
                rid,
                f"the raw blob {blob} of revision {rid} is missing or corrupt",
            )

    norms = {
        r[0]: r
        for r in _rows(
            conn,
            select(
                Normalization.c.id,
                Normalization.c.revision_id,
                Normalization.c.adapter,
                Normalization.c.adapter_version,
                Normalization.c.config_hash,
                Normalization.c.status,
                Normalization.c.text_blob,
            ),
        )
    }
    for nid, rev, adapter, version, config, status, blob in norms.values():
        report.counts["normalizations"] += 1
        expected = ids.normalization_id(rev, adapter, version, config)
        if expected != nid:
            report.add(
                "error", "id_mismatch", nid, f"normalization {nid} does not derive from its row"
            )
        if status == "ok" and blob not in present:
            report.add(
                "error",
                "blob_missing",
                nid,
                f"the text blob {blob} of normalization {nid} is missing or corrupt",
            )

    # Segments and evidence, one normalization's text at a time: two streams in the same
    # order of normalization ID, walked side by side (memory: one normalization's rows).
    segments = _rows(
        conn,
        select(
            Segment.c.normalization_id,
            Segment.c.id,
            Segment.c.ordinal,
            Segment.c.start,
            Segment.c.end,
            Segment.c.sha256,
        ).order_by(_bytewise(conn, Segment.c.normalization_id), Segment.c.ordinal),
    )
    evidence = _rows(
        conn,
        select(
            Segment.c.normalization_id,
            Evidence.c.id,
            Evidence.c.claim_id,
            Evidence.c.segment_id,
            Evidence.c.start,
            Evidence.c.end,
            Evidence.c.sha256,
            Evidence.c.role,
            Claim.c.statement,  # None when the claim is missing (a dangling reference)
        )
        .join(Segment, Segment.c.id == Evidence.c.segment_id)
        .outerjoin(Claim, Claim.c.id == Evidence.c.claim_id)
        .order_by(_bytewise(conn, Segment.c.normalization_id)),
    )
    done = 0
    for done, (nid, segs, evs) in enumerate(_side_by_side(segments, evidence), 1):
        norm = norms.get(nid)
        blob = norm[6] if norm else None
        text = None
        if blob in present:
            text = store.get(blob).decode("utf-8")
        spans = {}
        for _n, seg_id, ordinal, start, end, sha in segs:
            report.counts["segments"] += 1
            spans[seg_id] = (start, end)
            if ids.segment_id(nid, ordinal, start, end, sha) != seg_id:
                report.add(
                    "error", "id_mismatch", seg_id, f"segment {seg_id} does not derive from its row"
                )
            elif text is not None and sha256_hex(text[start:end]) != sha:
                report.add(
                    "error",
                    "excerpt_mismatch",
                    seg_id,
                    f"segment {seg_id} text does not hash to its SHA-256",
                )
        for _n, eid, cid, seg_id, start, end, sha, role, statement in evs:
            report.counts["evidence"] += 1
            if ids.evidence_id(cid, seg_id, start, end, sha, role) != eid:
                report.add(
                    "error", "id_mismatch", eid, f"evidence {eid} does not derive from its row"
                )
            elif seg_id in spans and not (spans[seg_id][0] <= start < end <= spans[seg_id][1]):
                report.add(
                    "error", "excerpt_mismatch", eid, f"evidence {eid} lies outside its segment"
                )
            elif text is not None and sha256_hex(text[start:end]) != sha:
                report.add(
                    "error",
                    "excerpt_mismatch",
                    eid,
                    f"evidence {eid} excerpt does not hash to its SHA-256",
                )
            elif (
                role == "statement"
                and text is not None
                and statement is not None
                and statement_of(text[start:end]) != statement
            ):
                # A claim says what its statement evidence says (whitespace collapsed, NFC):
                # the ID and hash of a claim only prove its statement was not changed since.
                report.add(
                    "error",
                    "excerpt_mismatch",
                    cid,
                    f"claim {cid}: its statement is not the excerpt of its evidence {eid}",
                )
        if progress and (done % 500 == 0):
            progress("check ledger (normalizations)", done, max(done, len(norms)), 0)
    if progress:
        progress("check ledger (normalizations)", done, done, 0)


def check_claims(conn: Connection, ids: ChainIds, report: VerifyReport) -> None:
    """Every claim's ID derives from its row, every claim state's hash from its claim."""
    for cid, sid, authority, statement, occurrence in _rows(
        conn,
        select(
            Claim.c.id, Claim.c.source_id, Claim.c.authority, Claim.c.statement, Claim.c.occurrence
        ),
    ):
        report.counts["claims"] += 1
        if ids.claim_id(sid, authority, statement, occurrence) != cid:
            report.add("error", "id_mismatch", cid, f"claim {cid} does not derive from its row")
    for cid, status, recorded, ev_json, authority, statement in _rows(
        conn,
        select(
            ClaimStateRow.c.claim_id,
            ClaimStateRow.c.status,
            ClaimStateRow.c.claim_hash,
            ClaimStateRow.c.evidence_ids,
            Claim.c.authority,
            Claim.c.statement,
        ).outerjoin(Claim, Claim.c.id == ClaimStateRow.c.claim_id),
    ):
        report.counts["claim_states"] += 1
        got = claim_hash(cid, statement or "", authority or "", status, json.loads(ev_json))
        if got != recorded:
            report.add(
                "error",
                "claim_hash_mismatch",
                cid,
                f"a state of claim {cid} does not match its recorded hash",
            )


# From this many claims on, with more than one core, `check_claims` runs in a helper process
# beside the rest of the ledger's check (about 40% of it): the spawn costs half a second.
CLAIMS_HELPER_FROM = 20_000


@contextlib.contextmanager
def claims_checked_beside(
    conn: Connection, ids: ChainIds, report: VerifyReport, helper_from: int = CLAIMS_HELPER_FROM
) -> Iterator[None]:
    """Check the claims (`check_claims`) while the body runs: in a helper process on its own
    ledger connection when the ledger is large and there is a core for it (stopped if the body
    fails or is interrupted), else here after the body. A claim is never changed once written,
    and a later snapshot of claim states only adds states: the helper finds what the command's
    own snapshot would."""
    cores = os.cpu_count() or 1
    if (
        cores < 2
        or conn.execute(select(func.count()).select_from(Claim)).scalar_one() < helper_from
    ):
        yield
        check_claims(conn, ids, report)
        return
    with ledger_helpers(conn, 1) as helpers:
        pending = helpers.pool.apply_async(_check_claims_helper, (helpers.url, ids.scheme.number))
        yield
        findings, counts = pending.get()
    report.findings.extend(findings)
    for name, n in counts.items():
        report.counts[name] += n


def _check_claims_helper(url: str, id_scheme: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    report = VerifyReport()
    with helper_engine(url).connect() as conn:
        check_claims(conn, chain_ids(scheme(id_scheme)), report)
    return report.findings, dict(report.counts)


def _bytewise(conn: Connection, column: Any) -> Any:
    """`column` ordered by its bytes, as Python orders the same ASCII strings: SQLite's default;
    PostgreSQL's may follow the database's locale."""
    return column.collate("C") if conn.dialect.name == "postgresql" else column


def _side_by_side(
    segments: Iterator[Any], evidence: Iterator[Any]
) -> Iterator[tuple[str, list[Any], list[Any]]]:
    """(normalization ID, its segment rows, its evidence rows) from two streams of rows that
    start with the normalization ID, both in that ID's byte order."""
    seg, ev = next(segments, None), next(evidence, None)
    while seg is not None or ev is not None:
        nid = min(r[0] for r in (seg, ev) if r is not None)
        segs, evs = [], []
        while seg is not None and seg[0] == nid:
            segs.append(seg)
            seg = next(segments, None)
        while ev is not None and ev[0] == nid:
            evs.append(ev)
            ev = next(evidence, None)
        yield nid, segs, evs


MAX_REFERENCE_FINDINGS = 100
REFERENCE_CHECK_CACHE_MIB = 256  # as much as ingest's ledger connection has (staging.py)


def check_references(conn: Connection, report: VerifyReport) -> None:
    """Every reference between ledger rows leads to a row. SQLite checks them on insert except
    in an ingest's batches (`Staging.batch`, which checks its rows in memory instead): this
    checks them all (`PRAGMA foreign_key_check`). PostgreSQL always enforces them."""
    faults.point("verify.references")
    if conn.dialect.name != "sqlite":
        return
    # The check looks every reference up in its parent's B-tree: with SQLite's default 2 MiB
    # page cache that took 4.4 s of a 10,000-file ledger's verify, 1.6-1.9 s with this one.
    (cache,) = conn.exec_driver_sql("PRAGMA cache_size").one()
    conn.exec_driver_sql(f"PRAGMA cache_size=-{REFERENCE_CHECK_CACHE_MIB * 1024}")
    dangling = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
    # Not in a `finally`: after a failed or interrupted (Ctrl-C) statement SQLAlchemy refuses
    # the connection any further statement, and that refusal would hide what happened.
    conn.exec_driver_sql(f"PRAGMA cache_size={int(cache)}")
    for table, rowid, parent, _fk in dangling[:MAX_REFERENCE_FINDINGS]:
        report.add(
            "error",
            "dangling_reference",
            f"{table}:{rowid}",
            f"row {rowid} of {table} refers to a row of {parent} that does not exist",
        )
    if len(dangling) > MAX_REFERENCE_FINDINGS:
        report.add(
            "error",
            "dangling_reference",
            "ledger",
            f"{len(dangling) - MAX_REFERENCE_FINDINGS} more rows refer to rows that do not exist",
        )


def _by_interval(conn: Connection, stmt: Any) -> tuple[dict[int, list[Any]], dict[int, list[Any]]]:
    """State rows by the generation that opened them and the one that closed them
    (`stmt` selects gen_from and gen_to as its last two columns)."""
    opened: dict[int, list[Any]] = defaultdict(list)
    closed: dict[int, list[Any]] = defaultdict(list)
    for row in _rows(conn, stmt):
        opened[row[-2]].append(row)
        if row[-1] is not None:
            closed[row[-1]].append(row)
    return opened, closed


def check_generations(conn: Connection, report: VerifyReport) -> generations.GenerationRef | None:
    """Replay every generation in order and re-derive its digests and hash."""
    gens = list(
        _rows(
            conn,
            select(
                Generation.c.number,
                Generation.c.hash,
                Generation.c.parent_hash,
                Generation.c.manifest_digest,
            ).order_by(Generation.c.number),
        )
    )
    opened_sources, closed_sources = _by_interval(
        conn,
        select(
            SourceState.c.id,
            SourceState.c.source_id,
            SourceState.c.revision_id,
            SourceState.c.normalization_id,
            SourceState.c.digest,
            SourceState.c.gen_from,
            SourceState.c.gen_to,
        ),
    )
    # Which sources' claims each generation opened or closed; the claims themselves are read
    # back per generation, only for those sources (memory: what one generation changed).
    claims_touched: dict[int, set[str]] = defaultdict(set)
    last = gens[-1][0] if gens else 0
    ahead = 0
    for source_id, gen_from, gen_to in _rows(
        conn, select(ClaimStateRow.c.source_id, ClaimStateRow.c.gen_from, ClaimStateRow.c.gen_to)
    ):
        claims_touched[gen_from].add(source_id)
        if gen_to is not None:
            claims_touched[gen_to].add(source_id)
        # States an ingest writes ahead for the generation it is making (staging.py): past
        # the newest generation, they are what an interrupted ingest left.
        ahead += gen_from > last

    sources: dict[str, Any] = {}
    previous = None
    for number, ghash, parent, manifest in gens:
        report.counts["generations"] += 1
        expected_number = 1 if previous is None else previous[0] + 1
        if number != expected_number or parent != (previous[1] if previous else None):
            report.add(
                "error",
                "chain_broken",
                ghash,
                f"generation {number} does not follow generation {expected_number - 1}",
            )
        for row in closed_sources.get(number, []):
            if sources.get(row[1], (None,))[0] == row[0]:
                del sources[row[1]]
        # A source removed here is touched too: none of its claims may stay active.
        touched = set(claims_touched.pop(number, ()))
        touched |= {row[1] for row in closed_sources.get(number, [])}
        for row in opened_sources.get(number, []):
            sources[row[1]] = row
            touched.add(row[1])
        for part in state.chunks(sorted(touched)):
            claims_of = state.claim_states(conn, number, part)
            for sid in part:
                if sid not in sources:
                    if claims_of.get(sid):
                        report.add(
                            "error",
                            "source_digest_mismatch",
                            sid,
                            f"claims of a removed source stay active in generation {number}",
                        )
                    continue
                row = sources[sid]
                got = source_digest(sid, row[2], row[3], [c for _, c in claims_of.get(sid, [])])
                if got != row[4]:
                    report.add(
                        "error",
                        "source_digest_mismatch",
                        sid,
                        f"source {sid} in generation {number}: its digest does not match "
                        "its claims",
                    )
        got_manifest = manifest_digest({sid: row[4] for sid, row in sources.items()})
        if got_manifest != manifest:
            report.add(
                "error",
                "manifest_mismatch",
                ghash,
                f"generation {number}: the manifest does not match its sources",
            )
        if generation_hash(number, parent, manifest) != ghash:
            report.add(
                "error",
                "generation_hash_mismatch",
                ghash,
                f"generation {number} does not hash to its recorded hash",
            )
        previous = (number, ghash)
    head = conn.execute(
        select(Head.c.generation_hash, Head.c.number).where(Head.c.name == "current")
    ).first()
    if gens and (head is None or previous is None or head[0] != previous[1]):
        report.add(
            "error", "head_mismatch", "head", "the head does not point at the newest generation"
        )
    if ahead:
        report.add(
            "info",
            "interrupted_ingest",
            "ledger",
            f"{ahead} claim states were written for generation {last + 1}, which was never "
            "made (an ingest was interrupted, or is running now): the next ingest removes them",
        )
    return generations.head(conn)


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
        try:
            conn_i = sqlite3.connect(index_file.ro_uri(path), uri=True)
            try:
                conn_i.execute("BEGIN")  # one snapshot of the file
                meta = index_file.read_meta(conn_i)
                old = meta.get("format") != index_file.FORMAT
                problems = [] if old else index_file.check_rows(conn_i)
            finally:
                conn_i.close()
        except sqlite3.DatabaseError as exc:
            report.add("error", "index_corrupt", path.name, f"unreadable: {exc}")
            continue
        if old:
            # Derived data another raytsystem wrote: queries refuse it, rebuilding replaces it.
            number = index_file.index_number(path)
            report.add(
                "warning",
                "index_format",
                path.name,
                f"written in index format {meta.get('format')}, this raytsystem reads "
                f"{index_file.FORMAT}: run `raytsystem index rebuild {number}`",
            )
            continue
        gen = known.get(meta.get("generation_hash", ""))
        if gen is None or index_file.index_path(index_dir, gen.number, gen.hash) != path:
            report.add(
                "error",
                "index_mismatch",
                path.name,
                "records a generation that does not match its file name or the ledger",
            )
            continue
        seen.add(gen.hash)
        for problem in problems:
            report.add("error", "index_mismatch", path.name, problem)
        if current is None or gen.hash != current.hash:
            continue
        try:
            derived = generation_digest(conn, store, gen, progress)
        except (BlobMissing, ChecksumMismatch) as exc:  # a normalized text: reported above
            report.add(
                "warning",
                "index_unchecked",
                path.name,
                f"its rows cannot be derived to compare: {exc}",
            )
            continue
        if derived != meta.get("rows_digest"):
            report.add(
                "error",
                "index_mismatch",
                path.name,
                "its rows differ from the rows the ledger derives for this generation",
            )
    if current is not None and current.hash not in seen:
        report.add(
            "warning",
            "index_missing",
            current.hash,
            "the current generation has no index: run `raytsystem index rebuild`",
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
    derive = chain_ids(ids)
    with claims_checked_beside(conn, derive, report, claims_helper_from):
        check_ledger(conn, derive, store, present, report, progress)
    check_references(conn, report)
    current = check_generations(conn, report)
    report.generation = current.to_json() if current else None
    check_indexes(conn, store, index_dir, current, report, progress)
    report.seconds = time.perf_counter() - started
    return report
