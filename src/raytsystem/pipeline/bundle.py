"""BUNDLE: a deterministic, verified context bundle for an agent about to do a task.

Items are chosen like a QUERY answer (the same ranking), plus the blocks that are never claims
(code and HTML blocks) from the segment index, and every item is verified down to the
raw bytes before it is returned. Then, in order of value (manual claims, claims by relevance,
then blocks by relevance), items go in while the budget lasts:

- an item's cost is the token estimate of its canonical JSON: ceil(UTF-8 bytes / 4);
- an item that does not fit is shortened rather than dropped when at least `MIN_SHORT_TOKENS`
  remain: its excerpt is cut at a word boundary to a prefix that fits, and the item says so
  (`shortened: {from_chars, to_chars}`); the prefix keeps its own exact span and SHA-256, so it
  is as checkable as the whole;
- what still does not fit is listed in `omitted`.

`must_read` lists the sources an agent must read in full before acting on authority: the
manual notes behind any manual claim in the bundle, and every source whose excerpt was
shortened. `bundle_sha256` is the SHA-256 of the canonical JSON of the bundle without its
`timing`: the same task on the same generation always gives the same hash.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any, Final

from ..canonical import canonical_json, sha256_hex
from ..errors import IntegrityError, UsageError
from ..storage import chains, index_file
from ..storage.blobs import BlobStore
from ..storage.generations import target_generation
from ..storage.reader import Reader
from .chain import Checker
from .claim_scoring import WEIGHTS, match_expression
from .query import parse_query, record_fields, searched_terms, verify_chosen
from .ranking import choose

MAX_CLAIMS: Final = 40
BLOCK_KINDS: Final = frozenset({"code", "html"})
MAX_SEGMENTS: Final = 20
MIN_SHORT_TOKENS: Final = 24
MAX_BUDGET: Final = 200_000
ESTIMATE: Final = "ceil(utf8_bytes(canonical_json(item)) / 4)"


def estimate_tokens(value: Any) -> int:
    return math.ceil(len(canonical_json(value)) / 4)


def _claim_items(
    checker: Checker, conn: Any, terms: list[str], number: int
) -> list[dict[str, Any]]:
    searched, holding = searched_terms(conn, terms)
    chosen = choose(conn, searched, MAX_CLAIMS, holding)
    if not chosen:
        return []
    views = verify_chosen(checker, chosen, number, conn)
    items = []
    wanted = set(terms)
    for c in chosen:
        view = views[c.claim_id]
        statement_ev = next(e for e in view.evidence if e.role == "statement")
        # a chosen claim's terms were read by `rank` (its dedupe key)
        matched = sorted(wanted.intersection((c.dedupe_key or "").split()))
        why = [f"{view.authority} claim", f"relevance {c.score:.3f}"]
        if matched:
            why.append("says: " + ", ".join(matched))
        if statement_ev.heading_path:
            why.append("under: " + " › ".join(statement_ev.heading_path))
        items.append(
            {
                "kind": "claim",
                "id": view.id,
                "claim_hash": view.hash,
                "authority": view.authority,
                "status": view.status,
                "source_path": statement_ev.source_path,
                "segment_id": statement_ev.segment_id,
                "lines": {"start": statement_ev.line_start, "end": statement_ev.line_end},
                "span": {"start": statement_ev.start, "end": statement_ev.end},
                "text": statement_ev.excerpt,
                "excerpt_sha256": statement_ev.sha256,
                "citations": [
                    {
                        "source_path": e.source_path,
                        "lines": {"start": e.line_start, "end": e.line_end},
                        "excerpt": e.excerpt,
                        "excerpt_sha256": e.sha256,
                    }
                    for e in view.evidence
                    if e.role == "citation"
                ],
                "why": "; ".join(why),
                **record_fields(c.role, c.record_status),
            }
        )
    return items


def _segment_items(
    checker: Checker, conn: Any, terms: list[str], covered: set[str]
) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT d.object_id, d.object_hash, d.source_path, d.heading_path, d.segment_kind, "
        "d.role, d.record_status, bm25(segments_fts, ?, ?, ?) AS score FROM segments_fts f JOIN docs d ON d.rowid = f.rowid "
        "WHERE segments_fts MATCH ? ORDER BY score, d.object_id LIMIT ?",
        (*WEIGHTS, match_expression(terms), MAX_SEGMENTS * 3),
    ).fetchall()
    # Only blocks that are never claims (code, HTML): a prose block's sentences are claims,
    # which come above with their status, or stay out when they are not confirmed.
    rows = [r for r in rows if r[0] not in covered and r[4] in BLOCK_KINDS][:MAX_SEGMENTS]
    if not rows:
        return []
    ledger = chains.segment_texts(checker.reader, [r[0] for r in rows])
    items = []
    for seg_id, seg_hash, path, heading, kind, role, record_status, score in rows:
        row = ledger.get(seg_id)
        if row is None or row.sha256 != seg_hash:
            raise IntegrityError(
                f"fail closed: segment {seg_id} does not match the ledger",
                code="index_row_mismatch",
            )
        start, end, line_start, line_end, sha = (
            row.start,
            row.end,
            row.line_start,
            row.line_end,
            row.sha256,
        )
        raw = row.raw_blob
        text = checker.normalized_text(row.text_blob)
        if not isinstance(text, str):
            raise IntegrityError(f"fail closed: {text.message}", code=text.code)
        if sha256_hex(text[start:end]) != sha:
            raise IntegrityError(
                f"fail closed: segment {seg_id} text does not hash to its SHA-256",
                code="excerpt_mismatch",
            )
        raw_problem = checker.raw(raw)
        if raw_problem is not None:
            raise IntegrityError(f"fail closed: {raw_problem.message}", code=raw_problem.code)
        heading_path = json.loads(heading)
        why = [f"{kind} block", f"bm25 {-score:.3f}"]
        if heading_path:
            why.append("under: " + " › ".join(heading_path))
        items.append(
            {
                "kind": "segment",
                "id": seg_id,
                "segment_kind": kind,
                "source_path": path,
                "lines": {"start": line_start, "end": line_end},
                "span": {"start": start, "end": end},
                "text": text[start:end],
                "excerpt_sha256": sha,
                "why": "; ".join(why),
                **record_fields(role, record_status),
            }
        )
    return items


def _shorten(item: dict[str, Any], room: int) -> dict[str, Any] | None:
    """A prefix of the item's excerpt that fits in `room` tokens, cut at a word boundary."""
    text = item["text"]
    base = dict(
        item, text="", excerpt_sha256="0" * 64, shortened={"from_chars": len(text), "to_chars": 0}
    )
    if estimate_tokens(base) > room:
        base.pop("citations", None)  # a claim's citations go before its own text does
    overhead = estimate_tokens(base)
    budget_bytes = (room - overhead) * 4
    if budget_bytes <= 16:
        return None
    cut = text
    while len(cut.encode("utf-8")) > budget_bytes - 4:
        cut = cut[: max(1, int(len(cut) * 0.9))]
    space = cut.rfind(" ")
    if space > len(cut) // 2:
        cut = cut[:space]
    cut = cut.rstrip()
    if not cut:
        return None
    start = item["span"]["start"]
    short = dict(
        base,
        text=cut,
        excerpt_sha256=sha256_hex(cut),
        span={"start": start, "end": start + len(cut)},
    )
    short["shortened"] = {"from_chars": len(text), "to_chars": len(cut)}
    lines_start = item["lines"]["start"]
    short["lines"] = {"start": lines_start, "end": lines_start + cut.count("\n")}
    return short if estimate_tokens(short) <= room else None


def bundle(
    reader: Reader,
    blobs: BlobStore,
    index_dir: Path,
    task: str,
    *,
    max_tokens: int,
    generation: str | None = None,
) -> dict[str, Any]:
    started = time.perf_counter()
    if not 1 <= max_tokens <= MAX_BUDGET:
        raise UsageError(f"--max-tokens must be between 1 and {MAX_BUDGET}", code="invalid_budget")
    terms = parse_query(task)
    target, _current = target_generation(reader, generation, None)
    path = index_file.index_path(index_dir, target.number, target.hash)
    with index_file.open_index(path, target.hash, target.index_digest) as conn:
        # One checker for both: a blob cited by a claim and a block is hashed once.
        checker = Checker(reader, blobs)
        claims = _claim_items(checker, conn, terms, target.number)
        covered = {c["segment_id"] for c in claims}
        segments = _segment_items(checker, conn, terms, covered)

    items: list[dict[str, Any]] = []
    omitted: list[dict[str, str]] = []
    used = 0
    for candidate in [*claims, *segments]:
        entry = dict(candidate, rank=len(items) + 1, shortened=None)
        cost = estimate_tokens(entry)
        if used + cost > max_tokens:
            room = max_tokens - used
            short = _shorten(entry, room) if room >= MIN_SHORT_TOKENS else None
            if short is None:
                omitted.append(
                    {
                        "kind": candidate["kind"],
                        "id": candidate["id"],
                        "source_path": candidate["source_path"],
                    }
                )
                continue
            entry, cost = short, estimate_tokens(short)
        entry["tokens"] = cost
        items.append(entry)
        used += cost
    must_read = sorted(
        {i["source_path"] for i in items if i.get("authority") == "manual" or i["shortened"]}
    )
    result: dict[str, Any] = {
        "schema_version": "1",
        "task": task,
        "task_terms": terms,
        "generation": target.to_json(),
        "budget": {"max_tokens": max_tokens, "estimated_tokens": used, "estimate": ESTIMATE},
        "items": items,
        "omitted": omitted,
        "must_read": must_read,
    }
    result["bundle_sha256"] = hashlib.sha256(canonical_json(result)).hexdigest()
    result["timing"] = {"ms": round((time.perf_counter() - started) * 1000, 3)}
    return result
