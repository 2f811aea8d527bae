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

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy import Connection

from ..model.generation import ClaimState, SourceState, source_digest
from ..model.objects import ChainIds, EvidenceRow, claim_hash, source_id_for
from ..model.text import Finding
from ..storage import sources as ledger_sources
from ..storage import states as state
from ..storage.blobs import BlobStore
from ..storage.states import ActiveSource
from ..workspace import is_note
from .files import KeptFile
from .manual_notes import MESSAGES, Note, Texts, link_exists, locate, notes_from_ledger

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
    parent_notes = notes_from_ledger(conn, [a for a in active.values() if is_note(a.path)])
    notes = _notes_now(parent_notes, changed, removed_paths, result)

    # 2. Which notes to resolve now, and resolving them.
    new_overlay = _overlay(notes.values())
    flipped = _flipped(_overlay(parent_notes.values()), new_overlay)
    owners = _owners(conn, parent_number, flipped, states, staged)
    touched_paths = set(changed) | removed_paths
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
    _resolve_notes(conn, blobs, to_resolve, notes, sources, states, ids, result)

    # Owners of every directive's target, now that this ingest's notes have their states.
    targets = _owners(conn, parent_number, set(new_overlay), states, staged)
    _restore_staged_claims(set(owners.values()) | set(targets.values()), states, staged, result)

    # 3. Apply the directives to every state computed now, and to the owners of flipped claims.
    _add_owner_states(conn, parent_number, set(owners.values()) - set(states), active, states)
    _apply_overlay(conn, new_overlay, states, result)

    # 4. Directives naming claims that are not in this generation.
    resolved = {n.path for n in to_resolve}
    result.findings.extend(_unknown_targets(notes, resolved, targets, states, removed))
    return result


def _notes_now(
    parent_notes: dict[str, Note],
    changed: dict[str, KeptFile],
    removed_paths: set[str],
    result: ManualResult,
) -> dict[str, Note]:
    """The notes of the new generation: the parent's that stay as they were, and the changed
    ones as just parsed (an outdated one gets an info finding)."""
    notes = {p: n for p, n in parent_notes.items() if p not in changed and p not in removed_paths}
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
    return notes


def _flipped(old_overlay: dict[str, str], new_overlay: dict[str, str]) -> set[str]:
    """The claims whose directed status differs between the two overlays."""
    return {
        c for c in set(old_overlay) | set(new_overlay) if old_overlay.get(c) != new_overlay.get(c)
    }


def _resolve_notes(
    conn: Connection,
    blobs: BlobStore,
    to_resolve: list[Note],
    notes: dict[str, Note],
    sources: dict[str, str | None],
    states: dict[str, SourceState],
    ids: ChainIds,
    result: ManualResult,
) -> None:
    """Resolve each note of `to_resolve` against the current texts of `sources` (path ->
    normalization): its new state goes to `states` and the result, with its evidence and
    findings, and a finding for each of its links that leads nowhere."""
    texts = Texts(conn, blobs, sources)
    statements = _statements(conn, [e["id"] for n in to_resolve for e in n.meta["claims"]])
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
            if not link_exists(link, notes, sources):
                result.findings.append(
                    Finding("dead_link", note.path, f"[[{link}]] links to nothing")
                )


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
            symbol = citation.get("symbol")
            outcome, hit = locate(texts, citation["path"], citation["quote"], symbol)
            if hit is None:
                ok = False
                findings.append(
                    Finding(outcome, f"{note.path} {cid}", MESSAGES[outcome].format(**citation))
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


def _statements(conn: Connection, claim_ids: list[str]) -> dict[str, str]:
    """claim ID -> its statement."""
    return {cid: text for cid, (text, _) in ledger_sources.claim_texts(conn, claim_ids).items()}


def _restore_staged_claims(
    source_ids: set[str], states: dict[str, SourceState], staged: Staged, result: ManualResult
) -> None:
    """The claims of changed sources that a directive reaches come back from staging (their
    states were computed without them) unless the notes decided those states already."""
    for sid in source_ids:
        s = states.get(sid)
        if s is not None and not s.claims and sid not in result.states:
            states[sid] = SourceState(
                sid, s.path, s.revision_id, s.normalization_id, s.digest, staged.claims_of(sid)
            )


def _add_owner_states(
    conn: Connection,
    parent_number: int | None,
    source_ids: set[str],
    active: dict[str, ActiveSource],
    states: dict[str, SourceState],
) -> None:
    """A state for each unchanged source owning a claim whose directive changed: its claims as
    in the parent, without the directives' statuses and marked for a new hash."""
    for sid in source_ids:
        a = next((x for x in active.values() if x.source_id == sid), None)
        if a is None:
            continue
        parent_claims = state.claim_states(conn, parent_number or 0, [sid]).get(sid, [])
        # Only extracted sources get here (notes owning flipped claims were resolved above),
        # and an extracted claim's status without directives is always `confirmed`.
        undirected = tuple(_undirected(c) for _, c in parent_claims)
        states[sid] = SourceState(sid, a.path, a.revision_id, a.normalization_id, "", undirected)


def _apply_overlay(
    conn: Connection,
    overlay: dict[str, str],
    states: dict[str, SourceState],
    result: ManualResult,
) -> None:
    """Give every claim of `states` its status under the directives (`overlay`); a state
    whose claims change, or that has no digest yet, gets a new digest and goes to the result."""
    known = ledger_sources.claim_texts(
        conn, [c.claim_id for s in states.values() for c in s.claims]
    )
    for sid, s in list(states.items()):
        new_claims = []
        for c in s.claims:
            base_status = "confirmed" if c.status in STATUS_ORDER else c.status
            status = overlay.get(c.claim_id, base_status)
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


def _unknown_targets(
    notes: dict[str, Note],
    resolved: set[str],
    targets: dict[str, str],
    states: dict[str, SourceState],
    removed: set[str],
) -> list[Finding]:
    """An `unknown_claim_id` finding for each directive naming a claim that is not active in
    the new generation, reported where this ingest touched the note or the claim's owner."""
    findings = []
    for note in sorted(notes.values(), key=lambda n: n.path):
        for cid in sorted(note.directives()):
            owner = targets.get(cid)
            alive = (
                owner is not None
                and owner not in removed
                and (owner not in states or any(c.claim_id == cid for c in states[owner].claims))
            )
            if not alive and (note.path in resolved or owner in states or owner in removed):
                findings.append(
                    Finding(
                        "unknown_claim_id",
                        note.path,
                        f"{cid} is not an active claim of this generation",
                    )
                )
    return findings


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
