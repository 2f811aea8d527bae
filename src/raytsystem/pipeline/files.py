"""The per-file half of ingest: bytes -> raw blob -> normalization -> segments -> claims.

`process_file` is a pure function of the file's bytes (plus the blob writes, which are
idempotent), so it runs in worker processes and its results are identical in any order; the
parent sorts them by path before anything depends on order. `process_chunk` runs it on a few
files and stages their new blobs as one pack (ADR 0025), before the parent writes the ledger
rows that point to them.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..canonical import canonical_json, json_text
from ..ids import scheme
from ..model.adapters import Adapter, AdapterRefused, Normalized, adapter_for, media_type_for
from ..model.claims import extract_claim_rows, segment_rows
from ..model.generation import source_digest
from ..model.objects import (
    ChainIds,
    ClaimRow,
    EvidenceRow,
    SegmentRow,
    chain_ids,
    confirmed_claim_hash,
    source_id_for,
)
from ..model.text import Finding, NotText, decode
from ..storage.blobs import DiskBlobStore, address_of
from ..storage.index_file import source_rows_digest
from ..storage.pack_writer import PackWriter
from ..storage.staging import state_evidence
from ..workspace import is_note
from .indexing import Analyzer, ClaimFact, SegmentFact, source_rows
from .screen import Screen


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def adapter_key(adapter: Adapter) -> str:
    return f"{adapter.label}/{adapter.config_hash}"


@dataclass(frozen=True)
class FileTask:
    path: str
    disk: str
    staging_dir: str  # where new blobs are staged (in packs) until the parent publishes them
    max_bytes: int
    id_scheme: int  # the ledger's (`IdScheme.number`): what the worker derives IDs by
    active_blob: str | None
    active_adapter: str | None
    active_text: str | None = None  # the active normalization's text blob
    # What keeps secrets (and purged bytes) out of the store: pipeline/screen.py.
    screen: Screen = field(default_factory=Screen)


Row = tuple[Any, ...]  # a row in its table's column order, as a plain tuple


@dataclass
class FileResult:
    """What a worker found in one file.

    Rows are plain tuples in their tables' column order (the fields of `SegmentRow`,
    `ClaimRow`, `EvidenceRow`, `ClaimState`, `IndexRow`): the parent inserts them as they are,
    and a plain tuple crosses the process boundary in C, where a NamedTuple costs a Python
    call to pickle and another to unpickle (ten times the cost, for hundreds of rows a file).
    """

    path: str
    outcome: str  # "unchanged" | "new" | "skipped" | "unreadable" | "quarantined"
    finding: Finding | None = None
    blob: str = ""
    size: int = 0
    media_type: str = ""
    revision_id: str = ""
    # (pack name, temp file) of the staged pack holding the new blobs of this file (and of the
    # others of its chunk), published by the parent before any row points to them
    staged: list[tuple[str, str]] = field(default_factory=list)
    normalization: dict[str, object] = field(default_factory=dict)
    segments: list[Row] = field(default_factory=list)
    claims: list[Row] = field(default_factory=list)
    evidence: list[Row] = field(default_factory=list)  # claims[i]'s statement is evidence[i]
    # What the parent would otherwise compute, made here in the worker: each claim's state
    # as `confirmed` with its one evidence (its state unless a directive changes it), as
    # `Staging.put_rows` takes it; the source's digest with those states, its index rows and
    # their digest.
    claim_states: list[Row] = field(default_factory=list)
    source_digest: str = ""
    index_rows: list[Row] = field(default_factory=list)
    index_digest: str = ""
    note_meta: dict[str, Any] | None = None  # a manual note's parsed meta (model/notes.py)
    findings: list[Finding] = field(default_factory=list)

    def segment_rows(self) -> list[SegmentRow]:
        """The segments with their fields named (for readers; the writer takes the tuples)."""
        return [SegmentRow._make(r) for r in self.segments]

    def claim_pairs(self) -> list[tuple[ClaimRow, EvidenceRow]]:
        """Each claim with its statement's evidence, fields named."""
        return [
            (ClaimRow._make(c), EvidenceRow._make(e))
            for c, e in zip(self.claims, self.evidence, strict=True)
        ]


class KeptFile(NamedTuple):
    """A new file's result once the writer has taken it: all the end of an ingest reads (the
    manual layer, the report's counts, the stat cache). The writer holds one per new file
    until the end: with its `SourceState`, 1.0 KB a file, where the slimmed `FileResult` it
    replaces took 4.5 KB (tracemalloc; 175 MB at 50,000 files)."""

    path: str
    revision_id: str
    normalization_id: str
    note_meta: dict[str, Any] | None


def process_chunk(tasks: list[FileTask], store: DiskBlobStore) -> list[FileResult]:
    """`process_file` on each task, their new blobs staged as one pack (more when they pass
    PACK_BYTES)."""
    if not tasks:
        return []
    pack = PackWriter(store, tasks[0].staging_dir)
    results = [process_file(task, pack) for task in tasks]
    sealed = pack.seal()
    for result in results:
        if result.outcome == "new":
            result.staged.extend(sealed)
    return results


def _restore_text(data: bytes, adapter: Adapter, address: str, store: DiskBlobStore) -> None:
    """Store the normalized text at `address` again if the adapter makes it from `data`
    (it does, being deterministic; anything else is left for `verify` to report)."""
    try:
        text = adapter.normalize(data).text.encode("utf-8")
    except Exception:  # it made this text once; if it cannot now, verify reports it missing
        return
    if address_of(text) == address:
        store.put(text)


def _read(task: FileTask) -> bytes | FileResult:
    """The file's bytes, or the result of a file that cannot be taken (too large, unreadable)."""
    path = task.path
    try:
        size = os.stat(task.disk).st_size
        if size > task.max_bytes:
            return _skip(
                path, "file_too_large", f"{size} bytes is over the limit of {task.max_bytes}"
            )
        with open(task.disk, "rb") as handle:
            data = handle.read(task.max_bytes + 1)
    except OSError as exc:
        return FileResult(
            path, "unreadable", Finding("read_error", path, f"cannot read: {exc.strerror}")
        )
    if len(data) > task.max_bytes:
        return _skip(path, "file_too_large", f"over the limit of {task.max_bytes} bytes")
    return data


def process_file(task: FileTask, pack: PackWriter) -> FileResult:
    """What one file holds; its new blobs are added to `pack`."""
    path = task.path
    data = _read(task)
    if isinstance(data, FileResult):
        return data
    blob = address_of(data)
    media_type = media_type_for(path)
    adapter = adapter_for(media_type)
    if blob == task.active_blob and adapter_key(adapter) == task.active_adapter:
        # A lost blob is stored again from the file, which still has the bytes (the repair
        # the README describes); a lost normalized text is made again by the same adapter.
        if not pack.store.has(blob):
            pack.store.put(data)
        if task.active_text and not pack.store.has(task.active_text):
            _restore_text(data, adapter, task.active_text, pack.store)
        return FileResult(path, "unchanged", blob=blob, size=len(data))
    try:  # a text adapter's input is the decoded text: bytes that are not text are refused
        content: str | bytes = data if adapter.reads == "bytes" else decode(data)
    except NotText as exc:
        return _skip(path, exc.code, exc.message)
    # What the screen reads is what could become knowledge: a text file's text, or the text a
    # bytes adapter (PDF) extracts, so that adapter runs first; binary it cannot read is not
    # scanned.
    ran = run_adapter(adapter, content) if isinstance(content, bytes) else None
    text = content if isinstance(content, str) else ran.text if isinstance(ran, Normalized) else ""
    if refused := task.screen.refuse(path, blob, text):
        return FileResult(path, "quarantined", size=len(data), findings=refused)  # not stored
    pack.add(data, blob)
    ids = chain_ids(scheme(task.id_scheme))
    source_id = source_id_for(path)
    revision_id = ids.revision_id(source_id, blob)
    nid = ids.normalization_id(revision_id, adapter.name, adapter.version, adapter.config_hash)
    result = FileResult(
        path, "new", blob=blob, size=len(data), media_type=media_type, revision_id=revision_id
    )
    row: dict[str, object] = {
        "id": nid,
        "revision_id": revision_id,
        "adapter": adapter.name,
        "adapter_version": adapter.version,
        "config_hash": adapter.config_hash,
        "created_at": now_iso(),
        "meta": None,
    }
    result.normalization = row
    if ran is None:
        ran = run_adapter(adapter, content)
    if not isinstance(ran, Normalized):
        return _failed(result, *ran)
    _normalized(result, ids, source_id, ran, pack)
    return result


def run_adapter(adapter: Adapter, content: str | bytes) -> Normalized | tuple[str, str, str]:
    """The adapter's normalization of `content`, or why there is none: (code, message,
    severity)."""
    try:
        return adapter.run(content)
    except AdapterRefused as exc:  # the adapter can make nothing of it (a scanned PDF...)
        return exc.code, exc.message, "warning"
    except Exception as exc:
        # A pathological input must not stop the ingest: the revision is kept, unnormalized.
        return (
            "normalize_failed",
            f"{adapter.label} failed: {type(exc).__name__}: {exc}"[:500],
            "error",
        )


def _failed(result: FileResult, code: str, message: str, severity: str) -> FileResult:
    """A revision kept without a normalization: the adapter refused or failed."""
    result.normalization.update(
        status="failed",
        text_blob=None,
        text_length=None,
        segment_count=0,
        finding_code=code,
        finding_message=message,
    )
    result.findings.append(Finding(code, result.path, message, severity))
    return result


def _normalized(
    result: FileResult, ids: ChainIds, source_id: str, normalized: Normalized, pack: PackWriter
) -> None:
    """Fill `result` from a normalization: its text blob, segments, then its claims (a note's,
    or a file's extracted sentences with their states and index rows)."""
    path, row = result.path, result.normalization
    nid = str(row["id"])
    text_blob = pack.add(normalized.text.encode("utf-8"))
    segments = segment_rows(ids, nid, normalized)
    row.update(
        status="ok",
        text_blob=text_blob,
        text_length=len(normalized.text),
        segment_count=len(segments),
        finding_code=None,
        finding_message=None,
    )
    meta = adapter_meta(normalized)
    if meta:
        row["meta"] = canonical_json(meta).decode("utf-8")
    result.segments = list(map(tuple, segments))
    result.findings.extend(
        Finding(f.code, f"{path}:{f.subject}", f.message, f.severity) for f in normalized.findings
    )
    if is_note(path):
        from ..model.notes import parse_note  # pydantic, imported only when a note changed

        # A note is parsed here (a pure function of its bytes); its citations and statuses are
        # resolved by the parent, which sees the whole generation (pipeline/manual.py).
        claims, evidence, note = parse_note(ids, path, source_id, normalized, segments)
        result.claims = list(map(tuple, claims))
        result.evidence = list(map(tuple, evidence))
        note.update(meta)
        row["meta"] = canonical_json(note).decode("utf-8")
        result.note_meta = note
    else:
        _extracted(result, ids, source_id, normalized, segments)


def adapter_meta(normalized: Normalized) -> dict[str, Any]:
    """What a normalization's `meta` records of the adapter's output: its findings, and the
    symbols a source file defines (each with its span in the normalized text and its lines)."""
    meta: dict[str, Any] = {}
    if normalized.findings:
        meta["findings"] = [f.to_json() for f in normalized.findings]
    if normalized.symbols:
        meta["symbols"] = [
            {
                "name": s.name,
                "kind": s.kind,
                "span": [s.start, s.end],
                "lines": [s.line_start, s.line_end],
            }
            for s in normalized.symbols
        ]
    return meta


def _extracted(
    result: FileResult,
    ids: ChainIds,
    source_id: str,
    normalized: Normalized,
    segments: list[SegmentRow],
) -> None:
    """A file's sentences as claims, each confirmed with its one evidence (its state unless a
    note's directive changes it), the source's digest, and what the index holds of it; the
    parent replaces the states if a directive changes a claim's status."""
    claim_rows, evidence_rows = extract_claim_rows(ids, source_id, normalized, segments)
    result.claims, result.evidence = claim_rows, evidence_rows
    headings = {seg.id: seg.heading_path for seg in segments}
    states: list[tuple[Any, ...]] = []
    facts: list[ClaimFact] = []
    for (cid, _, authority, statement, _), (eid, _, seg_id, start, end, _, _) in zip(
        claim_rows, evidence_rows, strict=True
    ):
        ev_json = state_evidence((eid,))  # also the evidence list the claim hash holds
        digest = confirmed_claim_hash(ev_json, json_text(cid), json_text(statement))
        states.append((cid, source_id, "confirmed", digest, ev_json))
        facts.append(
            ClaimFact(
                cid, digest, "confirmed", authority, statement, headings[seg_id], seg_id, start, end
            )
        )
    result.claim_states = states
    nid = str(result.normalization["id"])
    result.source_digest = source_digest(source_id, result.revision_id, nid, states)
    text = normalized.text
    index_rows = source_rows(
        source_id,
        result.path,
        nid,
        [
            SegmentFact(x.id, x.sha256, x.kind, x.heading_path, text[x.start : x.end], x.start)
            for x in segments
        ],
        facts,
        Analyzer(),
    )
    result.index_digest = source_rows_digest(index_rows)
    result.index_rows = index_rows


def _skip(path: str, code: str, message: str) -> FileResult:
    return FileResult(path, "skipped", Finding(code, path, message))
