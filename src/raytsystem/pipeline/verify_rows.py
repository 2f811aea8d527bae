"""VERIFY's check of the ledger's rows: every row re-derives its ID from its content, every
blob a row names exists, every excerpt hashes to its recorded SHA-256, every claim state's hash
is recomputed from its claim, every reference between rows leads to a row.

Memory follows one normalization, not the ledger: rows are streamed, and segments and evidence
are walked side by side in the order of their normalization's ID.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .. import faults
from ..canonical import sha256_hex
from ..errors import BlobMissing
from ..ids import scheme
from ..model.generation import read_state_evidence
from ..model.objects import ChainIds, chain_ids, claim_hash, source_id_for, statement_of
from ..progress import Progress
from ..storage import damage, integrity
from ..storage.blobs import DiskBlobStore
from ..storage.integrity import EvidenceRow, NormalizationRow, SegmentRow
from .ledger_pool import helper_engine, ledger_helpers
from .verify_fields import check_metas, check_normalization_text, check_revision
from .verify_report import VerifyReport

if TYPE_CHECKING:
    from sqlalchemy import Connection

MAX_REFERENCE_FINDINGS = 100  # dangling references reported one by one; the rest are counted


def check_ledger(
    conn: Connection,
    ids: ChainIds,
    store: DiskBlobStore,
    present: Mapping[str, int],
    report: VerifyReport,
    progress: Progress | None,
) -> None:
    """Every row but the claims' (`check_claims`) re-derives its ID, every blob a row names is
    among the `present` ones (address -> size), every excerpt hashes to its recorded SHA-256,
    and the fields no ID covers match what they describe (`verify_fields`)."""
    _check_sources(conn, report)
    _check_revisions(conn, ids, present, report)
    norms = _check_normalizations(conn, ids, present, report)
    _check_texts(conn, ids, store, present, norms, report, progress)
    check_metas(conn, ids, store, present, report)


def _check_sources(conn: Connection, report: VerifyReport) -> None:
    for sid, path in integrity.sources(conn):
        report.counts["sources"] += 1
        if source_id_for(path) != sid:
            report.add(
                "error", "id_mismatch", sid, f"source {sid} does not derive from its path {path!r}"
            )


def _check_revisions(
    conn: Connection, ids: ChainIds, present: Mapping[str, int], report: VerifyReport
) -> None:
    for row in integrity.revisions(conn):
        rid, blob = row.id, row.blob
        report.counts["revisions"] += 1
        if ids.revision_id(row.source_id, blob) != rid:
            report.add("error", "id_mismatch", rid, f"revision {rid} does not derive from its row")
        if blob not in present:
            report.add(
                "error",
                "blob_missing",
                rid,
                f"the raw blob {blob} of revision {rid} is missing or corrupt",
            )
        check_revision(row, present, report)


def _check_normalizations(
    conn: Connection, ids: ChainIds, present: Mapping[str, int], report: VerifyReport
) -> dict[str, NormalizationRow]:
    """Check every normalization; return them all by ID (one small row per source revision)."""
    norms = {r.id: r for r in integrity.normalizations(conn)}
    for nid, rev, adapter, version, config, status, blob, *_ in norms.values():
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
    return norms


def _check_texts(
    conn: Connection,
    ids: ChainIds,
    store: DiskBlobStore,
    present: Mapping[str, int],
    norms: dict[str, NormalizationRow],
    report: VerifyReport,
    progress: Progress | None,
) -> None:
    """Segments and evidence, one normalization's text at a time: two streams in the same
    order of normalization ID, walked side by side (memory: one normalization's rows); then
    each normalization's recorded length and segment count (`check_normalization_text`),
    those without a segment too."""
    segments = integrity.segments_by_normalization(conn)
    evidence = integrity.evidence_by_normalization(conn)
    done = 0
    walked: set[str] = set()
    for done, (nid, segs, evs) in enumerate(_side_by_side(segments, evidence), 1):
        walked.add(nid)
        norm = norms.get(nid)
        text = _text_of(norm, store, present)
        spans = _check_segments(nid, segs, text, ids, report)
        _check_evidence(evs, spans, text, ids, report)
        if norm is not None:
            check_normalization_text(norm, text, len(segs), report)
        if progress and (done % 500 == 0):
            progress("check ledger (normalizations)", done, max(done, len(norms)), 0)
    for nid, norm in norms.items():
        if nid not in walked:
            check_normalization_text(norm, _text_of(norm, store, present), 0, report)
    if progress:
        progress("check ledger (normalizations)", done, done, 0)


def _text_of(
    norm: NormalizationRow | None, store: DiskBlobStore, present: Mapping[str, int]
) -> str | None:
    """A normalization's text, None when it has none or its blob is missing or corrupt."""
    blob = norm.text_blob if norm else None
    if blob is None or blob not in present:
        return None
    try:
        return store.get(blob).decode("utf-8")
    except BlobMissing:  # purged: it has a tombstone (`verify.check_purged`)
        return None


def _check_segments(
    nid: str, segs: list[SegmentRow], text: str | None, ids: ChainIds, report: VerifyReport
) -> dict[str, tuple[int, int]]:
    """Check one normalization's segments; return their spans by segment ID."""
    spans = {}
    for seg in segs:
        _n, seg_id, ordinal, start, end, sha = seg[:6]
        report.counts["segments"] += 1
        spans[seg_id] = (start, end)
        if ids.segment_id(nid, ordinal, start, end, sha, *seg[6:]) != seg_id:
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
    return spans


def _check_evidence(
    evs: list[EvidenceRow],
    spans: dict[str, tuple[int, int]],
    text: str | None,
    ids: ChainIds,
    report: VerifyReport,
) -> None:
    """Check the evidence that points into one normalization's segments (`spans`)."""
    for _n, eid, cid, seg_id, start, end, sha, role, statement in evs:
        report.counts["evidence"] += 1
        if ids.evidence_id(cid, seg_id, start, end, sha, role) != eid:
            report.add("error", "id_mismatch", eid, f"evidence {eid} does not derive from its row")
        elif seg_id in spans and not (spans[seg_id][0] <= start < end <= spans[seg_id][1]):
            report.add("error", "excerpt_mismatch", eid, f"evidence {eid} lies outside its segment")
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


def check_claims(conn: Connection, ids: ChainIds, report: VerifyReport) -> None:
    """Every claim's ID derives from its row, every claim state's hash from its claim, and
    every evidence ID a claim state lists is an evidence row of its claim."""
    for cid, sid, authority, statement, occurrence in integrity.claims(conn):
        report.counts["claims"] += 1
        if ids.claim_id(sid, authority, statement, occurrence) != cid:
            report.add("error", "id_mismatch", cid, f"claim {cid} does not derive from its row")
    for st in integrity.claim_states_with_claims(conn):
        report.counts["claim_states"] += 1
        evidence = read_state_evidence(st.evidence_ids)
        got = None
        if evidence is not None:
            got = claim_hash(
                st.claim_id, st.statement or "", st.authority or "", st.status, evidence
            )
        if got != st.claim_hash:
            report.add(
                "error",
                "claim_hash_mismatch",
                st.claim_id,
                f"a state of claim {st.claim_id} does not match its recorded hash"
                + ("" if evidence is not None else " (its evidence IDs are not a JSON array)"),
            )
    check_state_evidence(conn, report)


def check_state_evidence(conn: Connection, report: VerifyReport) -> None:
    """The evidence IDs claim states list (a JSON array: no foreign key checks them) lead to
    evidence rows of the same claim (`damage.state_evidence_problems`)."""
    found = damage.state_evidence_problems(conn, MAX_REFERENCE_FINDINGS + 1)
    for rowid, claim_id, evidence_id, owner in found[:MAX_REFERENCE_FINDINGS]:
        report.add(
            "error",
            "dangling_reference",
            f"claim_states:{rowid}",
            f"row {rowid} of claim_states (claim {claim_id}) lists evidence {evidence_id}, "
            + ("which does not exist" if owner is None else f"which is claim {owner}'s"),
        )
    if len(found) > MAX_REFERENCE_FINDINGS:
        report.add(
            "error",
            "dangling_reference",
            "claim_states",
            "more claim states list evidence that does not exist or is another claim's",
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
    if cores < 2 or integrity.claim_count(conn) < helper_from:
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


def _side_by_side(
    segments: Iterator[SegmentRow], evidence: Iterator[EvidenceRow]
) -> Iterator[tuple[str, list[SegmentRow], list[EvidenceRow]]]:
    """(normalization ID, its segment rows, its evidence rows) from two streams of rows, both
    in the byte order of that ID."""
    seg, ev = next(segments, None), next(evidence, None)
    while seg is not None or ev is not None:
        nid = min(r.normalization_id for r in (seg, ev) if r is not None)
        segs, evs = [], []
        while seg is not None and seg.normalization_id == nid:
            segs.append(seg)
            seg = next(segments, None)
        while ev is not None and ev.normalization_id == nid:
            evs.append(ev)
            ev = next(evidence, None)
        yield nid, segs, evs


def check_references(conn: Connection, report: VerifyReport) -> None:
    """Every reference between ledger rows leads to a row (`damage.dangling_references`)."""
    faults.point("verify.references")
    dangling = damage.dangling_references(conn)
    for table, rowid, parent in dangling[:MAX_REFERENCE_FINDINGS]:
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
