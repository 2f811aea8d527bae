"""PURGE: remove a raw blob's bytes, and its normalized texts', from the store, and record
a tombstone for each (ADR 0040).

The store is immutable by design; a purge is the one deliberate exception, for what must
not be kept (a leaked key, data a person asked to have removed). The chain stays
verifiable because the removal is recorded, not hidden:

1. under the writer lock, one transaction records a tombstone per address (address, kind,
   reason, time, the current generation): from its commit on, verify reports the blob as
   `blob_purged` (info) instead of missing, a query that would cite it fails closed with
   `blob_purged`, and ingest never stores those bytes again;
2. then the bytes go: loose files zeroed and unlinked, packs rewritten without them
   (`DiskBlobStore.purge`). A crash between 1 and 2 leaves bytes with a tombstone (verify:
   `purge_incomplete`); purging again finishes.

The next ingest makes a generation in which the purged revisions' sources are no longer
active (or active at a new, clean revision). The ledger's rows about the purged content
(revision, normalization, segment and claim rows, with their statements) and the index files
of generations that held it are not rewritten: see the README's "Purge" section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import NotFound, UsageError
from ..storage import generations, tombstones, views
from ..storage.addresses import ADDRESS_RE
from ..storage.blobs import DiskBlobStore
from ..storage.db import Ledger
from ..storage.tombstones import TombstoneRecord
from .files import now_iso

MAX_REASON = 2000


@dataclass
class PurgeReport:
    target: str
    reason: str
    raw: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    recorded: list[str] = field(default_factory=list)  # tombstones new with this purge
    files: list[str] = field(default_factory=list)  # store files removed or rewritten
    generation: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "reason": self.reason,
            "raw_blobs": self.raw,
            "text_blobs": self.texts,
            "tombstones_recorded": self.recorded,
            "store_files_changed": len(self.files),
            "generation": self.generation,
        }


def purge(ledger: Ledger, blobs: DiskBlobStore, target: str, reason: str) -> PurgeReport:
    """Purge `target`: a raw blob address, or a source's workspace path (every revision of
    it). The caller holds the writer lock."""
    reason = " ".join(reason.split())
    if not reason:
        raise UsageError("purge needs --reason: why these bytes must go", code="purge_reason")
    if len(reason) > MAX_REASON:
        raise UsageError(f"--reason is over {MAX_REASON} characters", code="purge_reason")
    report = PurgeReport(target, reason)
    with ledger.transaction() as conn:
        report.raw = _raw_blobs(conn, target)
        report.texts = sorted({t for r in report.raw for t in tombstones.texts_of_raw(conn, r)})
        head = generations.head(conn)
        report.generation = head.to_json() if head else None
        existing = tombstones.tombstones(conn, report.raw + report.texts)
        when = now_iso()
        new = [
            TombstoneRecord(
                address,
                kind,
                raw,
                reason,
                when,
                head.number if head else None,
                head.hash if head else None,
            )
            for raw in report.raw
            for address, kind in [(raw, "raw")]
            + [(t, "text") for t in tombstones.texts_of_raw(conn, raw)]
            if address not in existing
        ]
        unique = {r.address: r for r in new}  # a text made from two purged raw blobs: once
        tombstones.record(conn, unique.values())
        report.recorded = sorted(unique)
    report.files = blobs.purge(report.raw + report.texts)
    return report


def _raw_blobs(conn: Any, target: str) -> list[str]:
    if ADDRESS_RE.fullmatch(target):
        if tombstones.is_raw_blob(conn, target):
            return [target]
        if raws := tombstones.raws_of_text(conn, target):
            raise UsageError(
                f"{target} is a normalized text; purge the raw blob it was made from "
                f"({', '.join(raws)}), which purges its texts too",
                code="purge_not_raw",
            )
        raise NotFound(f"no revision has the raw blob {target}", code="blob_not_found")
    source = views.source_at(conn, target)
    if source is None:
        raise NotFound(f"no source has the path {target}", code="source_not_found")
    return tombstones.raw_blobs_of_source(conn, source.id)
