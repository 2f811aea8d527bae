"""INGEST: bring the workspace's files into the ledger and make the next generation.

The order of work is what makes a crash harmless:

1. take the workspace writer lock; read the current head (the parent generation);
2. find the files that may have changed (stat cache) and process them, in worker processes when
   there are many: raw blob, normalization blob, segments, claims (`files.process_file`);
3. write the immutable rows (sources, revisions, normalizations, segments, claims, evidence);
   they are content-addressed, so writing them twice is harmless;
4. compute the new source states and, if anything changed, the generation hash;
5. build the generation's index file from the parent's plus the delta, and check it;
6. in one transaction: insert the generation, close and open state intervals, move the head.

A kill before step 6 commits leaves the parent generation current and intact; what was written
before is either immutable and reusable, or an unreferenced index file.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, insert, update

from .. import faults
from ..canonical import canonical_json
from ..errors import RaytError
from ..model import index as index_file
from ..model.generation import (
    ClaimState,
    SourceState,
    generation_hash,
    manifest_digest,
    source_digest,
)
from ..model.index import IndexRow
from ..model.objects import ClaimRow, EvidenceRow
from ..model.text import Finding
from ..storage.blobs import DiskBlobStore
from ..storage.db import Ledger
from ..storage.lock import writer_lock
from ..storage.models import (
    Claim,
    Evidence,
    Generation,
    Head,
    IngestRun,
    Normalization,
    Revision,
    Segment,
    Source,
)
from ..storage.models import (
    ClaimState as ClaimStateRow,
)
from ..storage.models import (
    SourceState as SourceStateRow,
)
from ..storage.statcache import StatCache
from ..workspace import Candidate, Refusal, Workspace
from . import state
from .files import FileResult, FileTask, adapter_key, now_iso, process_file, source_id_for
from .indexing import Analyzer, SourceForIndex, index_rows, memory_rows, rebuild
from .manual import ManualResult, resolve_manual

PARALLEL_THRESHOLD = 64
Progress = Callable[[str, int, int, int], None]  # (phase, done, total, bytes)


@dataclass
class IngestReport:
    generation: state.GenerationRef | None
    parent: state.GenerationRef | None
    created: bool
    scanned: int = 0
    unchanged: int = 0
    new_revisions: int = 0
    new_sources: int = 0
    removed_sources: int = 0
    claims_added: int = 0
    claims_removed: int = 0
    bytes_read: int = 0
    index_rebuilt: bool = False
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "generation": None if self.generation is None else self.generation.to_json(),
            "parent": None if self.parent is None else self.parent.to_json(),
            "counts": {
                "scanned": self.scanned,
                "unchanged": self.unchanged,
                "new_revisions": self.new_revisions,
                "new_sources": self.new_sources,
                "removed_sources": self.removed_sources,
                "claims_added": self.claims_added,
                "claims_removed": self.claims_removed,
                "bytes_read": self.bytes_read,
            },
            "index_rebuilt": self.index_rebuilt,
            "findings": [f.to_json() for f in sorted(self.findings)],
            "seconds": round(self.seconds, 3),
        }


def _insert_ignore(conn: Connection, table: Any, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows whose primary key may already exist (immutable, content-addressed rows).

    `INSERT ... ON CONFLICT DO NOTHING` is the same SQL on SQLite and PostgreSQL; it goes to
    the driver's executemany with tuples, several times faster than row dictionaries through
    SQLAlchemy's statement layer for the hundreds of thousands of rows of a cold ingest.
    """
    if not rows:
        return
    columns = [c.name for c in table.columns]
    mark = "%s" if conn.dialect.paramstyle in ("format", "pyformat") else "?"
    quoted = ", ".join(f'"{c}"' for c in columns)
    marks = ", ".join(mark for _ in columns)
    sql = f"INSERT INTO {table.name} ({quoted}) VALUES ({marks}) ON CONFLICT DO NOTHING"
    for part in state.chunks(rows, 5000):
        conn.exec_driver_sql(sql, [tuple(row[c] for c in columns) for row in part])


def _run_tasks(tasks: list[FileTask], jobs: int, progress: Progress | None) -> list[FileResult]:
    results: list[FileResult] = []
    done_bytes = 0
    if jobs > 1 and len(tasks) >= PARALLEL_THRESHOLD:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            chunk = max(1, min(64, len(tasks) // (jobs * 8) or 1))
            for result in pool.map(process_file, tasks, chunksize=chunk):
                results.append(result)
                done_bytes += result.size
                if progress:
                    progress("normalize", len(results), len(tasks), done_bytes)
    else:
        for task in tasks:
            result = process_file(task)
            results.append(result)
            done_bytes += result.size
            if progress:
                progress("normalize", len(results), len(tasks), done_bytes)
    return results


def ingest(
    ws: Workspace,
    ledger: Ledger,
    scope: Sequence[str] = (),
    *,
    jobs: int | None = None,
    lock_timeout: float = 30.0,
    progress: Progress | None = None,
) -> IngestReport:
    started = time.monotonic()
    started_at = now_iso()
    jobs = jobs or min(os.cpu_count() or 1, 8)
    blobs = DiskBlobStore(ws.raw_dir)
    with writer_lock(ws.state_dir, ledger, lock_timeout):
        with ledger.reading() as conn:
            parent = state.head(conn)
            active = state.active_sources(conn, parent.number if parent else None)
        report = IngestReport(generation=parent, parent=parent, created=False)
        cache = StatCache(ws.state_dir / "statcache.sqlite3", parent.hash if parent else None)

        candidates: list[Candidate] = []
        for item in ws.discover(scope):
            if isinstance(item, Refusal):
                report.findings.append(Finding(item.code, item.path, item.message))
            else:
                candidates.append(item)
        report.scanned = len(candidates)
        seen = {c.path for c in candidates} | {f.subject for f in report.findings}
        in_scope = _scope_filter(scope)
        removed_paths = sorted(p for p in active if in_scope(p) and p not in seen)

        tasks, fresh = [], []
        for c in candidates:
            a = active.get(c.path)
            if (
                a
                and cache.fresh(c.path, c.stat, a.revision_id)
                and a.adapter == _current_adapter(c.path)
            ):
                fresh.append(c)
                continue
            tasks.append(
                FileTask(
                    c.path,
                    str(c.disk),
                    str(ws.raw_dir),
                    ws.config.ingest.max_file_bytes,
                    a.blob if a else None,
                    a.adapter if a else None,
                )
            )
        results = sorted(_run_tasks(tasks, jobs, progress), key=lambda r: r.path)
        faults.point("ingest.after_normalize")

        changed: dict[str, FileResult] = {}
        for r in results:
            report.bytes_read += r.size
            if r.finding:
                report.findings.append(r.finding)
            report.findings.extend(r.findings)
            if r.outcome == "new":
                changed[r.path] = r
            elif r.outcome == "skipped" and r.path in active:
                removed_paths.append(r.path)  # its content can no longer be ingested
        report.unchanged = len(fresh) + sum(1 for r in results if r.outcome == "unchanged")

        new_states, manual = _new_states(ledger, blobs, parent, active, changed, removed_paths)
        report.findings.extend(manual.findings)
        report.new_revisions = sum(
            1
            for r in changed.values()
            if (a := active.get(r.path)) is None or a.revision_id != r.revision_id
        )
        report.new_sources = sum(1 for p in changed if p not in active)
        stat_entries = [
            (c.path, c.stat, _cached_revision(c.path, active, changed)) for c in candidates
        ]
        stat_entries = [(p, st, rev) for p, st, rev in stat_entries if rev]

        if not new_states.changed and not new_states.removed:
            _store_objects(ledger, blobs, changed, manual, started_at)
            if parent is not None and not index_file.usable(
                index_file.index_path(ws.index_dir, parent.number, parent.hash), parent.hash
            ):
                # A machine that shares the ledger (or lost its .raytsystem/indexes) gets the
                # current generation's index back from the ledger.
                with ledger.reading() as conn:
                    rebuild(ws.index_dir, conn, blobs, parent)
                report.index_rebuilt = True
            report.seconds = time.monotonic() - started
            with ledger.transaction() as conn:
                _record_run(conn, started_at, None, report)
            cache.save(parent.hash if parent else None, stat_entries)
            return report

        generation = _commit_generation(
            ws,
            ledger,
            blobs,
            parent,
            active,
            new_states,
            changed,
            manual,
            report,
            started_at,
            started,
        )
        cache.save(generation.hash, stat_entries)
        report.generation = generation
        report.created = True
        report.seconds = time.monotonic() - started
        return report


def _scope_filter(scope: Sequence[str]) -> Callable[[str], bool]:
    prefixes = [s.rstrip("/") for s in scope if s]
    if not prefixes:
        return lambda _p: True
    return lambda p: any(p == s or p.startswith(s + "/") for s in prefixes)


def _current_adapter(path: str) -> str:
    from ..model.adapters import media_type_for

    return _adapter_key_for(media_type_for(path))


@functools.lru_cache(maxsize=16)
def _adapter_key_for(media_type: str) -> str:
    from ..model.adapters import adapter_for

    return adapter_key(adapter_for(media_type))


def _cached_revision(
    path: str, active: dict[str, state.ActiveSource], changed: dict[str, FileResult]
) -> str:
    if path in changed:
        return changed[path].revision_id
    a = active.get(path)
    return a.revision_id if a else ""


def _in_parallel(child_work: Callable[[], object], own_work: Callable[[], None]) -> None:
    """Run `child_work` in a forked process while this one does `own_work`; wait for both.

    Used to build the index file while the ledger rows are written: both are CPU-bound Python
    around SQLite, so threads would only take turns on the GIL. The child inherits what it
    needs (copy-on-write), touches only its own file, and leaves with os._exit. A child failure
    is an error here; where fork does not exist, the two run one after the other.
    """
    if not hasattr(os, "fork"):
        child_work()
        own_work()
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        code = 0
        try:
            child_work()
        except BaseException as exc:
            os.write(write_end, f"{type(exc).__name__}: {exc}"[:4000].encode("utf-8", "replace"))
            code = 1
        os._exit(code)
    os.close(write_end)
    try:
        own_work()
    finally:
        with os.fdopen(read_end, "rb") as pipe:
            message = pipe.read().decode("utf-8", "replace")
        _, status = os.waitpid(pid, 0)
    if status != 0:
        raise RaytError(
            f"building the index failed: {message or f'status {status}'}", code="index_build_failed"
        )


def _store_objects(
    ledger: Ledger,
    blobs: DiskBlobStore,
    changed: dict[str, FileResult],
    manual: ManualResult,
    seen_at: str,
) -> None:
    """The immutable rows of this ingest, after the blobs they point to are durable."""
    # Workers wrote blobs without syncing their folders: one fsync per shard, before any
    # row that points to them is committed.
    blobs.sync_dirs(
        str(a) for r in changed.values() for a in (r.blob, r.normalization.get("text_blob")) if a
    )
    with ledger.transaction() as conn:
        _write_objects(conn, changed.values(), seen_at, manual.claims, manual.evidence)
    faults.point("ingest.after_objects")


def _write_objects(
    conn: Connection,
    results: Iterable[FileResult],
    seen_at: str,
    extra_claims: Sequence[ClaimRow],
    extra_evidence: Sequence[EvidenceRow],
) -> None:
    sources, revisions, normalizations, segments, claims, evidence = [], [], [], [], [], []
    for r in results:
        sid = source_id_for(r.path)
        sources.append({"id": sid, "path": r.path, "first_seen_at": seen_at})
        revisions.append(
            {
                "id": r.revision_id,
                "source_id": sid,
                "blob": r.blob,
                "size": r.size,
                "media_type": r.media_type,
                "first_seen_at": seen_at,
            }
        )
        normalizations.append(r.normalization)
        segments.extend(s.__dict__ for s in r.segments)
        for claim, ev in r.claims:
            claims.append(claim.__dict__)
            evidence.append(ev.__dict__)
    claims.extend(c.__dict__ for c in extra_claims)
    evidence.extend(e.__dict__ for e in extra_evidence)
    _insert_ignore(conn, Source.__table__, sources)
    _insert_ignore(conn, Revision.__table__, revisions)
    _insert_ignore(conn, Normalization.__table__, normalizations)
    _insert_ignore(conn, Segment.__table__, segments)
    _insert_ignore(conn, Claim.__table__, claims)
    _insert_ignore(conn, Evidence.__table__, evidence)


@dataclass
class NewStates:
    changed: dict[str, SourceState]  # source id -> state, only those that differ from the parent
    removed: set[str]  # source ids


def _new_states(
    ledger: Ledger,
    blobs: DiskBlobStore,
    parent: state.GenerationRef | None,
    active: dict[str, state.ActiveSource],
    changed: dict[str, FileResult],
    removed_paths: list[str],
) -> tuple[NewStates, ManualResult]:
    states: dict[str, SourceState] = {}
    for r in changed.values():
        sid = source_id_for(r.path)
        claims = tuple(
            ClaimState(c.id, sid, "confirmed", h, (e.id,))
            for (c, e), h in zip(r.claims, r.claim_hashes, strict=True)
        )

        nid = str(r.normalization["id"])
        states[sid] = SourceState(
            sid, r.path, r.revision_id, nid, source_digest(sid, r.revision_id, nid, claims), claims
        )
    removed = {active[p].source_id for p in removed_paths}
    # Manual notes: citations, statuses of the claims they retract or dispute.
    with ledger.reading() as conn:
        manual = resolve_manual(
            conn, blobs, parent.number if parent else None, active, changed, states, removed
        )
    states.update(manual.states)
    by_id = {a.source_id: a for a in active.values()}
    differing = {
        sid: s for sid, s in states.items() if sid not in by_id or by_id[sid].digest != s.digest
    }
    return NewStates(differing, removed - set(states)), manual


def _commit_generation(
    ws: Workspace,
    ledger: Ledger,
    blobs: DiskBlobStore,
    parent: state.GenerationRef | None,
    active: dict[str, state.ActiveSource],
    new: NewStates,
    changed: dict[str, FileResult],
    manual: ManualResult,
    report: IngestReport,
    started_at: str,
    started: float,
) -> state.GenerationRef:
    number = parent.number + 1 if parent else 1
    digests = {a.source_id: a.digest for a in active.values()}
    for sid in new.removed:
        digests.pop(sid, None)
    for sid, s in new.changed.items():
        digests[sid] = s.digest
    manifest = manifest_digest(digests)
    ghash = generation_hash(number, parent.hash if parent else None, manifest)
    touched = set(new.changed) | new.removed

    with ledger.reading() as conn:
        old_claims = state.claim_states(conn, parent.number, touched) if parent else {}
        to_close: list[int] = []
        to_open: list[ClaimState] = []
        for sid in touched:
            before = {(c.claim_id, c.claim_hash): row_id for row_id, c in old_claims.get(sid, [])}
            after = {
                (c.claim_id, c.claim_hash): c
                for c in (new.changed[sid].claims if sid in new.changed else ())
            }
            to_close.extend(row_id for key, row_id in before.items() if key not in after)
            to_open.extend(c for key, c in after.items() if key not in before)
        report.claims_added = len(to_open)
        report.claims_removed = len(to_close)
        claim_count = (parent.claim_count if parent else 0) + len(to_open) - len(to_close)

        analyzer = Analyzer()
        paths = {a.source_id: a.path for a in active.values()}
        paths.update({s.source_id: s.path for s in new.changed.values()})
        parent_index = (
            index_file.index_path(ws.index_dir, parent.number, parent.hash) if parent else None
        )
        if (
            parent is not None
            and parent_index is not None
            and index_file.usable(parent_index, parent.hash)
        ):
            todo = list(new.changed.values())
        else:
            parent_index = None
            todo = _all_states(conn, parent, new)
        # Sources computed in this ingest get their rows from memory (most from the workers);
        # the others (a status changed by a directive, or all of them for a full build) from
        # the ledger, whose rows for them already exist.
        from_memory = {source_id_for(p): r for p, r in changed.items() if r.texts}
        rows = {
            s.source_id: _rows_from_result(s, from_memory[s.source_id], manual, analyzer)
            for s in todo
            if s.source_id in from_memory
        }
        rows.update(
            index_rows(
                conn,
                blobs,
                [
                    SourceForIndex(s.source_id, s.path, s.normalization_id, s.claims)
                    for s in todo
                    if s.source_id not in from_memory
                ],
                analyzer,
            )
        )
    faults.point("ingest.before_index")
    path = index_file.index_path(ws.index_dir, number, ghash)
    build = functools.partial(
        index_file.build,
        path,
        generation_hash=ghash,
        generation_number=number,
        changed=rows,
        removed=sorted(new.removed) if parent_index else (),
        parent=parent_index,
        parent_hash=parent.hash if parent else None,
    )
    _in_parallel(build, lambda: _store_objects(ledger, blobs, changed, manual, started_at))
    with index_file.open_index(path, ghash):
        pass  # the index opens and records this generation: it is complete
    faults.point("ingest.after_index")

    summary = {
        "sources_added": sorted(
            new.changed[s].path
            for s in new.changed
            if s not in {a.source_id for a in active.values()}
        ),
        "sources_changed": len(
            [s for s in new.changed if s in {a.source_id for a in active.values()}]
        ),
        "sources_removed": sorted(paths.get(s, s) for s in new.removed),
        "claims_added": len(to_open),
        "claims_removed": len(to_close),
    }
    report.removed_sources = len(new.removed)
    created_at = now_iso()
    with ledger.transaction() as conn:
        current = state.head(conn)
        if (current.hash if current else None) != (parent.hash if parent else None):
            raise RaytError(
                "the current generation moved while this ingest ran", code="generation_moved"
            )
        conn.execute(
            insert(Generation.__table__),
            {
                "hash": ghash,
                "number": number,
                "parent_hash": parent.hash if parent else None,
                "manifest_digest": manifest,
                "created_at": created_at,
                "source_count": len(digests),
                "claim_count": claim_count,
                "summary": canonical_json(summary).decode("utf-8"),
            },
        )
        ss = SourceStateRow.__table__
        for part in state.chunks(sorted(touched)):
            conn.execute(
                update(ss)
                .where(ss.c.source_id.in_(part), ss.c.gen_to.is_(None))
                .values(gen_to=number)
            )
        if new.changed:
            conn.execute(
                insert(ss),
                [
                    {
                        "source_id": s.source_id,
                        "revision_id": s.revision_id,
                        "normalization_id": s.normalization_id,
                        "digest": s.digest,
                        "gen_from": number,
                        "gen_to": None,
                    }
                    for s in new.changed.values()
                ],
            )
        cs = ClaimStateRow.__table__
        for part in state.chunks(sorted(to_close)):
            conn.execute(update(cs).where(cs.c.id.in_(part)).values(gen_to=number))
        if to_open:
            for part in state.chunks(to_open, 2000):
                conn.execute(
                    insert(cs),
                    [
                        {
                            "claim_id": c.claim_id,
                            "source_id": c.source_id,
                            "status": c.status,
                            "claim_hash": c.claim_hash,
                            "evidence_ids": canonical_json(sorted(c.evidence_ids)).decode("utf-8"),
                            "gen_from": number,
                            "gen_to": None,
                        }
                        for c in part
                    ],
                )
        faults.point("ingest.before_head")
        if current is None:
            conn.execute(
                insert(Head.__table__),
                {"name": "current", "generation_hash": ghash, "number": number},
            )
        else:
            moved = conn.execute(
                update(Head.__table__)
                .where(Head.name == "current", Head.generation_hash == current.hash)
                .values(generation_hash=ghash, number=number)
            )
            if moved.rowcount != 1:
                raise RaytError("the head moved during ingest", code="generation_moved")
        generation = state.GenerationRef(
            number,
            ghash,
            parent.hash if parent else None,
            manifest,
            created_at,
            len(digests),
            claim_count,
            summary,
        )
        report.generation = generation
        report.created = True
        report.seconds = time.monotonic() - started
        _record_run(conn, started_at, ghash, report)
    faults.point("ingest.after_commit")
    return generation


def _rows_from_result(
    s: SourceState, r: FileResult, manual: ManualResult, analyzer: Analyzer
) -> list[IndexRow]:
    if r.index_rows and [c.claim_hash for c in s.claims] == r.claim_hashes:
        return r.index_rows  # the worker's rows: every claim kept its default state
    headings = {seg.id: seg.heading_path for seg in r.segments}
    facts: dict[str, tuple[str, str, str]] = {}
    for claim, evidence in r.claims:
        facts[claim.id] = (
            claim.statement,
            claim.authority,
            headings.get(evidence.segment_id, "[]"),
        )
    if (
        s.claims and not facts
    ):  # a manual note: its claims and statement evidence are the manual layer's
        statements = {c.id: c for c in manual.claims if c.source_id == s.source_id}
        for ev in manual.evidence:
            if ev.role == "statement" and ev.claim_id in statements:
                c = statements[ev.claim_id]
                facts[c.id] = (c.statement, c.authority, headings.get(ev.segment_id, "[]"))
    nid = s.normalization_id
    segments = [(x.id, x.sha256, x.kind, x.heading_path, x.start, x.end) for x in r.segments]
    return memory_rows(
        s.source_id,
        s.path,
        nid,
        r.texts.get(nid or ""),
        segments,
        s.claims,
        facts.__getitem__,
        analyzer,
    )


def _all_states(
    conn: Connection, parent: state.GenerationRef | None, new: NewStates
) -> list[SourceState]:
    """Every source state of the new generation (for a full index build)."""
    out = list(new.changed.values())
    if parent is None:
        return out
    keep = {
        a.source_id: a
        for a in state.active_sources(conn, parent.number).values()
        if a.source_id not in new.changed and a.source_id not in new.removed
    }
    claims = state.claim_states(conn, parent.number, keep)
    for sid, a in keep.items():
        out.append(
            SourceState(
                sid,
                a.path,
                a.revision_id,
                a.normalization_id,
                a.digest,
                tuple(c for _, c in claims.get(sid, [])),
            )
        )
    return out


def _record_run(conn: Connection, started_at: str, ghash: str | None, report: IngestReport) -> None:
    conn.execute(
        insert(IngestRun.__table__),
        {
            "started_at": started_at,
            "finished_at": now_iso(),
            "generation_hash": ghash,
            "summary": json.dumps(report.to_json(), ensure_ascii=False, sort_keys=True),
        },
    )
