"""SEARCH: browse the segments (and claims) of a generation by words, for people exploring.

Unlike QUERY, search is not an answer: it lists matching blocks with where they are, from the
generation's index (whose generation is checked), without re-hashing the chain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..model import index as index_file
from ..storage.sql import Reader, expand
from .query import MAX_LIMIT, WEIGHTS, match_expression, parse_query, target_generation


def search(
    reader: Reader,
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
    lines: dict[str, tuple[int, int]] = {}
    if kind == "segment" and rows:
        placeholders, params = expand("s", [r[0] for r in rows])
        lines = {
            r[0]: (r[1], r[2])
            for r in reader.rows(
                f"SELECT id, line_start, line_end FROM segments WHERE id IN ({placeholders})",
                params,
            )
        }
    hits = []
    for object_id, object_hash, source_path, heading, seg_kind, authority, body, score in rows:
        hit: dict[str, Any] = {
            "id": object_id,
            "kind": seg_kind or "claim",
            "source_path": source_path,
            "heading_path": json.loads(heading),
            "text": body,
            "score": round(-score, 6),
        }
        if kind == "segment":
            start, end = lines.get(object_id, (None, None))
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
