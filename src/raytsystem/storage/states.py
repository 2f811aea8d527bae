"""Reads of generation state from the ledger, shared by the operations.

"Active in generation N" means an interval row with `gen_from <= N < gen_to` (or `gen_to` NULL).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import ColumnElement, Connection, Table, and_, or_, select

from ..errors import NotFound, UsageError
from ..model.generation import ClaimState
from .tables import ClaimState as ClaimStateRow
from .tables import Generation, Head, Normalization, Revision, Source, SourceState

T = TypeVar("T")
GENERATIONS = Generation
CHUNK = 500


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@dataclass(frozen=True)
class GenerationRef:
    number: int
    hash: str
    parent_hash: str | None
    manifest_digest: str
    created_at: str
    source_count: int
    claim_count: int
    summary: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "hash": self.hash}


def _gen(row: Any) -> GenerationRef:
    return GenerationRef(
        number=row.number,
        hash=row.hash,
        parent_hash=row.parent_hash,
        manifest_digest=row.manifest_digest,
        created_at=row.created_at,
        source_count=row.source_count,
        claim_count=row.claim_count,
        summary=json.loads(row.summary),
    )


def head(conn: Connection) -> GenerationRef | None:
    row = conn.execute(
        select(GENERATIONS)
        .join(Head, Head.c.generation_hash == Generation.c.hash)
        .where(Head.c.name == "current")
    ).first()
    return None if row is None else _gen(row)


def require_head(conn: Connection) -> GenerationRef:
    current = head(conn)
    if current is None:
        raise NotFound(
            "the knowledge base has no generation yet: run `raytsystem ingest`",
            code="no_generation",
        )
    return current


def generation(conn: Connection, ref: str) -> GenerationRef:
    """A generation by number, full hash, or a unique hash prefix of 8+ hex digits."""
    ref = ref.strip().lower()
    if ref.isdigit():
        row = conn.execute(select(GENERATIONS).where(Generation.c.number == int(ref))).first()
    elif len(ref) >= 8 and all(c in "0123456789abcdef" for c in ref):
        rows = conn.execute(
            select(GENERATIONS).where(Generation.c.hash.startswith(ref, autoescape=True)).limit(2)
        ).all()
        if len(rows) > 1:
            raise UsageError(f"generation prefix {ref} is ambiguous", code="ambiguous_generation")
        row = rows[0] if rows else None
    else:
        raise UsageError(
            f"not a generation: {ref!r} (give a number or 8+ hex digits of its hash)",
            code="invalid_generation",
        )
    if row is None:
        raise NotFound(f"no generation {ref}", code="generation_not_found")
    return _gen(row)


def generation_or_head(conn: Connection, ref: str | None) -> GenerationRef:
    """The generation `ref` names, or the current one when `ref` is None."""
    return generation(conn, ref) if ref else require_head(conn)


def generations(conn: Connection) -> list[GenerationRef]:
    return [_gen(r) for r in conn.execute(select(GENERATIONS).order_by(Generation.c.number))]


def active(table: Table, number: int) -> ColumnElement[bool]:
    """Rows of a `*_states` table whose interval holds generation `number`."""
    gen_from, gen_to = table.c.gen_from, table.c.gen_to
    return and_(gen_from <= number, or_(gen_to.is_(None), gen_to > number))


class ActiveSource(NamedTuple):
    """A source active in a generation (a tuple: ingest reads one per file of the workspace)."""

    source_id: str
    path: str
    revision_id: str
    blob: str
    media_type: str
    normalization_id: str | None
    adapter: str | None  # "name@version/confighash"
    digest: str
    text_blob: str | None  # the normalized text's address


def active_sources(conn: Connection, number: int | None) -> dict[str, ActiveSource]:
    """Active sources of generation `number` by path (empty before the first generation)."""
    if number is None:
        return {}
    rows = conn.execute(
        select(
            SourceState.c.source_id,
            Source.c.path,
            SourceState.c.revision_id,
            Revision.c.blob,
            Revision.c.media_type,
            SourceState.c.normalization_id,
            Normalization.c.adapter,
            Normalization.c.adapter_version,
            Normalization.c.config_hash,
            SourceState.c.digest,
            Normalization.c.text_blob,
        )
        .join(Source, Source.c.id == SourceState.c.source_id)
        .join(Revision, Revision.c.id == SourceState.c.revision_id)
        .outerjoin(Normalization, Normalization.c.id == SourceState.c.normalization_id)
        .where(active(SourceState, number))
    )
    out = {}
    for sid, path, rev, blob, media, nid, name, version, config, digest, text in rows:
        adapter = None if name is None else f"{name}@{version}/{config}"
        out[path] = ActiveSource(sid, path, rev, blob, media, nid, adapter, digest, text)
    return out


def claim_states(
    conn: Connection, number: int, source_ids: Iterable[str]
) -> dict[str, list[tuple[int, ClaimState]]]:
    """Active claim states of the given sources: source ID -> [(row id, state)]."""
    out: dict[str, list[tuple[int, ClaimState]]] = {}
    ids = sorted(set(source_ids))
    for part in chunks(ids):
        rows = conn.execute(
            select(ClaimStateRow).where(
                ClaimStateRow.c.source_id.in_(part), active(ClaimStateRow, number)
            )
        )
        for r in rows:
            out.setdefault(r.source_id, []).append(
                (
                    r.id,
                    ClaimState(
                        r.claim_id,
                        r.source_id,
                        r.status,
                        r.claim_hash,
                        tuple(json.loads(r.evidence_ids)),
                    ),
                )
            )
    return out
