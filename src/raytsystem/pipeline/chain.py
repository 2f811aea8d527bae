"""Re-deriving and checking the evidence chain of claims, down to the raw bytes.

For each claim: its state in the generation, its row, every evidence row, segment,
normalization, revision and source are loaded, every ID is re-derived from the row's content,
the claim hash is recomputed, each cited excerpt is cut from the normalized text (whose blob is
re-hashed) and re-hashed with SHA-256, and the raw blob is re-hashed with BLAKE3. The cost is
proportional to the claims checked, never to the corpus.

Problems are returned as `Problem(code, message)` so QUERY can fail closed on the first one and
VERIFY can report them all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..canonical import sha256_hex
from ..errors import BlobMissing, ChecksumMismatch
from ..model.generation import read_state_evidence
from ..model.note_support import supporting_entry
from ..model.objects import chain_ids, claim_hash, source_id_for, statement_of
from ..storage import chains, tombstones
from ..storage.blobs import BlobStore
from ..storage.reader import Reader


@dataclass(frozen=True)
class Problem:
    code: str
    subject: str
    message: str


@dataclass
class EvidenceView:
    id: str
    role: str
    source_path: str
    source_id: str
    revision_id: str
    raw_blake3: str
    normalization_id: str
    adapter: str
    segment_id: str
    start: int
    end: int
    line_start: int
    line_end: int
    excerpt: str
    sha256: str
    heading_path: list[str]
    page: int | None = None  # a PDF's page
    cell: int | None = None  # a notebook's cell

    def to_json(self) -> dict[str, Any]:
        """A piece of evidence as the query's JSON cites it."""
        return {
            "role": self.role,
            "source_path": self.source_path,
            "source_id": self.source_id,
            "revision_id": self.revision_id,
            "raw_blake3": self.raw_blake3,
            "normalization_id": self.normalization_id,
            "adapter": self.adapter,
            "segment_id": self.segment_id,
            "heading_path": self.heading_path,
            "span": {"start": self.start, "end": self.end},
            "lines": {"start": self.line_start, "end": self.line_end},
            **({"page": self.page} if self.page is not None else {}),
            **({"cell": self.cell} if self.cell is not None else {}),
            "cited_excerpt": self.excerpt,
            "cited_excerpt_sha256": self.sha256,
        }


@dataclass
class ClaimView:
    id: str
    hash: str
    status: str
    authority: str
    statement: str
    source_id: str
    evidence: list[EvidenceView] = field(default_factory=list)


def _unsupported(view: ClaimView, rows: _Rows) -> str | None:
    """Why a confirmed manual claim is not confirmed by its note, or None: the note (its
    normalization's meta) must be current and valid, list the claim without problems, and
    every citation it gives the claim must be one of the claim's verified citation evidence
    (same source, the quote's words)."""
    statement = next(e for e in view.evidence if e.role == "statement")
    norm = rows.norms.get(statement.normalization_id)
    entry = supporting_entry(norm.meta if norm is not None else None, view.id)
    if isinstance(entry, str):
        return entry
    wanted = sorted((c["path"], " ".join(c["quote"].split())) for c in entry["citations"])
    cited = sorted(
        (e.source_path, " ".join(e.excerpt.split())) for e in view.evidence if e.role == "citation"
    )
    if wanted != cited:
        return "its evidence is not the citations its note gives it"
    return None


@dataclass(frozen=True)
class _Rows:
    """The ledger rows of some claims' chains, by ID (`storage.chains`)."""

    states: dict[str, chains.ClaimStateRow]
    claims: dict[str, chains.ClaimRow]
    evidence: dict[str, chains.EvidenceRow]
    segments: dict[str, chains.SegmentRow]
    norms: dict[str, chains.NormalizationRow]
    revisions: dict[str, chains.RevisionRow]
    sources: dict[str, chains.SourceRow]

    @classmethod
    def load(cls, reader: Reader, claim_ids: Sequence[str], number: int) -> _Rows:
        states = chains.claim_states(reader, claim_ids, number)
        claims = chains.claims(reader, claim_ids)
        evidence = chains.evidence(
            reader, [e for s in states.values() for e in read_state_evidence(s.evidence_ids) or ()]
        )
        segments = chains.segments(reader, [e.segment_id for e in evidence.values()])
        norms = chains.normalizations(reader, [s.normalization_id for s in segments.values()])
        revisions = chains.revisions(reader, [n.revision_id for n in norms.values()])
        sources = chains.sources(
            reader,
            [r.source_id for r in revisions.values()] + [c.source_id for c in claims.values()],
        )
        return cls(states, claims, evidence, segments, norms, revisions, sources)


class Checker:
    """Loads and checks chains; caches verified blobs so each is hashed once per run."""

    def __init__(self, reader: Reader, blobs: BlobStore) -> None:
        self.reader = reader
        self.blobs = blobs
        self.ids = chain_ids(reader.ids)
        self._texts: dict[str, str | Problem] = {}
        self._raw: dict[str, Problem | None] = {}

    def normalized_text(self, address: str) -> str | Problem:
        if address not in self._texts:
            try:
                self._texts[address] = self.blobs.get(address).decode("utf-8")
            except ChecksumMismatch as exc:
                self._texts[address] = Problem(
                    "normalized_text_corrupt",
                    address,
                    f"normalized text blob {address} hashes to {exc.got}",
                )
            except BlobMissing:
                self._texts[address] = self._purged(address) or Problem(
                    "blob_missing", address, f"normalized text blob {address} is missing"
                )
        return self._texts[address]

    def raw(self, address: str) -> Problem | None:
        if address not in self._raw:
            try:
                got = self.blobs.rehash(address)
                self._raw[address] = (
                    None
                    if got == address
                    else Problem("raw_blob_corrupt", address, f"raw blob {address} hashes to {got}")
                )
            except BlobMissing:
                self._raw[address] = self._purged(address) or Problem(
                    "blob_missing", address, f"raw blob {address} is missing"
                )
        return self._raw[address]

    def _purged(self, address: str) -> Problem | None:
        """A missing blob that was purged on purpose: its own code (ADR 0040)."""
        found = tombstones.tombstones(self.reader, [address]).get(address)
        if found is None:
            return None
        return Problem(
            "blob_purged",
            address,
            f"the answer would cite {found.kind} blob {address}, purged on {found.purged_at}; "
            "the next ingest makes a generation without it",
        )

    def claims(
        self, claim_ids: Sequence[str], number: int
    ) -> tuple[dict[str, ClaimView], list[Problem]]:
        """Load and check the chains of `claim_ids` as members of generation `number`."""
        rows = _Rows.load(self.reader, claim_ids, number)
        problems: list[Problem] = []
        views: dict[str, ClaimView] = {}
        for cid in claim_ids:
            checked = self._claim(cid, rows, number)
            if isinstance(checked, Problem):
                problems.append(checked)
            else:
                views[cid] = checked
        return views, problems

    def _claim(self, cid: str, rows: _Rows, number: int) -> ClaimView | Problem:
        state, row = rows.states.get(cid), rows.claims.get(cid)
        if state is None or row is None:
            return Problem("not_a_member", cid, f"claim {cid} is not active in generation {number}")
        ev_ids = read_state_evidence(state.evidence_ids)
        if ev_ids is None:
            return Problem(
                "ledger_mismatch", cid, f"claim {cid}: its evidence IDs are not a JSON array"
            )
        if self.ids.claim_id(row.source_id, row.authority, row.statement, row.occurrence) != cid:
            return Problem("ledger_mismatch", cid, f"claim {cid}: its row no longer derives its ID")
        recorded = state.claim_hash
        if claim_hash(cid, row.statement, row.authority, state.status, ev_ids) != recorded:
            return Problem(
                "ledger_mismatch", cid, f"claim {cid}: its hash does not match the generation"
            )
        view = ClaimView(cid, recorded, state.status, row.authority, row.statement, row.source_id)
        for eid in ev_ids:
            checked = self._evidence(cid, eid, rows)
            if isinstance(checked, Problem):
                return checked
            view.evidence.append(checked)
        # The ID and hash prove the statement was not changed since it was written, not that
        # its evidence says it: a claim says what its statement evidence's excerpt says
        # (whitespace collapsed, NFC), as `verify` also checks.
        said = [e for e in view.evidence if e.role == "statement"]
        if not said or any(statement_of(e.excerpt) != row.statement for e in said):
            return Problem(
                "excerpt_mismatch",
                cid,
                f"claim {cid}: its statement is not what its statement evidence says",
            )
        view.evidence.sort(key=lambda e: (e.role != "statement", e.id))
        if row.authority == "manual" and state.status == "confirmed":
            unsupported = _unsupported(view, rows)
            if unsupported:
                return Problem("ledger_mismatch", cid, f"claim {cid}: {unsupported}")
        return view

    def _evidence(self, cid: str, eid: str, rows: _Rows) -> EvidenceView | Problem:
        ev = rows.evidence.get(eid)
        if ev is None:
            return Problem("ledger_mismatch", eid, f"evidence {eid} of claim {cid} is missing")
        if ev.claim_id != cid or self.ids.evidence_id(*ev[1:]) != eid:
            return Problem(
                "ledger_mismatch", eid, f"evidence {eid}: its row no longer derives its ID"
            )
        seg = rows.segments.get(ev.segment_id)
        if seg is None:
            return Problem("ledger_mismatch", ev.segment_id, f"segment {ev.segment_id} is missing")
        if (
            self.ids.segment_id(
                seg.normalization_id,
                seg.ordinal,
                seg.start,
                seg.end,
                seg.sha256,
                seg.kind,
                seg.heading_path,
                seg.line_start,
                seg.line_end,
                seg.page,
                seg.cell,
            )
            != seg.id
        ):
            return Problem(
                "ledger_mismatch", seg.id, f"segment {seg.id}: its row no longer derives its ID"
            )
        if not (seg.start <= ev.start < ev.end <= seg.end):
            return Problem("ledger_mismatch", eid, f"evidence {eid} lies outside its segment")
        source = self._source_of(seg, rows)
        if isinstance(source, Problem):
            return source
        norm, rev, src = source
        text = self.normalized_text(norm.text_blob or "")
        if isinstance(text, Problem):
            return text
        if sha256_hex(text[seg.start : seg.end]) != seg.sha256:
            return Problem(
                "excerpt_mismatch",
                seg.id,
                f"segment {seg.id} text does not hash to its recorded SHA-256",
            )
        excerpt = text[ev.start : ev.end]
        if sha256_hex(excerpt) != ev.sha256:
            return Problem(
                "excerpt_mismatch",
                eid,
                f"evidence {eid}: the cited excerpt does not hash to its recorded SHA-256",
            )
        raw_problem = self.raw(rev.blob)
        if raw_problem is not None:
            return raw_problem
        first = seg.line_start + text[seg.start : ev.start].count("\n")
        return EvidenceView(
            id=eid,
            role=ev.role,
            source_path=src.path,
            source_id=src.id,
            revision_id=rev.id,
            raw_blake3=rev.blob,
            normalization_id=norm.id,
            adapter=f"{norm.adapter}@{norm.adapter_version}",
            segment_id=seg.id,
            start=ev.start,
            end=ev.end,
            line_start=first,
            line_end=first + excerpt.count("\n"),
            excerpt=excerpt,
            sha256=ev.sha256,
            heading_path=list(json.loads(seg.heading_path)),
            page=seg.page,
            cell=seg.cell,
        )

    def _source_of(
        self, seg: chains.SegmentRow, rows: _Rows
    ) -> tuple[chains.NormalizationRow, chains.RevisionRow, chains.SourceRow] | Problem:
        """The normalization, revision and source a segment belongs to, each deriving its ID."""
        nid = seg.normalization_id
        norm = rows.norms.get(nid)
        if norm is None:
            return Problem("ledger_mismatch", nid, f"normalization {nid} is missing")
        expected = self.ids.normalization_id(
            norm.revision_id, norm.adapter, norm.adapter_version, norm.config_hash
        )
        if expected != nid or norm.status != "ok" or not norm.text_blob:
            return Problem(
                "ledger_mismatch", nid, f"normalization {nid}: its row no longer derives its ID"
            )
        rev = rows.revisions.get(norm.revision_id)
        if rev is None:
            return Problem(
                "ledger_mismatch", norm.revision_id, f"revision {norm.revision_id} is missing"
            )
        if self.ids.revision_id(rev.source_id, rev.blob) != rev.id:
            return Problem(
                "ledger_mismatch", rev.id, f"revision {rev.id}: its row no longer derives its ID"
            )
        src = rows.sources.get(rev.source_id)
        if src is None or source_id_for(src.path) != rev.source_id:
            return Problem(
                "ledger_mismatch",
                rev.source_id,
                f"source {rev.source_id}: its row no longer derives its ID",
            )
        return norm, rev, src
