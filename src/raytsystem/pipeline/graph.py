"""The evidence graph of one generation, as plain JSON for the Universe page and agents.

Nodes: sources (notes are sources under `knowledge/manual/`), active claims, entities from the
registry, and for evidence the segments, revisions and raw blobs their chains go through.
Edges: `in_source` (claim -> source), `evidence` / `cites` (claim -> segment, by evidence role),
`in_revision` (segment -> revision), `raw` (revision -> raw blob), `mentions` (claim -> entity),
`links` (note -> note or entity), `supersedes` (note -> note), `retracts` / `disputes`
(note -> claim).

Beyond `max_nodes` the graph is cut deterministically: sources, entities, manual claims and
claims that are not confirmed are always kept, then extracted claims by ID; the chains of the
kept claims come with them. `truncated` says what was left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, select

from ..ids import make_id
from ..storage import generations
from ..storage import states as state
from ..storage.tables import Claim, Evidence, Normalization, Segment
from ..storage.tables import ClaimState as ClaimStateRow
from ..workspace import is_note
from .manual import Note, _notes_from_ledger

DEFAULT_MAX_NODES = 20_000
LABEL_CHARS = 160


def entity_id(name: str) -> str:
    return make_id("entity", name=name.casefold())


def _label(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def graph(
    conn: Connection, generation: generations.GenerationRef, *, max_nodes: int = DEFAULT_MAX_NODES
) -> dict[str, Any]:
    sources = state.active_sources(conn, generation.number)
    by_source_id = {a.source_id: a for a in sources.values()}
    notes = _notes_from_ledger(conn, [a for a in sources.values() if is_note(a.path)])
    claim_rows = conn.execute(
        select(
            ClaimStateRow.c.claim_id,
            ClaimStateRow.c.source_id,
            ClaimStateRow.c.status,
            ClaimStateRow.c.claim_hash,
            ClaimStateRow.c.evidence_ids,
            Claim.c.statement,
            Claim.c.authority,
        )
        .join(Claim, Claim.c.id == ClaimStateRow.c.claim_id)
        .where(state.active(ClaimStateRow, generation.number))
        .order_by(ClaimStateRow.c.claim_id)
    ).all()

    entities = {
        entity_id(e["name"]): e
        for n in sorted(notes.values(), key=lambda n: n.path)
        for e in n.meta.get("entities", [])
    }
    fixed = len(sources) + len(entities)
    must = [r for r in claim_rows if r.authority == "manual" or r.status != "confirmed"]
    rest = [r for r in claim_rows if not (r.authority == "manual" or r.status != "confirmed")]
    # Each kept claim brings up to ~3 chain nodes (segment; revision and raw are per source).
    budget = max(0, (max_nodes - fixed - 2 * len(sources)) // 2)
    kept = must + rest[: max(0, budget - len(must))]
    kept.sort(key=lambda r: r.claim_id)

    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, str]] = []
    for a in sorted(sources.values(), key=lambda a: a.path):
        note = notes.get(a.path)
        nodes.append(
            {
                "id": a.source_id,
                "kind": "note" if note else "source",
                "label": a.path,
                "path": a.path,
                "revision_id": a.revision_id,
                "note_status": note.meta["note"]["status"] if note else None,
            }
        )
        nodes.append(
            {
                "id": a.revision_id,
                "kind": "revision",
                "label": a.revision_id,
                "source_id": a.source_id,
            }
        )
        nodes.append({"id": f"raw:{a.blob}", "kind": "raw", "label": a.blob[:16], "blake3": a.blob})
        edges.append({"source": a.revision_id, "target": a.source_id, "kind": "revision_of"})
        edges.append({"source": a.revision_id, "target": f"raw:{a.blob}", "kind": "raw"})
    for eid, e in sorted(entities.items()):
        nodes.append(
            {"id": eid, "kind": "entity", "label": e["name"], "description": e["description"]}
        )

    evidence_ids = [e for r in kept for e in json.loads(r.evidence_ids)]
    evidence = _evidence(conn, evidence_ids)
    segment_ids = sorted({ev[1] for ev in evidence.values()})
    segments = _segments(conn, segment_ids)
    for seg_id in segment_ids:
        if seg_id in segments:
            kind, heading, revision = segments[seg_id]
            nodes.append(
                {
                    "id": seg_id,
                    "kind": "segment",
                    "label": f"{kind}: {' › '.join(heading)}" if heading else kind,
                    "segment_kind": kind,
                }
            )
            edges.append({"source": seg_id, "target": revision, "kind": "in_revision"})
    claim_ids = set()
    for r in kept:
        claim_ids.add(r.claim_id)
        nodes.append(
            {
                "id": r.claim_id,
                "kind": "claim",
                "label": _label(r.statement),
                "statement": r.statement,
                "status": r.status,
                "authority": r.authority,
                "hash": r.claim_hash,
                "source_id": r.source_id,
                "path": by_source_id[r.source_id].path if r.source_id in by_source_id else None,
            }
        )
        edges.append({"source": r.claim_id, "target": r.source_id, "kind": "in_source"})
        for eid in json.loads(r.evidence_ids):
            if eid in evidence:
                role, seg_id = evidence[eid][0], evidence[eid][1]
                edges.append(
                    {
                        "source": r.claim_id,
                        "target": seg_id,
                        "kind": "evidence" if role == "statement" else "cites",
                    }
                )
    edges.extend(_note_edges(notes.values(), sources, entities, claim_ids))
    node_ids = {n["id"] for n in nodes}
    edges = [e for e in edges if e["source"] in node_ids and e["target"] in node_ids]
    left_out = len(claim_rows) - len(kept)
    return {
        "schema_version": "1",
        "generation": generation.to_json(),
        "counts": {
            "sources": len(sources),
            "claims": len(claim_rows),
            "entities": len(entities),
            "nodes": len(nodes),
            "edges": len(edges),
        },
        "truncated": {
            "claims_left_out": left_out,
            "claims_shown": len(kept),
            "max_nodes": max_nodes,
        }
        if left_out
        else None,
        "nodes": nodes,
        "edges": sorted(edges, key=lambda e: (e["kind"], e["source"], e["target"])),
    }


def _evidence(conn: Connection, ids: list[str]) -> dict[str, tuple[str, str]]:
    out = {}
    for part in state.chunks(sorted(set(ids))):
        for eid, role, seg in conn.execute(
            select(Evidence.c.id, Evidence.c.role, Evidence.c.segment_id).where(
                Evidence.c.id.in_(part)
            )
        ):
            out[eid] = (role, seg)
    return out


def _segments(conn: Connection, ids: list[str]) -> dict[str, tuple[str, list[str], str]]:
    out = {}
    for part in state.chunks(ids):
        for seg_id, kind, heading, revision in conn.execute(
            select(
                Segment.c.id, Segment.c.kind, Segment.c.heading_path, Normalization.c.revision_id
            )
            .join(Normalization, Normalization.c.id == Segment.c.normalization_id)
            .where(Segment.c.id.in_(part))
        ):
            out[seg_id] = (kind, json.loads(heading), revision)
    return out


def _note_edges(
    notes: Iterable[Note],
    sources: dict[str, state.ActiveSource],
    entities: dict[str, Any],
    claim_ids: set[str],
) -> list[dict[str, str]]:
    names = {e["name"].casefold(): eid for eid, e in entities.items()}
    edges = []
    for note in notes:
        for entry in note.meta["claims"]:
            for link in entry.get("links", []):
                if link.casefold() in names:
                    edges.append(
                        {
                            "source": entry["id"],
                            "target": names[link.casefold()],
                            "kind": "mentions",
                        }
                    )
        for link in note.meta["links"]:
            target = _note_target(link, sources)
            if link.casefold() in names:
                edges.append(
                    {"source": note.source_id, "target": names[link.casefold()], "kind": "links"}
                )
            elif target:
                edges.append({"source": note.source_id, "target": target, "kind": "links"})
        for path in note.meta["note"]["supersedes"]:
            target = _note_target(path, sources)
            if target:
                edges.append({"source": note.source_id, "target": target, "kind": "supersedes"})
        for cid, status in note.directives().items():
            if cid in claim_ids:
                edges.append(
                    {
                        "source": note.source_id,
                        "target": cid,
                        "kind": "retracts" if status == "retracted" else "disputes",
                    }
                )
    return edges


def _note_target(link: str, sources: dict[str, state.ActiveSource]) -> str | None:
    for candidate in (
        link,
        f"{link}.md",
        f"knowledge/manual/{link}",
        f"knowledge/manual/{link}.md",
    ):
        if candidate in sources:
            return sources[candidate].source_id
    return None
