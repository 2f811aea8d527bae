"""Read-only inspection: status, history of a source, any object with its chain, generations, diff."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, func, select

from ..errors import NotFound, UsageError
from ..ids import parse_id
from ..storage import generations
from ..storage import states as state
from ..storage.blobs import BlobStore
from ..storage.tables import (
    Claim,
    ClaimState,
    Evidence,
    IngestRun,
    Normalization,
    Review,
    Revision,
    Segment,
    Source,
    SourceState,
)
from ..workspace import check_rel_path


def _one(conn: Connection, table: Any, object_id: str) -> dict[str, Any]:
    row = conn.execute(select(table).where(table.c.id == object_id)).mappings().first()
    if row is None:
        raise NotFound(f"no object {object_id} in the ledger", id=object_id)
    return dict(row)


def status(conn: Connection) -> dict[str, Any]:
    current = generations.head(conn)
    last = (
        conn.execute(select(IngestRun).order_by(IngestRun.c.id.desc()).limit(1)).mappings().first()
    )
    counts = {
        "sources": conn.execute(select(func.count()).select_from(Source)).scalar_one(),
        "revisions": conn.execute(select(func.count()).select_from(Revision)).scalar_one(),
        "normalizations": conn.execute(
            select(func.count()).select_from(Normalization)
        ).scalar_one(),
        "claims": conn.execute(select(func.count()).select_from(Claim)).scalar_one(),
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
        summary = json.loads(last["summary"])
        out["last_ingest"] = {
            "finished_at": last["finished_at"],
            "generation_hash": last["generation_hash"],
            "created_generation": summary.get("created", False),
            "counts": summary.get("counts", {}),
            "findings": len(summary.get("findings", [])),
        }
    return out


def history(conn: Connection, path: str) -> dict[str, Any]:
    path = check_rel_path(path)
    source = conn.execute(select(Source).where(Source.c.path == path)).mappings().first()
    if source is None:
        raise NotFound(f"no source {path} in the ledger", code="source_not_found", path=path)
    revisions = []
    for rev in conn.execute(
        select(Revision)
        .where(Revision.c.source_id == source["id"])
        .order_by(Revision.c.first_seen_at, Revision.c.id)
    ).mappings():
        spans: list[dict[str, int | None]] = []
        for f, t in conn.execute(
            select(SourceState.c.gen_from, SourceState.c.gen_to)
            .where(SourceState.c.revision_id == rev["id"])
            .order_by(SourceState.c.gen_from)
        ):
            # A new state of the same revision (a claim's status changed) continues the span.
            if spans and spans[-1]["to"] == f:
                spans[-1]["to"] = t
            else:
                spans.append({"from": f, "to": t})
        revisions.append(
            {
                "id": rev["id"],
                "blob": rev["blob"],
                "size": rev["size"],
                "media_type": rev["media_type"],
                "first_seen_at": rev["first_seen_at"],
                "active_in_generations": spans,
            }
        )
    revisions.sort(
        key=lambda r: (
            r["active_in_generations"][0]["from"] if r["active_in_generations"] else 0,
            r["first_seen_at"],
        )
    )
    current = generations.head(conn)
    active_now = None
    if current:
        row = conn.execute(
            select(SourceState.c.revision_id).where(
                SourceState.c.source_id == source["id"], state.active(SourceState, current.number)
            )
        ).first()
        active_now = row[0] if row else None
    last_to = max(
        (s["to"] or 0 for r in revisions for s in r["active_in_generations"] if s["to"]),
        default=None,
    )
    return {
        "source": {"id": source["id"], "path": path, "first_seen_at": source["first_seen_at"]},
        "current_revision": active_now,
        "removed_in_generation": None if active_now else last_to,
        "revisions": revisions,
    }


def segment_chain(conn: Connection, segment_id: str) -> dict[str, Any]:
    seg = _one(conn, Segment, segment_id)
    norm = _one(conn, Normalization, seg["normalization_id"])
    rev = _one(conn, Revision, norm["revision_id"])
    src = _one(conn, Source, rev["source_id"])
    return {
        "segment": {**seg, "heading_path": json.loads(seg["heading_path"])},
        "normalization": {**norm, "meta": json.loads(norm["meta"]) if norm["meta"] else None},
        "revision": rev,
        "source": src,
        "raw_blob": {"algorithm": "blake3", "address": rev["blob"]},
    }


def _excerpt(blobs: BlobStore, norm: dict[str, Any], start: int, end: int) -> str | None:
    if not norm.get("text_blob"):
        return None
    return blobs.get(norm["text_blob"]).decode("utf-8")[start:end]


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
        src = _one(conn, Source, object_id)
        return {"kind": kind, **history(conn, src["path"])}
    if kind == "revision":
        rev = _one(conn, Revision, object_id)
        norms = [
            dict(r)
            for r in conn.execute(
                select(Normalization).where(Normalization.c.revision_id == object_id)
            ).mappings()
        ]
        return {
            "kind": kind,
            "revision": rev,
            "source": _one(conn, Source, rev["source_id"]),
            "normalizations": norms,
        }
    if kind == "normalization":
        norm = _one(conn, Normalization, object_id)
        rev = _one(conn, Revision, norm["revision_id"])
        return {
            "kind": kind,
            "normalization": {**norm, "meta": json.loads(norm["meta"]) if norm["meta"] else None},
            "revision": rev,
            "source": _one(conn, Source, rev["source_id"]),
        }
    if kind == "segment":
        chain = segment_chain(conn, object_id)
        seg = chain["segment"]
        chain["excerpt"] = _excerpt(blobs, chain["normalization"], seg["start"], seg["end"])
        return {"kind": kind, **chain}
    if kind == "evidence":
        ev = _one(conn, Evidence, object_id)
        chain = segment_chain(conn, ev["segment_id"])
        return {
            "kind": kind,
            "evidence": ev,
            "cited_excerpt": _excerpt(blobs, chain["normalization"], ev["start"], ev["end"]),
            **chain,
        }
    if kind == "claim":
        claim = _one(conn, Claim, object_id)
        states = [
            {
                "from_generation": r.gen_from,
                "to_generation": r.gen_to,
                "status": r.status,
                "claim_hash": r.claim_hash,
                "evidence_ids": json.loads(r.evidence_ids),
            }
            for r in conn.execute(
                select(ClaimState)
                .where(
                    ClaimState.c.source_id == claim["source_id"],
                    ClaimState.c.claim_id == object_id,
                    ClaimState.c.gen_from <= _head_number(conn),
                )
                .order_by(ClaimState.c.gen_from, ClaimState.c.id)
            )
        ]
        evidence_ids = sorted({e for s in states for e in s["evidence_ids"]})
        evidence = []
        for eid in evidence_ids:
            ev = _one(conn, Evidence, eid)
            chain = segment_chain(conn, ev["segment_id"])
            evidence.append(
                {
                    **ev,
                    "cited_excerpt": _excerpt(
                        blobs, chain["normalization"], ev["start"], ev["end"]
                    ),
                    "chain": chain,
                }
            )
        return {"kind": kind, "claim": claim, "states": states, "evidence": evidence}
    if kind == "review":
        row = conn.execute(
            select(Review.c.generation_hash, Review.c.created_at, Review.c.report).where(
                Review.c.id == object_id
            )
        ).first()
        if row is None:
            raise NotFound(f"no object {object_id} in the ledger", id=object_id)
        return {"kind": kind, "created_at": row[1], **json.loads(row[2])}
    raise UsageError(
        f"{kind} objects are derived, not stored: see `raytsystem universe` for entities and relations",
        code="invalid_id",
    )


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

    def active_claims(number: int) -> dict[str, tuple[str, str]]:
        rows = conn.execute(
            select(ClaimState.c.claim_id, ClaimState.c.claim_hash, ClaimState.c.status).where(
                state.active(ClaimState, number)
            )
        )
        return {cid: (h, st) for cid, h, st in rows}

    before, after = active_claims(a.number), active_claims(b.number)
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    both = set(before) & set(after)
    changed = sorted(c for c in both if before[c][1] != after[c][1])
    new_evidence = sorted(c for c in both if before[c][1] == after[c][1] and before[c] != after[c])
    ids = added + removed + changed
    info: dict[str, dict[str, Any]] = {}
    for part in state.chunks(ids):
        for cid, statement, authority, path in conn.execute(
            select(Claim.c.id, Claim.c.statement, Claim.c.authority, Source.c.path)
            .join(Source, Source.c.id == Claim.c.source_id)
            .where(Claim.c.id.in_(part))
        ):
            info[cid] = {
                "id": cid,
                "statement": statement,
                "authority": authority,
                "source_path": path,
            }
    return {
        "from": a.to_json(),
        "to": b.to_json(),
        "added": [{**info[c], "status": after[c][1]} for c in added],
        "removed": [{**info[c], "status": before[c][1]} for c in removed],
        "status_changed": [
            {**info[c], "from_status": before[c][1], "to_status": after[c][1]} for c in changed
        ],
        # Same statement and status, new evidence (e.g. the sentence moved in its file).
        "evidence_changed": new_evidence,
    }
