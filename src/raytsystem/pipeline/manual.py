"""Manual notes (`knowledge/manual/`): the claims people write by hand.

First layer: every sentence of a note's prose is a claim with authority `manual`, whose evidence
is its own span in the note. Citations, statuses and directives are resolved in later layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection

from ..canonical import sha256_hex
from ..model.adapters import PROSE_KINDS
from ..model.claims import sentences
from ..model.objects import ClaimRow, EvidenceRow, claim_hash, claim_id, evidence_id
from ..model.generation import ClaimState, SourceState, source_digest
from ..model.text import Finding
from ..storage.blobs import BlobStore
from .files import FileResult, source_id_for
from .state import ActiveSource


@dataclass
class ManualResult:
    states: dict[str, SourceState] = field(default_factory=dict)
    claims: list[ClaimRow] = field(default_factory=list)
    evidence: list[EvidenceRow] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def resolve_manual(
    conn: Connection,
    blobs: BlobStore,
    parent_number: int | None,
    active: dict[str, ActiveSource],
    changed: dict[str, FileResult],
    states: dict[str, SourceState],
    removed: set[str],
) -> ManualResult:
    result = ManualResult()
    out = result.states
    for r in changed.values():
        if r.normalized is None:
            continue
        sid = source_id_for(r.path)
        normalized = r.normalized
        claims: list[tuple[ClaimRow, EvidenceRow]] = []
        occurrences: dict[str, int] = {}
        for ordinal, seg in enumerate(normalized.segments):
            if seg.kind not in PROSE_KINDS or seg.kind == "footnote":
                continue
            seg_row = r.segments[ordinal]
            for sentence in sentences(normalized.text, seg, ordinal):
                occurrence = occurrences.get(sentence.statement, 0)
                occurrences[sentence.statement] = occurrence + 1
                cid = claim_id(sid, "manual", sentence.statement, occurrence)
                sha = sha256_hex(normalized.text[sentence.start : sentence.end])
                eid = evidence_id(cid, seg_row.id, sentence.start, sentence.end, sha, "statement")
                claims.append(
                    (
                        ClaimRow(cid, sid, "manual", sentence.statement, occurrence),
                        EvidenceRow(
                            eid, cid, seg_row.id, sentence.start, sentence.end, sha, "statement"
                        ),
                    )
                )
        result.claims.extend(c for c, _ in claims)
        result.evidence.extend(e for _, e in claims)
        states_ = tuple(
            ClaimState(
                c.id,
                sid,
                "confirmed",
                claim_hash(c.id, c.statement, "manual", "confirmed", [e.id]),
                (e.id,),
            )
            for c, e in claims
        )
        nid = str(r.normalization["id"])
        out[sid] = SourceState(
            sid,
            r.path,
            r.revision_id,
            nid,
            source_digest(sid, r.revision_id, nid, states_),
            states_,
        )
    return result
