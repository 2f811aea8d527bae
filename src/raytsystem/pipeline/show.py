"""Read-only inspection: status, history of a source, any object with its chain, generations, diff."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import BlobMissing, NotFound, UsageError
from ..ids import parse_id
from ..storage import generations, reviews, tombstones, views
from ..storage.blobs import BlobStore
from ..storage.states import state_evidence_of
from ..workspace import check_rel_path

if TYPE_CHECKING:
    from sqlalchemy import Connection


def _found(record: NamedTuple | None, object_id: str) -> dict[str, Any]:
    """A record as JSON, or NotFound."""
    if record is None:
        raise NotFound(f"no object {object_id} in the ledger", id=object_id)
    return record._asdict()


def status(conn: Connection) -> dict[str, Any]:
    current = generations.head(conn)
    last = views.last_ingest(conn)
    counts = {
        **views.ledger_counts(conn)._asdict(),
        "generations": current.number if current else 0,
    }
    out: dict[str, Any] = {"generation": None, "ledger_counts": counts, "last_ingest": None}
    if current:
        out["generation"] = {
            **current.to_json(),
            "created_at": current.created_at,
            "active_sources": current.source_count,
            "active_claims": current.claim_count,
        }
    if last:
        summary = json.loads(last.summary)
        out["last_ingest"] = {
            "finished_at": last.finished_at,
            "generation_hash": last.generation_hash,
            "created_generation": summary.get("created", False),
            "counts": summary.get("counts", {}),
            "findings": len(summary.get("findings", [])),
        }
    return out


def history(conn: Connection, path: str) -> dict[str, Any]:
    path = check_rel_path(path)
    source = views.source_at(conn, path)
    if source is None:
        raise NotFound(f"no source {path} in the ledger", code="source_not_found", path=path)
    revisions: list[dict[str, Any]] = [
        {
            "id": rev.id,
            "blob": rev.blob,
            "size": rev.size,
            "media_type": rev.media_type,
            "first_seen_at": rev.first_seen_at,
            "active_in_generations": _spans(conn, rev.id),
            "purged": None,
        }
        for rev in views.revisions_of(conn, source.id)
    ]
    purged = tombstones.tombstones(conn, [r["blob"] for r in revisions])
    for r in revisions:
        if (t := purged.get(r["blob"])) is not None:
            r["purged"] = t.to_json()
    revisions.sort(
        key=lambda r: (
            r["active_in_generations"][0]["from"] if r["active_in_generations"] else 0,
            r["first_seen_at"],
        )
    )
    current = generations.head(conn)
    active_now = views.active_revision(conn, source.id, current.number) if current else None
    last_to = max(
        (s["to"] or 0 for r in revisions for s in r["active_in_generations"] if s["to"]),
        default=None,
    )
    return {
        "source": {"id": source.id, "path": path, "first_seen_at": source.first_seen_at},
        "current_revision": active_now,
        "removed_in_generation": None if active_now else last_to,
        "revisions": revisions,
    }


def _spans(conn: Connection, revision_id: str) -> list[dict[str, int | None]]:
    """The generations a revision was active in, as half-open `[from, to)` spans."""
    spans: list[dict[str, int | None]] = []
    for f, t in views.revision_intervals(conn, revision_id):
        # A new state of the same revision (a claim's status changed) continues the span.
        if spans and spans[-1]["to"] == f:
            spans[-1]["to"] = t
        else:
            spans.append({"from": f, "to": t})
    return spans


def _normalization_json(norm: dict[str, Any]) -> dict[str, Any]:
    return {**norm, "meta": json.loads(norm["meta"]) if norm["meta"] else None}


def segment_chain(conn: Connection, segment_id: str) -> dict[str, Any]:
    seg = _found(views.segment(conn, segment_id), segment_id)
    norm = _found(views.normalization(conn, seg["normalization_id"]), seg["normalization_id"])
    rev = _found(views.revision(conn, norm["revision_id"]), norm["revision_id"])
    src = _found(views.source(conn, rev["source_id"]), rev["source_id"])
    return {
        "segment": {**seg, "heading_path": json.loads(seg["heading_path"])},
        "normalization": _normalization_json(norm),
        "revision": rev,
        "source": src,
        "raw_blob": {"algorithm": "blake3", "address": rev["blob"]},
    }


def _excerpt(blobs: BlobStore, norm: dict[str, Any], start: int, end: int) -> str | None:
    """The excerpt from the normalized text; None without one, or when it was purged."""
    if not norm.get("text_blob"):
        return None
    try:
        return blobs.get(norm["text_blob"]).decode("utf-8")[start:end]
    except BlobMissing:  # purged (`tombstone` says) or lost (verify says)
        return None


def _tombstone(conn: Connection, address: str | None) -> dict[str, Any] | None:
    """The tombstone of a purged blob (ADR 0040), or None."""
    if not address:
        return None
    found = tombstones.tombstones(conn, [address]).get(address)
    return found.to_json() if found else None


def _head_number(conn: Connection) -> int:
    """States past the head are an ingest's work in progress (storage/staging.py)."""
    current = generations.head(conn)
    return current.number if current else 0


def show(conn: Connection, blobs: BlobStore, object_id: str) -> dict[str, Any]:
    ref = object_id.strip().lower()
    if ref.isdigit() or (len(ref) >= 8 and all(c in "0123456789abcdef" for c in ref)):
        return {"kind": "generation", **_generation(conn, ref)}
    kind, object_id = parse_id(object_id)
    if kind == "source":
        src = _found(views.source(conn, object_id), object_id)
        return {"kind": kind, **history(conn, src["path"])}
    if kind == "revision":
        rev = _found(views.revision(conn, object_id), object_id)
        return {
            "kind": kind,
            "revision": rev,
            "source": _found(views.source(conn, rev["source_id"]), rev["source_id"]),
            "normalizations": [
                _normalization_json(n._asdict()) for n in views.normalizations_of(conn, object_id)
            ],
            "tombstone": _tombstone(conn, rev["blob"]),
        }
    if kind == "normalization":
        norm = _found(views.normalization(conn, object_id), object_id)
        rev = _found(views.revision(conn, norm["revision_id"]), norm["revision_id"])
        return {
            "kind": kind,
            "normalization": _normalization_json(norm),
            "revision": rev,
            "source": _found(views.source(conn, rev["source_id"]), rev["source_id"]),
            "tombstone": _tombstone(conn, norm.get("text_blob")),
        }
    if kind == "segment":
        chain = segment_chain(conn, object_id)
        seg = chain["segment"]
        chain["excerpt"] = _excerpt(blobs, chain["normalization"], seg["start"], seg["end"])
        return {"kind": kind, **chain}
    if kind == "evidence":
        ev = _found(views.evidence(conn, object_id), object_id)
        chain = segment_chain(conn, ev["segment_id"])
        return {
            "kind": kind,
            "evidence": ev,
            "cited_excerpt": _excerpt(blobs, chain["normalization"], ev["start"], ev["end"]),
            **chain,
        }
    if kind == "claim":
        return {"kind": kind, **_claim(conn, blobs, object_id)}
    if kind == "review":
        stored = reviews.stored_review(conn, object_id)
        if stored is None:
            raise NotFound(f"no object {object_id} in the ledger", id=object_id)
        return {"kind": kind, "created_at": stored.created_at, **json.loads(stored.report)}
    raise UsageError(
        f"{kind} objects are derived, not stored: see `raytsystem universe` for entities and relations",
        code="invalid_id",
    )


def _claim(conn: Connection, blobs: BlobStore, claim_id: str) -> dict[str, Any]:
    """A claim with all its states up to the head, and each of its evidence with its chain."""
    claim = _found(views.claim(conn, claim_id), claim_id)
    states: list[dict[str, Any]] = [
        {
            "from_generation": r.gen_from,
            "to_generation": r.gen_to,
            "status": r.status,
            "claim_hash": r.claim_hash,
            "evidence_ids": state_evidence_of(f"a state of claim {claim_id}", r.evidence_ids),
        }
        for r in views.claim_states_of(conn, claim["source_id"], claim_id, _head_number(conn))
    ]
    evidence_ids = sorted({e for s in states for e in s["evidence_ids"]})
    evidence = []
    for eid in evidence_ids:
        ev = _found(views.evidence(conn, eid), eid)
        chain = segment_chain(conn, ev["segment_id"])
        evidence.append(
            {
                **ev,
                "cited_excerpt": _excerpt(blobs, chain["normalization"], ev["start"], ev["end"]),
                "chain": chain,
            }
        )
    return {"claim": claim, "states": states, "evidence": evidence}


def _generation(conn: Connection, ref: str) -> dict[str, Any]:
    gen = generations.generation(conn, ref)
    return {
        "number": gen.number,
        "hash": gen.hash,
        "parent_hash": gen.parent_hash,
        "manifest_digest": gen.manifest_digest,
        "created_at": gen.created_at,
        "source_count": gen.source_count,
        "claim_count": gen.claim_count,
        "summary": gen.summary,
    }


def list_generations(conn: Connection) -> list[dict[str, Any]]:
    current = generations.head(conn)
    return [
        {
            "number": g.number,
            "hash": g.hash,
            "parent_hash": g.parent_hash,
            "created_at": g.created_at,
            "sources": g.source_count,
            "claims": g.claim_count,
            "current": current is not None and g.hash == current.hash,
            "summary": g.summary,
        }
        for g in generations.generations(conn)
    ]


def diff(conn: Connection, ref_a: str, ref_b: str) -> dict[str, Any]:
    """Claims active in B and not in A (added), and in A and not in B (removed)."""
    a, b = generations.generation(conn, ref_a), generations.generation(conn, ref_b)
    before, after = views.claim_marks(conn, a.number), views.claim_marks(conn, b.number)
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    both = set(before) & set(after)
    changed = sorted(c for c in both if before[c].status != after[c].status)
    new_evidence = sorted(
        c for c in both if before[c].status == after[c].status and before[c] != after[c]
    )
    info = {
        cid: s._asdict()
        for cid, s in views.claim_summaries(conn, added + removed + changed).items()
    }
    return {
        "from": a.to_json(),
        "to": b.to_json(),
        "added": [{**info[c], "status": after[c].status} for c in added],
        "removed": [{**info[c], "status": before[c].status} for c in removed],
        "status_changed": [
            {**info[c], "from_status": before[c].status, "to_status": after[c].status}
            for c in changed
        ],
        # Same statement and status, new evidence (e.g. the sentence moved in its file).
        "evidence_changed": new_evidence,
    }
