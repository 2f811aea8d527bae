"""What an ingest looks at (`pipeline/ingest.py`, steps 1-2): the workspace's files (or
those of its PATHS), the ones the stat cache cannot vouch for (each becomes a `FileTask`),
the active sources whose revision was purged (ADR 0040), and, once the generation is made,
the stat cache written back for the next ingest and the freshness check.

Not to be confused with `pipeline/scan.py` (`raytsystem scan`, the secrets screen alone).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..discovery import Candidate, Refusal, Skip, Walk, walk
from ..forked import Child, ChildFailed
from ..model.adapters import adapter_for, media_type_for
from ..model.text import Finding
from ..storage import generations, tombstones
from ..storage import states as state
from ..storage.db import Ledger
from ..storage.statcache import StatCache
from .files import FileResult, FileTask, KeptFile, adapter_key
from .ingest_run import Run
from .screen import findings_from_text, findings_text


@dataclass
class Scan:
    """The files an ingest looked at."""

    candidates: list[Candidate]
    scanned_ns: int  # when, on the stat cache's clock: before any file's stat was taken
    in_scope: Callable[[str], bool]  # a path the ingest's PATHS cover (all, without PATHS)


def scan_workspace(run: Run, scope: Sequence[str], walked: Child[Walk] | None = None) -> Scan:
    """The workspace's files (or those of `scope`): those the walk `walked` (a child's,
    beside the command) found, or a walk's made now. Refusals become findings, and the
    sources in scope that were not found are recorded as removed."""
    candidates: list[Candidate] = []
    files = _walked(walked, scope) or walk(run.ws, scope)
    report, active = run.report, run.active
    for item in files.found:
        if isinstance(item, Skip):
            report.skipped[item.reason] = report.skipped.get(item.reason, 0) + 1
        elif isinstance(item, Refusal):
            if item.code == "path_not_found" and any(map(scope_filter([item.path]), active)):
                continue  # a known source that was deleted: recorded as gone below
            report.findings.append(Finding(item.code, item.path, item.message))
        else:
            candidates.append(item)
    report.scanned = len(candidates)
    seen = {c.path for c in candidates} | {
        f.subject for f in report.findings if f.code != "path_not_found"
    }
    in_scope = scope_filter(scope)
    run.removed_paths = sorted(p for p in active if in_scope(p) and p not in seen)
    return Scan(candidates, files.began_ns, in_scope)


def _walked(walked: Child[Walk] | None, scope: Sequence[str]) -> Walk | None:
    """The walk of `scope` made in a child, or None if there is none (the command walks
    itself)."""
    if walked is None:
        return None
    try:
        found = walked.result()
    except ChildFailed:
        return None
    return found if found.scope == tuple(scope) else None


def tasks_for(run: Run, scan: Scan, cache: StatCache, staging_dir: str) -> list[FileTask]:
    """A task for each file the stat cache cannot vouch for (or whose adapter changed). A
    file the screen refused, unchanged since, is refused again without being read."""
    tasks: list[FileTask] = []
    held: list[FileResult] = []
    ws, ledger = run.ws, run.ledger
    screen = run.screen.fingerprint()
    for c in scan.candidates:
        a = run.active.get(c.path)
        if a and _was_purged(a, run.screen.purged):
            a = None  # read the file as new: the screen refuses the purged bytes again
        if (
            a
            and cache.fresh(c.path, c.key, a.revision_id)
            and a.adapter == _current_adapter(c.path)
        ):
            run.report.unchanged += 1
            continue
        if (findings := cache.held(c.path, c.key, screen)) is not None:
            held.append(FileResult(c.path, "quarantined", findings=findings_from_text(findings)))
            continue
        tasks.append(
            FileTask(
                c.path,
                c.disk,
                staging_dir,
                ws.config.ingest.max_file_bytes,
                ledger.ids.number,
                a.blob if a else None,
                a.adapter if a else None,
                a.text_blob if a else None,
                run.screen,
            )
        )
    run.take(held)
    return tasks


def purged_blobs(ledger: Ledger) -> frozenset[str]:
    with ledger.reading() as conn:
        return frozenset(tombstones.purged_addresses(conn))


def _was_purged(a: state.ActiveSource, purged: frozenset[str]) -> bool:
    return a.blob in purged or (a.text_blob is not None and a.text_blob in purged)


def purged_sources(run: Run, scan: Scan) -> list[str]:
    """Active sources in scope whose revision was purged (ADR 0040): they leave the new
    generation, unless their file now has other, clean content."""
    removed = set(run.removed_paths)
    return sorted(
        p
        for p, a in run.active.items()
        if p not in removed and scan.in_scope(p) and _was_purged(a, run.screen.purged)
    )


def save_stat_cache(
    run: Run, scan: Scan, cache: StatCache, current: generations.GenerationRef | None
) -> None:
    # A file that made no source (binary, too large, undecodable) or was kept at its last good
    # revision is recorded with revision "": no ingest trusts such an entry (it matches no active revision), but the freshness
    # check reads it as "this file is as the generation saw it". A file that could not be
    # read is not recorded: the generation did not see it.
    unread = {f.subject for f in run.report.findings if f.code == "read_error"}
    entries = [
        (c.path, c.key, _stat_cache_revision(run, c.path))
        for c in scan.candidates
        if c.path not in unread
    ]
    stats = {c.path: c.key for c in scan.candidates}
    screen = run.screen.fingerprint()
    cache.save(
        current.hash if current else None,
        entries,
        scan.scanned_ns,
        keep=lambda path: not scan.in_scope(path),  # what an ingest of PATHS did not look at
        held=[
            (path, stats[path], screen, findings_text(findings))
            for path, findings in run.quarantined.items()
            if path in stats
        ],
    )


def scope_filter(scope: Sequence[str]) -> Callable[[str], bool]:
    prefixes = [s.rstrip("/") for s in scope if s]
    if not prefixes:
        return lambda _p: True
    return lambda p: any(p == s or p.startswith(s + "/") for s in prefixes)


def _current_adapter(path: str) -> str:
    return _adapter_key_for(media_type_for(path))


@functools.lru_cache(maxsize=16)
def _adapter_key_for(media_type: str) -> str:
    return adapter_key(adapter_for(media_type))


def _stat_cache_revision(run: Run, path: str) -> str:
    """The revision a stat cache entry vouches for: none ("") for a file kept at its last
    good revision or quarantined, which is read again next time (it may be good again)."""
    if path in run.kept_paths or path in run.quarantined:
        return ""
    return _cached_revision(path, run.active, run.changed)


def _cached_revision(
    path: str, active: dict[str, state.ActiveSource], changed: dict[str, KeptFile]
) -> str:
    if path in changed:
        return changed[path].revision_id
    a = active.get(path)
    return a.revision_id if a else ""
