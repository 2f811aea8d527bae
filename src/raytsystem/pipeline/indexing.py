"""Index rows of sources, read back from the ledger: the one way rows are made.

Ingest, `index rebuild` and the fallback full build all derive a source's rows here, from the
ledger's immutable rows and the normalized text blobs, so an index rebuilt from scratch has
exactly the rows (and digests) of one patched generation after generation.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, select

from ..model.generation import ClaimState
from ..model import index as index_file
from ..model.index import IndexRow
from ..model.terms import term_text
from ..storage.blobs import BlobStore
from ..storage.models import Claim, Evidence, Normalization, Segment
from . import state
from .state import GenerationRef, chunks


@dataclass(frozen=True)
class SourceForIndex:
    source_id: str
    path: str
    normalization_id: str | None
    claims: Sequence[ClaimState]


def path_terms(path: str) -> str:
    return term_text(posixpath.splitext(path)[0].replace("/", " "))


def index_rows(
    conn: Connection,
    blobs: BlobStore,
    sources: Sequence[SourceForIndex],
    terms_cache: Mapping[str, str] | None = None,
    texts_cache: Mapping[str, str] | None = None,
) -> dict[str, list[IndexRow]]:
    cache = dict(terms_cache or {})
    texts = dict(texts_cache or {})

    def analyzed(text: str) -> str:
        got = cache.get(text)
        if got is None:
            got = cache[text] = term_text(text)
        return got

    def heading_terms(heading_path: str) -> str:
        got = cache.get(heading_path)
        if got is None:
            got = cache[heading_path] = term_text(" ".join(json.loads(heading_path)))
        return got

    norm_ids = sorted({s.normalization_id for s in sources if s.normalization_id})
    text_blobs: dict[str, str | None] = {}
    segments: dict[str, list[tuple[str, str, str, str, int, int]]] = {}
    seg_table = Segment.__table__
    for part in chunks(norm_ids):
        for nid, blob in conn.execute(
            select(Normalization.id, Normalization.text_blob).where(Normalization.id.in_(part))
        ):
            text_blobs[nid] = blob
        for r in conn.execute(
            select(
                seg_table.c.normalization_id,
                seg_table.c.id,
                seg_table.c.sha256,
                seg_table.c.kind,
                seg_table.c.heading_path,
                seg_table.c.start,
                seg_table.c.end,
            )
            .where(seg_table.c.normalization_id.in_(part))
            .order_by(seg_table.c.normalization_id, seg_table.c.ordinal)
        ):
            segments.setdefault(r[0], []).append(tuple(r[1:]))  # type: ignore[arg-type]

    claim_ids = sorted({c.claim_id for s in sources for c in s.claims if c.status == "confirmed"})
    statements: dict[str, tuple[str, str]] = {}
    for part in chunks(claim_ids):
        for cid, statement, authority in conn.execute(
            select(Claim.id, Claim.statement, Claim.authority).where(Claim.id.in_(part))
        ):
            statements[cid] = (statement, authority)
    evidence_ids = sorted(
        {e for s in sources for c in s.claims if c.status == "confirmed" for e in c.evidence_ids}
    )
    heading_of_claim: dict[str, str] = {}
    for part in chunks(evidence_ids):
        for cid, heading in conn.execute(
            select(Evidence.claim_id, Segment.heading_path)
            .join(Segment, Segment.id == Evidence.segment_id)
            .where(Evidence.id.in_(part), Evidence.role == "statement")
        ):
            heading_of_claim[cid] = heading

    out: dict[str, list[IndexRow]] = {}
    for source in sources:
        rows: list[IndexRow] = []
        pterms = cache.get(source.path) or path_terms(source.path)
        nid = source.normalization_id
        if nid and text_blobs.get(nid):
            text = texts.get(nid)
            if text is None:
                text = blobs.get(text_blobs[nid] or "").decode("utf-8")
            whole: list[str] = []
            headings: list[str] = []
            for seg_id, sha, kind, heading, start, end in segments.get(nid, []):
                body = text[start:end]
                seg_terms = analyzed(body)
                rows.append(
                    IndexRow(
                        "segment",
                        seg_id,
                        sha,
                        source.source_id,
                        source.path,
                        heading,
                        kind,
                        "",
                        "",
                        body,
                        seg_terms,
                        heading_terms(heading),
                        pterms,
                    )
                )
                (headings if kind == "heading" else whole).append(seg_terms)
            if whole or headings:
                # The whole source as one document: the context QUERY weighs claims by.
                rows.append(
                    IndexRow(
                        "source",
                        source.source_id,
                        nid,
                        source.source_id,
                        source.path,
                        "[]",
                        "",
                        "",
                        "",
                        source.path,
                        " ".join(whole),
                        " ".join(headings),
                        pterms,
                    )
                )
        for claim in source.claims:
            if claim.status != "confirmed":
                continue
            statement, authority = statements[claim.claim_id]
            heading = heading_of_claim.get(claim.claim_id, "[]")
            rows.append(
                IndexRow(
                    "claim",
                    claim.claim_id,
                    claim.claim_hash,
                    source.source_id,
                    source.path,
                    heading,
                    "",
                    authority,
                    claim.status,
                    statement,
                    analyzed(statement),
                    heading_terms(heading),
                    pterms,
                )
            )
        out[source.source_id] = rows
    return out


def rebuild(
    index_dir: Path, conn: Connection, blobs: BlobStore, generation: GenerationRef
) -> dict[str, object]:
    """Write the index of `generation` from the ledger alone; returns its path and digests."""
    sources = state.active_sources(conn, generation.number)
    claims = state.claim_states(conn, generation.number, [a.source_id for a in sources.values()])
    rows = index_rows(
        conn,
        blobs,
        [
            SourceForIndex(
                a.source_id, a.path, a.normalization_id, [c for _, c in claims.get(a.source_id, [])]
            )
            for a in sources.values()
        ],
    )
    path = index_file.index_path(index_dir, generation.number, generation.hash)
    previous = None
    if path.is_file():
        with contextlib.suppress(Exception), index_file.open_index(path, generation.hash) as old:
            previous = index_file.read_meta(old).get("rows_digest")
    digest = index_file.build(
        path, generation_hash=generation.hash, generation_number=generation.number, changed=rows
    )
    return {
        "generation": generation.to_json(),
        "path": str(path),
        "rows_digest": digest,
        "previous_rows_digest": previous,
        "same_as_previous": previous == digest if previous else None,
        "documents": sum(len(r) for r in rows.values()),
    }
