"""VERIFY's check of the fields of revisions and normalizations that no ID covers, each against
what it says it describes:

- a revision's `size` against its raw blob's (`check_blobs` reads every blob's size), its
  `media_type` against the types its path can give;
- a normalization's `text_length` against its normalized text, its `segment_count` against its
  segments (both read by the segments' check), and its `meta`: a manual note's is made again
  from the note's raw blob (the adapter that made it, then `model.notes.parse_note`), any
  other's holds only its adapter's findings and is checked for that shape.

A mismatch is `revision_mismatch` or `normalization_mismatch`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..canonical import canonical_json
from ..model.adapters import ADAPTERS, Adapter, media_type_for
from ..model.objects import ChainIds
from ..model.text import decode
from ..storage import integrity
from ..storage.blobs import DiskBlobStore
from ..storage.integrity import NormalizationMeta, NormalizationRow, RevisionRow
from ..workspace import is_note
from .verify_report import VerifyReport

if TYPE_CHECKING:
    from sqlalchemy import Connection

PLAIN = "text/plain"
# The size `verify` gives a blob that was purged (it has a tombstone, ADR 0040): present for
# the rows that name it, with no bytes to read or measure.
PURGED = -1


def media_types_of(path: str) -> set[str]:
    """The media types a revision of `path` may record: the one its name gives now, and plain
    text (what a format not read yet was stored as by an older raytsystem)."""
    return {media_type_for(path), PLAIN}


def check_revision(row: RevisionRow, sizes: Mapping[str, int], report: VerifyReport) -> None:
    """`row`'s size against its blob's (`sizes`: the blobs that hash to their address), its
    media type against its path."""
    size = sizes.get(row.blob)
    if size is not None and size != PURGED and size != row.size:
        report.add(
            "error",
            "revision_mismatch",
            row.id,
            f"revision {row.id} records {row.size} bytes, its raw blob has {size}",
        )
    if row.path is not None and row.media_type not in media_types_of(row.path):
        report.add(
            "error",
            "revision_mismatch",
            row.id,
            f"revision {row.id} records media type {row.media_type!r}, which its path "
            f"{row.path!r} cannot give",
        )


def check_normalization_text(
    norm: NormalizationRow, text: str | None, segments: int, report: VerifyReport
) -> None:
    """`norm`'s recorded length and segment count against its text (None: not readable,
    reported elsewhere) and the number of its segment rows."""
    if norm.status != "ok":
        if norm.text_blob is not None or norm.text_length is not None or norm.segment_count:
            report.add(
                "error",
                "normalization_mismatch",
                norm.id,
                f"normalization {norm.id} failed, but records a text or segments",
            )
        return
    if text is not None and norm.text_length != len(text):
        report.add(
            "error",
            "normalization_mismatch",
            norm.id,
            f"normalization {norm.id} records a text of {norm.text_length} characters, "
            f"its text has {len(text)}",
        )
    if norm.segment_count != segments:
        report.add(
            "error",
            "normalization_mismatch",
            norm.id,
            f"normalization {norm.id} records {norm.segment_count} segments, the ledger has "
            f"{segments}",
        )


def _adapter(row: NormalizationMeta) -> Adapter | None:
    """The adapter that made `row`, if this raytsystem has it (same name, version, config)."""
    for adapter in ADAPTERS.values():
        if (adapter.name, adapter.version, adapter.config_hash) == (
            row.adapter,
            row.adapter_version,
            row.config_hash,
        ):
            return adapter
    return None


def check_metas(
    conn: Connection,
    ids: ChainIds,
    store: DiskBlobStore,
    present: Mapping[str, int],
    report: VerifyReport,
) -> None:
    """Every normalization's `meta` (see the module docstring)."""
    for row in integrity.normalization_metas(conn):
        if row.path is None or row.source_id is None:
            continue  # its revision or source is missing: a dangling reference
        if row.status == "ok" and is_note(row.path):
            _check_note_meta(row, ids, store, present, report)
        elif row.meta is not None and not _findings_only(row.meta):
            report.add(
                "error",
                "normalization_mismatch",
                row.id,
                f"normalization {row.id}: its meta is not its adapter's findings",
            )


def _findings_only(meta: str) -> bool:
    """Whether `meta` is what an adapter's findings make: `{"findings": [finding, ...]}`,
    each finding four strings, in canonical JSON."""
    try:
        data = json.loads(meta)
    except ValueError:
        return False
    if not isinstance(data, dict) or set(data) != {"findings"}:
        return False
    findings = data["findings"]
    fields = {"code", "severity", "subject", "message"}
    return (
        isinstance(findings, list)
        and bool(findings)
        and all(
            isinstance(f, dict) and set(f) == fields and all(isinstance(v, str) for v in f.values())
            for f in findings
        )
        and canonical_json(data).decode("utf-8") == meta
    )


def _check_note_meta(
    row: NormalizationMeta,
    ids: ChainIds,
    store: DiskBlobStore,
    present: Mapping[str, int],
    report: VerifyReport,
) -> None:
    """A note's meta, parsed again from its raw blob; not checked when the blob is missing
    (reported as such) or this raytsystem no longer has the adapter that made it."""
    assert row.path is not None and row.source_id is not None
    adapter = _adapter(row)
    if adapter is None or row.raw_blob is None or present.get(row.raw_blob, PURGED) == PURGED:
        return
    derived = note_meta(ids, adapter, row, store.get(row.raw_blob))
    if derived != row.meta:
        report.add(
            "error",
            "normalization_mismatch",
            row.id,
            f"normalization {row.id}: its meta is not what its note {row.path!r} says",
        )


def note_meta(ids: ChainIds, adapter: Adapter, row: NormalizationMeta, data: bytes) -> str | None:
    """The meta an ingest stores for a note of these bytes (`pipeline/files.py`), as canonical
    JSON; None if they cannot be normalized (they could when the note was ingested)."""
    from ..model.claims import segment_rows
    from ..model.notes import parse_note  # pydantic: imported only when there is a note

    assert row.path is not None and row.source_id is not None
    try:
        normalized = adapter.run(data if adapter.reads == "bytes" else decode(data))
    except Exception:  # NotText, or what an adapter raises on a pathological input
        return None
    segments = segment_rows(ids, row.id, normalized)
    _, _, meta = parse_note(ids, row.path, row.source_id, normalized, segments)
    if normalized.findings:
        meta["findings"] = [f.to_json() for f in normalized.findings]
    return canonical_json(meta).decode("utf-8")
