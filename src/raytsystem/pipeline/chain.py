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
from ..model.objects import chain_ids, claim_hash, source_id_for, statement_of
from ..storage.blobs import BlobStore
from ..storage.reader import Reader, expand


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


@dataclass
class ClaimView:
    id: str
    hash: str
    status: str
    authority: str
    statement: str
    source_id: str
    evidence: list[EvidenceView] = field(default_factory=list)


def _by_id(
    reader: Reader, table: str, columns: str, ids: Sequence[str]
) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    ids = sorted(set(ids))
    for i in range(0, len(ids), 500):
        placeholders, params = expand("i", ids[i : i + 500])
        for row in reader.rows(
            f"SELECT {columns} FROM {table} WHERE id IN ({placeholders})", params
        ):
            out[row[0]] = row
    return out


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
                self._texts[address] = Problem(
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
                self._raw[address] = Problem(
                    "blob_missing", address, f"raw blob {address} is missing"
                )
        return self._raw[address]

    def claims(
        self, claim_ids: Sequence[str], number: int
    ) -> tuple[dict[str, ClaimView], list[Problem]]:
        """Load and check the chains of `claim_ids` as members of generation `number`."""
        problems: list[Problem] = []
        placeholders, params = expand("c", sorted(set(claim_ids)))
        states = {
            r[0]: r
            for r in self.reader.rows(
                # A claim's states are found through its source (claim_states is indexed by
                # source: see migration 0002).
                "SELECT s.claim_id, s.status, s.claim_hash, s.evidence_ids FROM claims c "
                "JOIN claim_states s ON s.source_id = c.source_id AND s.claim_id = c.id "
                f"WHERE c.id IN ({placeholders}) AND s.gen_from <= :n "
                "AND (s.gen_to IS NULL OR s.gen_to > :n)",
                {**params, "n": number},
            )
        }
        claims = _by_id(
            self.reader, "claims", "id, source_id, authority, statement, occurrence", claim_ids
        )
        evidence_ids = [e for s in states.values() for e in json.loads(s[3])]
        evidence = _by_id(
            self.reader,
            "evidence",
            'id, claim_id, segment_id, "start", "end", sha256, role',
            evidence_ids,
        )
        segments = _by_id(
            self.reader,
            "segments",
            'id, normalization_id, ordinal, kind, heading_path, "start", "end", line_start, line_end, sha256',
            [e[2] for e in evidence.values()],
        )
        norms = _by_id(
            self.reader,
            "normalizations",
            "id, revision_id, adapter, adapter_version, config_hash, status, text_blob",
            [s[1] for s in segments.values()],
        )
        revisions = _by_id(
            self.reader, "revisions", "id, source_id, blob", [n[1] for n in norms.values()]
        )
        sources = _by_id(
            self.reader,
            "sources",
            "id, path",
            [r[1] for r in revisions.values()] + [c[1] for c in claims.values()],
        )

        views: dict[str, ClaimView] = {}
        for cid in claim_ids:
            st = states.get(cid)
            row = claims.get(cid)
            if st is None or row is None:
                problems.append(
                    Problem(
                        "not_a_member", cid, f"claim {cid} is not active in generation {number}"
                    )
                )
                continue
            _, status, recorded_hash, ev_json = st
            _, source_id, authority, statement, occurrence = row
            ev_ids = json.loads(ev_json)
            if self.ids.claim_id(source_id, authority, statement, occurrence) != cid:
                problems.append(
                    Problem(
                        "ledger_mismatch", cid, f"claim {cid}: its row no longer derives its ID"
                    )
                )
                continue
            if claim_hash(cid, statement, authority, status, ev_ids) != recorded_hash:
                problems.append(
                    Problem(
                        "ledger_mismatch",
                        cid,
                        f"claim {cid}: its hash does not match the generation",
                    )
                )
                continue
            view = ClaimView(cid, recorded_hash, status, authority, statement, source_id)
            for eid in ev_ids:
                ev = evidence.get(eid)
                checked = self._evidence(cid, eid, ev, segments, norms, revisions, sources)
                if isinstance(checked, Problem):
                    problems.append(checked)
                    break
                view.evidence.append(checked)
            else:
                # The ID and hash prove the statement was not changed since it was written,
                # not that its evidence says it: a claim says what its statement evidence's
                # excerpt says (whitespace collapsed, NFC), as `verify` also checks.
                said = [e for e in view.evidence if e.role == "statement"]
                if not said or any(statement_of(e.excerpt) != statement for e in said):
                    problems.append(
                        Problem(
                            "excerpt_mismatch",
                            cid,
                            f"claim {cid}: its statement is not what its statement evidence says",
                        )
                    )
                    continue
                view.evidence.sort(key=lambda e: (e.role != "statement", e.id))
                views[cid] = view
        return views, problems

    def _evidence(
        self,
        cid: str,
        eid: str,
        ev: tuple[Any, ...] | None,
        segments: dict[str, tuple[Any, ...]],
        norms: dict[str, tuple[Any, ...]],
        revisions: dict[str, tuple[Any, ...]],
        sources: dict[str, tuple[Any, ...]],
    ) -> EvidenceView | Problem:
        if ev is None:
            return Problem("ledger_mismatch", eid, f"evidence {eid} of claim {cid} is missing")
        _, ev_claim, seg_id, start, end, sha, role = ev
        if ev_claim != cid or self.ids.evidence_id(cid, seg_id, start, end, sha, role) != eid:
            return Problem(
                "ledger_mismatch", eid, f"evidence {eid}: its row no longer derives its ID"
            )
        seg = segments.get(seg_id)
        if seg is None:
            return Problem("ledger_mismatch", seg_id, f"segment {seg_id} is missing")
        _, nid, ordinal, _kind, heading, s_start, s_end, line_start, _line_end, s_sha = seg
        if self.ids.segment_id(nid, ordinal, s_start, s_end, s_sha) != seg_id:
            return Problem(
                "ledger_mismatch", seg_id, f"segment {seg_id}: its row no longer derives its ID"
            )
        if not (s_start <= start < end <= s_end):
            return Problem("ledger_mismatch", eid, f"evidence {eid} lies outside its segment")
        norm = norms.get(nid)
        if norm is None:
            return Problem("ledger_mismatch", nid, f"normalization {nid} is missing")
        _, rev_id, adapter, version, config_hash, nstatus, text_blob = norm
        expected_nid = self.ids.normalization_id(rev_id, adapter, version, config_hash)
        if expected_nid != nid or nstatus != "ok" or not text_blob:
            return Problem(
                "ledger_mismatch", nid, f"normalization {nid}: its row no longer derives its ID"
            )
        rev = revisions.get(rev_id)
        if rev is None:
            return Problem("ledger_mismatch", rev_id, f"revision {rev_id} is missing")
        _, source_id, raw = rev
        if self.ids.revision_id(source_id, raw) != rev_id:
            return Problem(
                "ledger_mismatch", rev_id, f"revision {rev_id}: its row no longer derives its ID"
            )
        src = sources.get(source_id)
        if src is None or source_id_for(src[1]) != source_id:
            return Problem(
                "ledger_mismatch",
                source_id,
                f"source {source_id}: its row no longer derives its ID",
            )
        text = self.normalized_text(text_blob)
        if isinstance(text, Problem):
            return text
        if sha256_hex(text[s_start:s_end]) != s_sha:
            return Problem(
                "excerpt_mismatch",
                seg_id,
                f"segment {seg_id} text does not hash to its recorded SHA-256",
            )
        excerpt = text[start:end]
        if sha256_hex(excerpt) != sha:
            return Problem(
                "excerpt_mismatch",
                eid,
                f"evidence {eid}: the cited excerpt does not hash to its recorded SHA-256",
            )
        raw_problem = self.raw(raw)
        if raw_problem is not None:
            return raw_problem
        first = line_start + text[s_start:start].count("\n")
        return EvidenceView(
            id=eid,
            role=role,
            source_path=src[1],
            source_id=source_id,
            revision_id=rev_id,
            raw_blake3=raw,
            normalization_id=nid,
            adapter=f"{adapter}@{version}",
            segment_id=seg_id,
            start=start,
            end=end,
            line_start=first,
            line_end=first + excerpt.count("\n"),
            excerpt=excerpt,
            sha256=sha,
            heading_path=list(json.loads(heading)),
        )
