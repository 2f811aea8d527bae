"""The evidence graph of one generation, as plain JSON for the Universe page and agents.

Nodes: sources (notes are sources under `knowledge/manual/`), active claims, entities from the
registry and the symbols source files define (`path::Name`), and for evidence the segments, revisions and raw blobs their chains go through.
Edges: `in_source` (claim -> source), `evidence` / `cites` (claim -> segment, by evidence role),
`in_revision` (segment -> revision), `raw` (revision -> raw blob), `mentions` (claim -> entity),
`links` (note -> note or entity), `defines` (source -> symbol entity), `supersedes` (note -> note), `retracts` / `disputes`
(note -> claim).

Beyond `max_nodes` the graph is cut deterministically: sources, entities, manual claims and
claims that are not confirmed are always kept, then extracted claims by ID; the chains of the
kept claims come with them. `truncated` says what was left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..ids import make_id
from ..storage import generations, views
from ..storage import sources as ledger_sources
from ..storage import states as state
from ..storage.views import ActiveClaim
from ..workspace import is_note
from .manual_notes import Note, notes_from_ledger

if TYPE_CHECKING:
    from sqlalchemy import Connection

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
    notes = notes_from_ledger(conn, [a for a in sources.values() if is_note(a.path)])
    claims = views.active_claims(conn, generation.number)
    entities = {
        entity_id(e["name"]): e
        for n in sorted(notes.values(), key=lambda n: n.path)
        for e in n.meta.get("entities", [])
    }
    symbols = _symbol_entities(conn, sources)
    fixed = len(sources) + len(entities) + len(symbols)
    kept = _kept_claims(claims, fixed, len(sources), max_nodes)
    nodes = _source_nodes(sources, notes)
    edges = _source_edges(sources)
    nodes += [
        {"id": eid, "kind": "entity", "label": e["name"], "description": e["description"]}
        for eid, e in sorted(entities.items())
    ]
    for eid, (source_id, node) in sorted(symbols.items()):
        nodes.append(node)
        edges.append({"source": source_id, "target": eid, "kind": "defines"})
    evidence = views.evidence_links(conn, [e for c in kept for e in c.evidence_ids])
    segment_ids = sorted({ev.segment_id for ev in evidence.values()})
    segments = views.segment_places(conn, segment_ids)
    for seg_id in segment_ids:
        if seg_id in segments:
            nodes.append(_segment_node(seg_id, segments[seg_id]))
            edges.append(
                {"source": seg_id, "target": segments[seg_id].revision_id, "kind": "in_revision"}
            )
    by_source_id = {a.source_id: a for a in sources.values()}
    for c in kept:
        nodes.append(_claim_node(c, by_source_id))
        edges.extend(_claim_edges(c, evidence))
    edges.extend(_note_edges(notes.values(), sources, entities, {c.claim_id for c in kept}))
    node_ids = {n["id"] for n in nodes}
    edges = [e for e in edges if e["source"] in node_ids and e["target"] in node_ids]
    left_out = len(claims) - len(kept)
    return {
        "schema_version": "1",
        "generation": generation.to_json(),
        "counts": {
            "sources": len(sources),
            "claims": len(claims),
            "entities": len(entities) + len(symbols),
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


def _symbol_entities(
    conn: Connection, sources: dict[str, state.ActiveSource]
) -> dict[str, tuple[str, dict[str, Any]]]:
    """entity ID -> (defining source ID, node) for every symbol a code adapter recorded in the
    meta of a source's current normalization; named `path::Qualified.name`, as notes cite it."""
    by_norm = {a.normalization_id: a for a in sources.values() if a.normalization_id}
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for nid, raw in ledger_sources.normalization_metas(conn, by_norm).items():
        if not raw or '"symbols"' not in raw:
            continue
        source = by_norm[nid]
        for symbol in json.loads(raw).get("symbols", ()):
            name = f"{source.path}::{symbol['name']}"
            first, last = symbol["lines"]
            out[entity_id(name)] = (
                source.source_id,
                {
                    "id": entity_id(name),
                    "kind": "entity",
                    "label": name,
                    "description": f"{symbol['kind']}, lines {first}-{last}",
                },
            )
    return out


def _kept_claims(
    claims: list[ActiveClaim], fixed: int, source_count: int, max_nodes: int
) -> list[ActiveClaim]:
    """The claims the graph shows, by ID: manual and unconfirmed ones always, then extracted
    ones by ID as far as `max_nodes` allows beside the `fixed` nodes (sources, entities)."""
    must = [c for c in claims if c.authority == "manual" or c.status != "confirmed"]
    rest = [c for c in claims if not (c.authority == "manual" or c.status != "confirmed")]
    # Each kept claim brings up to ~3 chain nodes (segment; revision and raw are per source).
    budget = max(0, (max_nodes - fixed - 2 * source_count) // 2)
    kept = must + rest[: max(0, budget - len(must))]
    kept.sort(key=lambda c: c.claim_id)
    return kept


def _source_nodes(
    sources: dict[str, state.ActiveSource], notes: dict[str, Note]
) -> list[dict[str, Any]]:
    """Each source (or note) with its revision and raw blob, by path."""
    nodes: list[dict[str, Any]] = []
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
    return nodes


def _source_edges(sources: dict[str, state.ActiveSource]) -> list[dict[str, str]]:
    edges = []
    for a in sorted(sources.values(), key=lambda a: a.path):
        edges.append({"source": a.revision_id, "target": a.source_id, "kind": "revision_of"})
        edges.append({"source": a.revision_id, "target": f"raw:{a.blob}", "kind": "raw"})
    return edges


def _segment_node(seg_id: str, place: views.SegmentPlace) -> dict[str, Any]:
    kind, heading = place.kind, place.heading_path
    return {
        "id": seg_id,
        "kind": "segment",
        "label": f"{kind}: {' › '.join(heading)}" if heading else kind,
        "segment_kind": kind,
    }


def _claim_node(c: ActiveClaim, by_source_id: dict[str, state.ActiveSource]) -> dict[str, Any]:
    return {
        "id": c.claim_id,
        "kind": "claim",
        "label": _label(c.statement),
        "statement": c.statement,
        "status": c.status,
        "authority": c.authority,
        "hash": c.claim_hash,
        "source_id": c.source_id,
        "path": by_source_id[c.source_id].path if c.source_id in by_source_id else None,
    }


def _claim_edges(c: ActiveClaim, evidence: dict[str, views.EvidenceLink]) -> list[dict[str, str]]:
    """A claim's source, and the segments its evidence points into."""
    edges = [{"source": c.claim_id, "target": c.source_id, "kind": "in_source"}]
    for eid in c.evidence_ids:
        if eid in evidence:
            role, seg_id = evidence[eid]
            edges.append(
                {
                    "source": c.claim_id,
                    "target": seg_id,
                    "kind": "evidence" if role == "statement" else "cites",
                }
            )
    return edges


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
