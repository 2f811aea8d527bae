"""SEARCH: browse the segments (and claims) of a generation by words, for people exploring.

Unlike QUERY, search is not an answer: it lists matching blocks with where they are, from the
generation's index (whose generation is checked). A block's text is not stored in the index: it
is cut from its normalized-text blob (re-hashed on read) and must match the segment's recorded
SHA-256. The raw bytes and the rest of the chain are not re-checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..canonical import sha256_hex
from ..errors import IntegrityError, UsageError
from ..model import index as index_file
from ..storage.blobs import BlobStore
from ..storage.sql import Reader, expand
from .query import MAX_LIMIT, parse_query, target_generation
from .ranking import WEIGHTS, match_expression


def _segment_texts(
    reader: Reader, blobs: BlobStore, ids: list[str]
) -> dict[str, tuple[str, int, int]]:
    """segment ID -> (text, first line, last line), each text checked against its SHA-256."""
    placeholders, params = expand("s", ids)
    found = reader.rows(
        'SELECT s.id, s.line_start, s.line_end, s."start", s."end", s.sha256, n.text_blob '
        "FROM segments s JOIN normalizations n ON n.id = s.normalization_id "
        f"WHERE s.id IN ({placeholders})",
        params,
    )
    normalized: dict[str, str] = {}
    out = {}
    for seg_id, line_start, line_end, start, end, sha, blob in found:
        if blob not in normalized:
            normalized[blob] = blobs.get(blob).decode("utf-8")
        body = normalized[blob][start:end]
        if sha256_hex(body) != sha:
            raise IntegrityError(
                f"segment {seg_id} text does not hash to its recorded SHA-256",
                code="excerpt_mismatch",
            )
        out[seg_id] = (body, line_start, line_end)
    return out


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
    table = {"segment": "segments_fts", "claim": "claims_fts"}[kind]
    query_terms = parse_query(text)
    target, _current = target_generation(reader, generation, None)
    path = index_file.index_path(index_dir, target.number, target.hash)
    with index_file.open_index(path, target.hash) as conn:
        rows = conn.execute(
            "SELECT d.object_id, d.object_hash, d.source_path, d.heading_path, d.segment_kind, "
            f"d.authority, d.text, bm25({table}, ?, ?, ?) AS score "
            f"FROM {table} f JOIN docs d ON d.rowid = f.rowid "
            f"WHERE {table} MATCH ? ORDER BY score, d.object_id LIMIT ?",
            (*WEIGHTS, match_expression(query_terms), limit),
        ).fetchall()
    segments = (
        _segment_texts(reader, blobs, [r[0] for r in rows]) if kind == "segment" and rows else {}
    )
    hits = []
    for object_id, object_hash, source_path, heading, seg_kind, authority, body, score in rows:
        hit: dict[str, Any] = {
            "id": object_id,
            "kind": seg_kind or "claim",
            "source_path": source_path,
            "heading_path": json.loads(heading),
            "text": body,
            "score": float(
                f"{-score:.6g}"
            ),  # BM25: tiny in small workspaces, so significant digits
        }
        if kind == "segment":
            seg_text, start, end = segments.get(object_id, ("", 0, 0))
            hit["text"] = seg_text
            hit["lines"] = {"start": start, "end": end}
            hit["sha256"] = object_hash
        else:
            hit["authority"] = authority
            hit["hash"] = object_hash
        hits.append(hit)
    return {
        "schema_version": "1",
        "query": text,
        "query_terms": query_terms,
        "generation": target.to_json(),
        "hits": hits,
    }
