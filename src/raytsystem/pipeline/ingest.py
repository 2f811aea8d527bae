"""INGEST: bring the workspace's files into the ledger and make the next generation.

The order of work is what makes a crash harmless:

1. take the workspace writer lock; read the current head (the parent generation);
2. find the files that may have changed (stat cache) and derive their results in worker
   processes: raw blob, normalization blob, segments, claims, index rows (`files`,
   `parallel`);
3. as the results stream in, batch by batch (`ingest_run.Run.take`): write their immutable
   rows (content-addressed, so writing them twice is harmless), write their claim states
   ahead, opened at the new generation's number, which no reader asks for before the head
   moves there (`storage.staging`), and put their index rows into the new index file, which
   has a temp name;
4. resolve the manual notes (citations, retractions) over the whole generation;
5. if anything changed: compute the generation hash, publish the index file, and in one
   transaction insert the generation, close and open state intervals, and move the head.

A kill before step 5 commits leaves the parent generation current and intact; what was written
before is immutable and reusable, an unreferenced temp file, or a claim state of a generation
that does not exist, which the next ingest deletes before it writes. Memory stays bounded by
a batch of results and one digest per source, whatever the size of the workspace.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from .. import faults
from ..discovery import Walk
from ..errors import RaytError, WorkspaceError
from ..forked import Child
from ..model.generation import SourceState, generation_hash, manifest_digest
from ..model.objects import chain_ids
from ..model.text import Finding
from ..progress import Progress
from ..storage import generations, index_file, index_folder, index_writer
from ..storage import states as state
from ..storage.blobs import DiskBlobStore
from ..storage.db import Ledger, record_id_scheme
from ..storage.lock import writer_lock
from ..storage.staging import Staging, staging
from ..storage.statcache import StatCache
from ..storage.vectors import FILE_NAME as VECTORS_FILE
from ..storage.writes import ObjectRows, commit_generation, insert_objects, record_ingest_run
from ..workspace import Workspace
from .encoding import encode_generation
from .files import now_iso
from .indexing import SourceForIndex, index_rows, rebuild
from .ingest_run import IngestReport, Run
from .ingest_scan import purged_blobs, purged_sources, save_stat_cache, scan_workspace, tasks_for
from .manual import resolve_manual
from .parallel import BATCH, batches, few_collections, results, side_thread
from .screen import screen_for

if TYPE_CHECKING:
    from .meaning import Meaning

SUMMARY_PATHS = 100  # paths a generation's summary lists of the sources added and removed

__all__ = ["IngestReport", "ingest"]


def ingest(
    ws: Workspace,
    ledger: Ledger,
    scope: Sequence[str] = (),
    *,
    jobs: int | None = None,
    lock_timeout: float = 30.0,
    progress: Progress | None = None,
    allow_empty: bool = False,
    walked: Child[Walk] | None = None,
    meaning: Meaning | None = None,
) -> IngestReport:
    """Ingest the workspace (or the paths of `scope`) and make the next generation if
    anything changed; the report says what was done. A generation that would drop every
    source of its parent is made only with `allow_empty` (`_finish`). `walked`: a walk of
    `scope` already under way (`discovery.walk_in_child`). With `meaning`, the current
    generation's statements get their vectors (`encoding.py`, ADR 0044)."""
    started = time.monotonic()
    jobs = jobs or min(os.cpu_count() or 1, 8)
    blobs = DiskBlobStore(ws.raw_dir)
    with (
        writer_lock(ws.state_dir, ledger, lock_timeout),
        staging(ledger) as stage,
        blobs.staging_area() as staging_dir,
        few_collections(),
        side_thread() as side,
    ):
        _settle_id_scheme(ledger, ws.config.ids.scheme)  # before any ID is derived
        run = _start(ws, ledger, blobs, stage, side)
        run.screen = screen_for(ws, purged_blobs(ledger))
        cache = StatCache(
            ws.state_dir / "statcache.sqlite3", run.parent.hash if run.parent else None
        )
        scan = scan_workspace(run, scope, walked)
        run.removed_paths += purged_sources(run, scan)
        tasks = tasks_for(run, scan, cache, staging_dir)
        try:
            with contextlib.closing(results(tasks, blobs, jobs, progress)) as stream:
                for batch in batches(stream, BATCH):
                    run.take(batch)
            with run.settling_index():
                stage.commit()  # the manual layer reads the ledger on connections of its own
            faults.point("ingest.after_normalize")
            generation = _finish(run, started, allow_empty=allow_empty)
        except BaseException:
            run.abandon_index()
            raise
        _tidy_indexes(run, generation)
        if tasks or run.report.created:
            # Otherwise every file looked at was trusted by the cache, for this generation,
            # and nothing else changed: writing the cache again would change nothing.
            save_stat_cache(run, scan, cache, generation or run.parent)
        current = generation or run.parent
    if meaning is not None and current is not None:
        _encode(run.report, meaning, ws, current, progress)
    run.report.seconds = time.monotonic() - started
    return run.report


def _encode(
    report: IngestReport,
    meaning: Meaning,
    ws: Workspace,
    current: generations.GenerationRef,
    progress: Progress | None,
) -> None:
    """The current generation's vectors (ADR 0044), after the writer lock is released: the
    store only gains rows named by their content, so two ingests may add the same one. A
    store that cannot be written is a finding; the generation stands, and its queries encode
    their first citations until an ingest encodes it."""
    try:
        report.vectors_encoded = encode_generation(
            meaning.encoder, ws.state_dir, ws.index_dir, current, progress
        )
    except (sqlite3.Error, RaytError) as exc:
        report.findings.append(
            Finding(
                "vectors_not_encoded",
                f".raytsystem/{VECTORS_FILE}",
                f"the generation's vectors were not stored ({exc}); if the store is damaged, "
                "delete it: the next ingest encodes again",
            )
        )


def _settle_id_scheme(ledger: Ledger, named: int) -> None:
    """Derive IDs by the ledger's scheme, which must be the one raytsystem.toml names: one
    ledger never mixes schemes (ADR 0030)."""
    recorded = record_id_scheme(ledger, named)
    if recorded != named:
        raise WorkspaceError(
            f"this ledger's IDs are derived by ID scheme {recorded}, and "
            f"raytsystem.toml's [ids] scheme is {named} (1 when it names none). A ledger keeps "
            f"the scheme it was made with: set `scheme = {recorded}` under [ids], or "
            "ingest into a new ledger (move .raytsystem/ aside, or use a new database; claim "
            "IDs quoted in notes then change)",
            code="id_scheme_mismatch",
        )


def _start(
    ws: Workspace,
    ledger: Ledger,
    blobs: DiskBlobStore,
    stage: Staging,
    side: Callable[..., Future[Any]],
) -> Run:
    """The run's starting point: the parent generation, its active sources, the staging area
    cleared of what an interrupted ingest left, and how the new index will be made."""
    with ledger.reading() as conn:
        parent = generations.head(conn)
        active = state.active_sources(conn, parent.number if parent else None)
    report = IngestReport(generation=parent, parent=parent, created=False)
    left = stage.start(parent.number + 1 if parent else 1)
    if left:
        report.findings.append(
            Finding(
                "interrupted_ingest",
                "ledger",
                f"removed {left} claim states an earlier ingest wrote but never made "
                "current (it was killed or failed before its last transaction)",
                "info",
            )
        )
    parent_index = (
        index_file.index_path(ws.index_dir, parent.number, parent.hash) if parent else None
    )
    usable = parent_index is not None and index_file.usable(
        parent_index, parent.hash if parent else ""
    )
    open_index = functools.partial(
        index_writer.IndexWriter,
        ws.index_dir,
        parent=parent_index if usable else None,
        parent_hash=parent.hash if parent else None,
        spare=index_folder.spare_for(ws.index_dir, parent_index, ws.config.index.keep)
        if usable and parent_index
        else None,
    )
    run = Run(ws, ledger, blobs, stage, parent, active, report, now_iso(), side, open_index)
    run.parent_index, run.parent_index_usable = parent_index, usable
    return run


def _finish(
    run: Run, started: float, *, allow_empty: bool = False
) -> generations.GenerationRef | None:
    """Manual layer, then the new generation if anything changed (None if nothing did, or
    if it would drop every source of a parent that has some and `allow_empty` is not set:
    a selection that selects nothing is far likelier a slip than a wish)."""
    removed = {run.active[p].source_id for p in run.removed_paths} - set(run.states)
    _resolve_notes(run, removed)
    _count_new(run)
    by_id = {a.source_id: a for a in run.active.values()}
    differing = {
        sid: s for sid, s in run.states.items() if sid not in by_id or by_id[sid].digest != s.digest
    }
    if not differing and not removed:
        _keep_the_parent(run, started)
        return None
    if not allow_empty and by_id and not differing and removed >= set(by_id):
        run.report.findings.append(
            Finding(
                "nothing_selected",
                run.ws.root.name,
                f"no file is left to ingest, and every one of the {len(by_id)} sources of "
                f"generation {run.parent.number if run.parent else 0} would be removed: no "
                "generation is made (check include and exclude in raytsystem.toml; "
                "`raytsystem ingest --allow-empty` makes it)",
            )
        )
        _keep_the_parent(run, started)
        return None
    run.index.delete(sorted(removed))
    if run.parent is not None and not run.parent_index_usable:
        run.index_unchanged_sources(set(differing) | removed)
    return _new_generation(run, differing, removed, started)


def _resolve_notes(run: Run, removed: set[str]) -> None:
    """The manual layer: the notes' claims, citations and directives over the whole
    generation; the states it decides are staged and indexed."""
    parent = run.parent
    with run.ledger.reading() as conn:
        manual = resolve_manual(
            conn,
            run.blobs,
            parent.number if parent else None,
            run.active,
            run.changed,
            run.states,
            removed,
            run.stage,
            chain_ids(run.ledger.ids),
        )
    run.report.findings.extend(manual.findings)
    with run.stage.transaction() as conn:
        insert_objects(conn, ObjectRows(evidence=list(manual.evidence)))
        for sid, s in manual.states.items():
            run.states[sid] = s
            run.stage.put_claims(sid, s.claims)
    faults.point("ingest.after_objects")
    if manual.states:
        with run.ledger.reading() as conn:
            sources = [
                SourceForIndex(s.source_id, s.path, s.normalization_id, s.claims)
                for s in manual.states.values()
            ]
            run.index.replace(index_rows(conn, run.blobs, sources))


def _count_new(run: Run) -> None:
    active = run.active
    run.report.new_revisions = sum(
        1
        for r in run.changed.values()
        if (a := active.get(r.path)) is None or a.revision_id != r.revision_id
    )
    run.report.new_sources = sum(1 for p in run.changed if p not in active)


def _keep_the_parent(run: Run, started: float) -> None:
    """Nothing changed: no generation. The index made so far goes; a parent generation
    without a usable index here (a machine that shares the ledger, or lost its
    .raytsystem/indexes) gets it back from the ledger."""
    run.abandon_index()
    parent = run.parent
    if parent is not None and not run.parent_index_usable:
        with run.ledger.reading() as conn:
            rebuild(run.ws.index_dir, conn, run.blobs, parent)
        run.report.index_rebuilt = True
    run.report.seconds = time.monotonic() - started
    with run.stage.transaction() as conn:
        run.stage.keep_only(())  # what the manual layer restated, the same as before
        record_ingest_run(conn, run.started_at, now_iso(), None, run.report.to_json())


def _new_generation(
    run: Run, differing: dict[str, SourceState], removed: set[str], started: float
) -> generations.GenerationRef:
    """Hash the new generation, publish its index, and commit it (`_commit`)."""
    parent = run.parent
    number = parent.number + 1 if parent else 1
    digests = {a.source_id: a.digest for a in run.active.values()}
    for sid in removed:
        digests.pop(sid, None)
    digests.update({sid: s.digest for sid, s in differing.items()})
    manifest = manifest_digest(digests)
    ghash = generation_hash(number, parent.hash if parent else None, manifest)
    faults.point("ingest.before_index")
    path = index_file.index_path(run.ws.index_dir, number, ghash)
    # What the ledger records of the index: each changed source's rows digest, and the
    # whole index's (a query checks the rows of the sources it cites against them).
    differing = {
        sid: dataclasses.replace(s, index_digest=run.index.digest_of(sid))
        for sid, s in differing.items()
    }
    index_digest = run.index.finish(path, ghash, number)
    with index_file.open_index(path, ghash):
        pass  # the index opens and records this generation: it is complete
    faults.point("ingest.after_index")
    if index_folder.wants_spare(run.ws.index_dir, run.ws.config.index.keep):
        # Copied while the ledger's transaction runs (the copy waits on the disk, the
        # transaction mostly on the CPU): a spare made for a generation whose transaction then
        # fails is still a good spare.
        run.spare = run.side(index_folder.make_spare, run.ws.index_dir, path)
    draft = generations.GenerationRef(
        number,
        ghash,
        parent.hash if parent else None,
        manifest,
        now_iso(),
        len(digests),
        0,
        {},
        index_digest,
    )
    return _commit(run, draft, differing, removed, started)


def _commit(
    run: Run,
    draft: generations.GenerationRef,
    differing: dict[str, SourceState],
    removed: set[str],
    started: float,
) -> generations.GenerationRef:
    """The generation's one transaction: the staged states' intervals closed and opened, the
    generation inserted, the head moved, the run recorded. Fails with `generation_moved`
    if another writer moved the head meanwhile."""
    parent, report = run.parent, run.report
    by_id = {a.source_id: a for a in run.active.values()}
    with run.stage.transaction(final=True) as conn:
        current = generations.head(conn)
        if (current.hash if current else None) != (parent.hash if parent else None):
            raise RaytError(
                "the current generation moved while this ingest ran", code="generation_moved"
            )
        run.stage.keep_only(differing)
        run.stage.put_sources(differing.values(), removed, parented=by_id)
        added, closed, restated = run.stage.apply()
        report.claims_added, report.claims_removed, report.claims_changed = added, closed, restated
        report.removed_sources = len(removed)
        generation = generations.GenerationRef(
            draft.number,
            draft.hash,
            draft.parent_hash,
            draft.manifest_digest,
            draft.created_at,
            draft.source_count,
            (parent.claim_count if parent else 0) + added - closed,
            _summary(run, differing, removed, (added, closed, restated)),
            draft.index_digest,
        )
        commit_generation(conn, generation, current)
        report.generation = generation
        report.created = True
        report.seconds = time.monotonic() - started
        record_ingest_run(conn, run.started_at, now_iso(), generation.hash, report.to_json())
    faults.point("ingest.after_commit")
    return generation


def _summary(
    run: Run,
    differing: dict[str, SourceState],
    removed: set[str],
    claims: tuple[int, int, int],
) -> dict[str, Any]:
    """What a generation's row says it changed."""
    by_id = {a.source_id: a for a in run.active.values()}
    added_paths = sorted(s.path for sid, s in differing.items() if sid not in by_id)
    removed_paths = sorted(by_id[s].path if s in by_id else s for s in removed)
    added, closed, restated = claims
    return {
        "sources_added": len(added_paths),
        "sources_changed": len([sid for sid in differing if sid in by_id]),
        "sources_removed": len(removed_paths),
        "sources_added_paths": added_paths[:SUMMARY_PATHS],
        "sources_removed_paths": removed_paths[:SUMMARY_PATHS],
        "claims_added": added,
        "claims_removed": closed,
        "claims_changed": restated,
    }


def _tidy_indexes(run: Run, generation: generations.GenerationRef | None) -> None:
    """Prune the indexes past `[index] keep` once a generation was made, and wait for the
    spare copy."""
    ws, report = run.ws, run.report
    if report.created and generation is not None:
        report.index_built_from = run.index_built_from
        new_index = index_file.index_path(ws.index_dir, generation.number, generation.hash)
        first = [new_index] + ([run.parent_index] if run.parent_index else [])
        report.indexes_pruned = len(index_folder.prune(ws.index_dir, ws.config.index.keep, first))
    report.index_spare_made = run.spare is not None and run.spare.result()
