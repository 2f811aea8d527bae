"""SEARCH: browse the segments (and claims) of a generation by words, for people exploring.

Unlike QUERY, search is not an answer: it lists matching blocks with where they are, from the
generation's index (whose generation is checked). A block's text is not stored in the index: it
is cut from its normalized-text blob (re-hashed on read) and must match the segment's recorded
SHA-256. The raw bytes and the rest of the chain are not re-checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from ..canonical import sha256_hex
from ..errors import BlobMissing, IntegrityError, UsageError
from ..storage import chains, index_file, tombstones
from ..storage.blobs import BlobStore
from ..storage.generations import target_generation
from ..storage.reader import Reader
from .claim_scoring import WEIGHTS, match_expression
from .query import MAX_LIMIT, parse_query, record_fields


def _segment_texts(
    reader: Reader, blobs: BlobStore, ids: list[str]
) -> dict[str, tuple[str, str, str, int, int]]:
    """segment ID -> (text, kind, SHA-256, first line, last line) from the ledger, each text
    checked against its SHA-256."""
    found = chains.segment_texts(reader, ids).values()
    normalized: dict[str, str] = {}
    out = {}
    for seg in found:
        if seg.text_blob not in normalized:
            try:
                normalized[seg.text_blob] = blobs.get(seg.text_blob).decode("utf-8")
            except BlobMissing:
                if tombstones.tombstones(reader, [seg.text_blob]):  # ADR 0040
                    raise IntegrityError(
                        f"fail closed: segment {seg.id} is in the purged text "
                        f"{seg.text_blob}; the next ingest makes a generation without it",
                        code="blob_purged",
                        subject=seg.text_blob,
                    ) from None
                raise
        body = normalized[seg.text_blob][seg.start : seg.end]
        if sha256_hex(body) != seg.sha256:
            raise IntegrityError(
                f"segment {seg.id} text does not hash to its recorded SHA-256",
                code="excerpt_mismatch",
            )
        out[seg.id] = (body, seg.kind, seg.sha256, seg.line_start, seg.line_end)
    return out


# The best segments with rows of their own, and the best claims standing for a segment (ADR
# 0021): ordered by score and then segment, a segment's first claim is its best.
_OWN_SEGMENTS: Final = """
    SELECT d.object_id, d.source_path, d.heading_path, d.object_hash, d.role, d.record_status,
           bm25(segments_fts, ?, ?, ?) AS score
    FROM segments_fts f JOIN docs d ON d.rowid = f.rowid
    WHERE segments_fts MATCH ? ORDER BY score, d.object_id LIMIT ?"""
_STOOD_FOR: Final = """
    SELECT d.stands_for, d.source_path, d.heading_path, '', d.role, d.record_status,
           bm25(claims_fts, ?, ?, ?) AS score
    FROM claims_fts f JOIN docs d ON d.rowid = f.rowid
    WHERE claims_fts MATCH ? AND d.stands_for <> '' ORDER BY score, d.stands_for LIMIT ?"""

_CLAIM_HITS: Final = """
    SELECT d.object_id, d.object_hash, d.source_path, d.heading_path, d.authority,
           d.text, d.role, d.record_status, bm25(claims_fts, ?, ?, ?) AS score
    FROM claims_fts f JOIN docs d ON d.rowid = f.rowid
    WHERE claims_fts MATCH ? ORDER BY score, d.object_id LIMIT ?"""


def _score(bm25: float) -> float:
    return float(f"{-bm25:.6g}")  # BM25: tiny in small workspaces, so significant digits


def search(
    reader: Reader,
    blobs: BlobStore,
    index_dir: Path,
    text: str,
    *,
    limit: int = 10,
    kind: str = "segment",
    generation: str | None = None,
) -> dict[str, Any]:
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"--limit must be between 1 and {MAX_LIMIT}", code="invalid_limit")
    query_terms = parse_query(text)
    expression = match_expression(query_terms)
    target, _current = target_generation(reader, generation, None)
    path = index_file.index_path(index_dir, target.number, target.hash)
    with index_file.open_index(path, target.hash, target.index_digest) as conn:
        if kind == "segment":
            rows = _best_segments(conn, expression, limit)
        else:
            rows = conn.execute(_CLAIM_HITS, (*WEIGHTS, expression, limit)).fetchall()
    hits = _segment_hits(reader, blobs, rows) if kind == "segment" else _claim_hits(rows)
    return {
        "schema_version": "1",
        "query": text,
        "query_terms": query_terms,
        "generation": target.to_json(),
        "hits": hits,
    }


def _best_segments(conn: Any, expression: str, limit: int) -> list[Any]:
    """The `limit` best segments, each scored by its own row or by its best claim, in order of
    score and then ID: exactly what grouping every matching claim by segment would give, from
    the best few claims (more when a few segments hold all of them)."""
    own = conn.execute(_OWN_SEGMENTS, (*WEIGHTS, expression, limit)).fetchall()
    wanted = limit * 4
    while True:
        claims = conn.execute(_STOOD_FOR, (*WEIGHTS, expression, wanted)).fetchall()
        stood_for: dict[str, Any] = {}
        for row in claims:
            stood_for.setdefault(row[0], row)
        if len(stood_for) >= limit or len(claims) < wanted:
            break
        wanted *= 4
    found = own + list(stood_for.values())[:limit]
    return sorted(found, key=lambda r: (r[-1], r[0]))[:limit]


def _segment_hits(reader: Reader, blobs: BlobStore, rows: list[Any]) -> list[dict[str, Any]]:
    segments = _segment_texts(reader, blobs, [r[0] for r in rows]) if rows else {}
    hits = []
    for seg_id, source_path, heading, indexed_hash, role, record_status, score in rows:
        found = segments.get(seg_id)
        # A segment's own row records its hash; a claim standing for it records none.
        if found is None or indexed_hash not in ("", found[2]):
            raise IntegrityError(
                f"fail closed: segment {seg_id} of the index does not match the ledger",
                code="index_row_mismatch",
            )
        body, seg_kind, sha, start, end = found
        hits.append(
            {
                "id": seg_id,
                "kind": seg_kind,
                "source_path": source_path,
                "heading_path": json.loads(heading),
                "text": body,
                "score": _score(score),
                "lines": {"start": start, "end": end},
                "sha256": sha,
                **record_fields(role, record_status),
            }
        )
    return hits


def _claim_hits(rows: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": object_id,
            "kind": "claim",
            "source_path": source_path,
            "heading_path": json.loads(heading),
            "text": body,
            "score": _score(score),
            "authority": authority,
            "hash": object_hash,
            **record_fields(role, record_status),
        }
        for object_id, object_hash, source_path, heading, authority, body, role, record_status, score in rows
    ]
