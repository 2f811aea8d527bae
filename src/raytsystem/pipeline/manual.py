"""Manual notes in a generation: citations resolved, statuses decided, directives applied.

Runs in the parent process during ingest, after every changed file is normalized:

1. Changed notes are parsed (`model/notes.py`); unchanged notes bring their parsed meta from
   the ledger.
2. A note is (re-)resolved when it changed, when a source it cites changed or vanished, or when
   one of its claims is the target of a directive that changed. Each citation's quote is looked
   up in the *current* normalized text of the cited source, tolerant of whitespace and line
   breaks, otherwise exact, inside one segment. Found once: a `citation` evidence with the exact
   span. Not found, found twice, or no such source: the claim is `unverified` and a finding says
   why. The rest of the note and the ingest go on.
3. `retracts` / `disputes` of every `current` note make an overlay of statuses (retracted wins
   over disputed); the claims whose overlay status changed get a new state, even in sources
   that did not change. An ID that is not active in the generation is an `unknown_claim_id`
   finding. `draft` notes have no claims; `outdated` notes' claims are not active.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import Connection

from ..canonical import sha256_hex
from ..model.generation import ClaimState, SourceState, source_digest
from ..model.objects import ChainIds, EvidenceRow, claim_hash, source_id_for
from ..model.text import Finding
from ..storage import sources as ledger_sources
from ..storage import states as state
from ..storage.blobs import BlobStore
from ..storage.states import ActiveSource
from ..workspace import is_note
from .files import KeptFile

STATUS_ORDER = {"retracted": 2, "disputed": 1}


class Staged(Protocol):
    """The claim states staged by this ingest (storage/staging.py)."""

    def owners(self, claim_ids: Iterable[str]) -> dict[str, str]: ...

    def claims_of(self, source_id: str) -> tuple[ClaimState, ...]: ...


@dataclass
class ManualResult:
    states: dict[str, SourceState] = field(default_factory=dict)
    evidence: list[EvidenceRow] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


@dataclass
class Note:
    path: str
    source_id: str
    revision_id: str
    normalization_id: str
    meta: dict[str, Any]

    @property
    def current(self) -> bool:
        return self.meta.get("note_error") is None and self.meta["note"]["status"] == "current"

    def directives(self) -> dict[str, str]:
        if not self.current:
            return {}
        out = {cid: "disputed" for cid in self.meta["note"]["disputes"]}
        out.update({cid: "retracted" for cid in self.meta["note"]["retracts"]})
        return out

    def cited_paths(self) -> set[str]:
        return {c["path"] for e in self.meta["claims"] for c in e["citations"]}


class Texts:
    """Current normalized text and segments of sources, read from the ledger and the blobs."""

    def __init__(self, conn: Connection, blobs: BlobStore, sources: dict[str, str | None]) -> None:
        self.conn = conn
        self.blobs = blobs
        self.sources = sources  # path -> its normalization in the new generation
        self._cache: dict[str, tuple[str, str, list[tuple[str, int, int]]] | None] = {}

    def get(self, path: str) -> tuple[str, str, list[tuple[str, int, int]]] | None:
        """(normalization id, text, [(segment id, start, end)]) of the source at `path`."""
        if path in self._cache:
            return self._cache[path]
        nid = self.sources.get(path)
        value = None
        if nid is not None:
            blob = ledger_sources.text_blobs(self.conn, [nid]).get(nid)
            if blob:
                segs = ledger_sources.segment_spans(self.conn, nid)
                value = (nid, self.blobs.get(blob).decode("utf-8"), segs)
        self._cache[path] = value
        return value


def quote_pattern(quote: str) -> re.Pattern[str]:
    return re.compile(r"\s+".join(re.escape(word) for word in quote.split()))


def locate(texts: Texts, path: str, quote: str) -> tuple[str, tuple[str, int, int, str] | None]:
    """('found', (segment, start, end, sha)) or (problem code, None)."""
    target = texts.get(path)
    if target is None:
        return "citation_source_missing", None
    _nid, text, segments = target
    if not quote.split():
        return "citation_malformed", None
    pattern = quote_pattern(quote)
    hits = []
    for seg_id, start, end in segments:
        for m in pattern.finditer(text, start, end):
            hits.append((seg_id, m.start(), m.end()))
            if len(hits) > 1:
                return "citation_ambiguous", None
    if not hits:
        return "citation_not_found", None
    seg_id, start, end = hits[0]
    return "found", (seg_id, start, end, sha256_hex(text[start:end]))


MESSAGES = {
    "citation_source_missing": "cites {path}, which is not an active source",
    "citation_ambiguous": 'the quote "{quote}" occurs more than once in {path}',
    "citation_not_found": 'the quote "{quote}" is not in the current revision of {path}',
    "citation_malformed": "the citation of {path} has an empty quote",
}


def resolve_note(
    note: Note, texts: Texts, statements: dict[str, str], ids: ChainIds
) -> tuple[list[ClaimState], list[EvidenceRow], list[Finding]]:
    """Base states (before directives) of a note's claims in this generation."""
    if note.meta["note"]["status"] != "current" and note.meta.get("note_error") is None:
        return [], [], []  # draft: no claims; outdated: its claims are not active
    states, evidence, findings = [], [], []
    error = note.meta.get("note_error")
    if error:
        findings.append(Finding("front_matter_invalid", note.path, error, "error"))
    for entry in note.meta["claims"]:
        cid = entry["id"]
        ev_ids = [entry["statement_evidence"]]
        ok = error is None
        for problem in entry["problems"]:
            ok = False
            findings.append(Finding(problem["code"], f"{note.path} {cid}", problem["message"]))
        for citation in entry["citations"]:
            outcome, hit = locate(texts, citation["path"], citation["quote"])
            if hit is None:
                ok = False
                findings.append(
                    Finding(
                        outcome,
                        f"{note.path} {cid}",
                        MESSAGES[outcome].format(path=citation["path"], quote=citation["quote"]),
                    )
                )
                continue
            seg_id, start, end, sha = hit
            eid = ids.evidence_id(cid, seg_id, start, end, sha, "citation")
            evidence.append(EvidenceRow(eid, cid, seg_id, start, end, sha, "citation"))
            ev_ids.append(eid)
        status = "confirmed" if ok else "unverified"
        statement = statements[cid]
        states.append(
            ClaimState(
                cid,
                note.source_id,
                status,
                claim_hash(cid, statement, "manual", status, ev_ids),
                tuple(sorted(ev_ids)),
            )
        )
    return states, evidence, findings


def _statements(
    conn: Connection, ids: list[str], known: dict[str, str] | None = None
) -> dict[str, str]:
    out = dict(known or {})
    missing = [i for i in ids if i not in out]
    out.update((cid, text) for cid, (text, _) in ledger_sources.claim_texts(conn, missing).items())
    return out


def _notes_from_ledger(conn: Connection, items: Iterable[ActiveSource]) -> dict[str, Note]:
    items = [a for a in items if a.normalization_id]
    metas = ledger_sources.normalization_metas(
        conn, [a.normalization_id for a in items if a.normalization_id]
    )
    out = {}
    for a in items:
        raw = metas.get(a.normalization_id or "")
        if raw:
            meta = json.loads(raw)
            if "claims" in meta:
                out[a.path] = Note(
                    a.path, a.source_id, a.revision_id, a.normalization_id or "", meta
                )
    return out


def resolve_manual(
    conn: Connection,
    blobs: BlobStore,
    parent_number: int | None,
    active: dict[str, ActiveSource],
    changed: dict[str, KeptFile],
    states: dict[str, SourceState],
    removed: set[str],
    staged: Staged,
    ids: ChainIds,
) -> ManualResult:
    """Claims and statuses the notes decide for the new generation.

    `states` holds the new state of every source changed in this ingest, without its claims
    (they are staged, reachable through `staged`); the result holds the states that the notes
    decided or changed, with their claims.
    """
    result = ManualResult()
    removed_paths = {a.path for a in active.values() if a.source_id in removed}

    # 1. Notes of the new generation, and the parent's notes (for the old directives).
    parent_notes = _notes_from_ledger(conn, [a for a in active.values() if is_note(a.path)])
    notes = {p: n for p, n in parent_notes.items() if p not in changed and p not in removed_paths}
    statements: dict[str, str] = {}
    for path, r in changed.items():
        if not is_note(path) or r.note_meta is None:
            continue
        sid = source_id_for(path)
        meta = r.note_meta
        notes[path] = Note(path, sid, r.revision_id, r.normalization_id, meta)
        if meta["note_error"] is None and meta["note"]["status"] == "outdated":
            result.findings.append(
                Finding("note_outdated", path, "outdated note: its claims are not active", "info")
            )

    # 2. Which notes to resolve now.
    touched_paths = set(changed) | removed_paths
    old_overlay = _overlay(parent_notes.values())
    new_overlay = _overlay(notes.values())
    flipped = {
        c for c in set(old_overlay) | set(new_overlay) if old_overlay.get(c) != new_overlay.get(c)
    }
    owners = _owners(conn, parent_number, flipped, states, staged)
    to_resolve = [
        n
        for p, n in sorted(notes.items())
        if p in changed or n.cited_paths() & touched_paths or n.source_id in owners.values()
    ]
    sources: dict[str, str | None] = {
        a.path: a.normalization_id for a in active.values() if a.source_id not in removed
    }
    for path, r in changed.items():
        # Their rows are written already: the texts are read back from the blobs.
        sources[path] = r.normalization_id
    texts = Texts(conn, blobs, sources)
    statements = _statements(
        conn, [e["id"] for n in to_resolve for e in n.meta["claims"]], statements
    )
    for note in to_resolve:
        base, evidence, findings = resolve_note(note, texts, statements, ids)
        result.evidence.extend(evidence)
        result.findings.extend(findings)
        states[note.source_id] = SourceState(
            note.source_id,
            note.path,
            note.revision_id,
            note.normalization_id,
            source_digest(note.source_id, note.revision_id, note.normalization_id, base),
            tuple(base),
        )
        result.states[note.source_id] = states[note.source_id]
        for link in note.meta["links"]:
            if not _link_exists(link, notes, sources):
                result.findings.append(
                    Finding("dead_link", note.path, f"[[{link}]] links to nothing")
                )

    # Owners of every directive's target, now that this ingest's notes have their states.
    targets = _owners(conn, parent_number, set(new_overlay), states, staged)
    # The claims of changed sources that a directive reaches come back from staging.
    for sid in set(owners.values()) | set(targets.values()):
        s = states.get(sid)
        if s is not None and not s.claims and sid not in result.states:
            states[sid] = SourceState(
                sid, s.path, s.revision_id, s.normalization_id, s.digest, staged.claims_of(sid)
            )

    # 3. Apply the directives to every state computed now, and to the owners of flipped claims.
    for sid in set(owners.values()) - set(states):
        a = next((x for x in active.values() if x.source_id == sid), None)
        if a is None:
            continue
        parent_claims = state.claim_states(conn, parent_number or 0, [sid]).get(sid, [])
        # Only extracted sources get here (notes owning flipped claims were resolved above),
        # and an extracted claim's status without directives is always `confirmed`.
        undirected = tuple(_undirected(c) for _, c in parent_claims)
        states[sid] = SourceState(sid, a.path, a.revision_id, a.normalization_id, "", undirected)
    known = ledger_sources.claim_texts(
        conn, [c.claim_id for s in states.values() for c in s.claims]
    )
    for sid, s in list(states.items()):
        new_claims = []
        for c in s.claims:
            base_status = "confirmed" if c.status in STATUS_ORDER else c.status
            status = new_overlay.get(c.claim_id, base_status)
            if status == c.status and c.claim_hash:
                new_claims.append(c)
                continue
            statement, authority = known[c.claim_id]
            new_claims.append(
                ClaimState(
                    c.claim_id,
                    c.source_id,
                    status,
                    claim_hash(c.claim_id, statement, authority, status, c.evidence_ids),
                    c.evidence_ids,
                )
            )
        claims_t = tuple(new_claims)
        if claims_t != s.claims or not s.digest:
            digest = source_digest(sid, s.revision_id, s.normalization_id, claims_t)
            states[sid] = SourceState(
                sid, s.path, s.revision_id, s.normalization_id, digest, claims_t
            )
            result.states[sid] = states[sid]

    # 4. Directives naming claims that are not in this generation.
    resolved = {n.path for n in to_resolve}
    for note in sorted(notes.values(), key=lambda n: n.path):
        for cid in sorted(note.directives()):
            owner = targets.get(cid)
            alive = (
                owner is not None
                and owner not in removed
                and (owner not in states or any(c.claim_id == cid for c in states[owner].claims))
            )
            if not alive and (note.path in resolved or owner in states or owner in removed):
                result.findings.append(
                    Finding(
                        "unknown_claim_id",
                        note.path,
                        f"{cid} is not an active claim of this generation",
                    )
                )
    return result


def _undirected(c: ClaimState) -> ClaimState:
    """The state without a directive's status; an empty hash marks it for recomputation."""
    if c.status not in STATUS_ORDER:
        return c
    return ClaimState(c.claim_id, c.source_id, "confirmed", "", c.evidence_ids)


def _overlay(notes: Iterable[Note]) -> dict[str, str]:
    overlay: dict[str, str] = {}
    for note in sorted(notes, key=lambda n: n.path):
        for cid, status in note.directives().items():
            if STATUS_ORDER[status] > STATUS_ORDER.get(overlay.get(cid, ""), 0):
                overlay[cid] = status
    return overlay


def _owners(
    conn: Connection,
    parent_number: int | None,
    claim_ids: set[str],
    states: dict[str, SourceState],
    staged: Staged,
) -> dict[str, str]:
    """claim ID -> source ID: claims of notes resolved now, staged now, or active in the parent."""
    owners = {
        c.claim_id: sid for sid, s in states.items() for c in s.claims if c.claim_id in claim_ids
    }
    owners.update({c: s for c, s in staged.owners(claim_ids - set(owners)).items()})
    if parent_number is not None:
        owners.update(ledger_sources.claim_owners(conn, parent_number, claim_ids - set(owners)))
    return owners


def _link_exists(link: str, notes: dict[str, Note], sources: dict[str, Any]) -> bool:
    target = link.strip()
    names = {e["name"].casefold() for n in notes.values() for e in n.meta.get("entities", [])}
    if target.casefold() in names:
        return True
    candidates = {
        target,
        f"{target}.md",
        f"knowledge/manual/{target}",
        f"knowledge/manual/{target}.md",
    }
    return bool(candidates & set(sources))
