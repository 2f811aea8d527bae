"""Reads of generation state from the ledger, shared by the operations.

"Active in generation N" means an interval row with `gen_from <= N < gen_to` (or `gen_to` NULL).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple, TypeVar

from sqlalchemy import ColumnElement, Connection, Table, and_, or_, select

from ..errors import IntegrityError
from ..model.generation import ClaimState, read_state_evidence
from .tables import ClaimState as ClaimStateRow
from .tables import Normalization, Revision, Source, SourceState

T = TypeVar("T")
CHUNK = 500


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


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
                        tuple(state_evidence_of(f"row {r.id} of claim_states", r.evidence_ids)),
                    ),
                )
            )
    return out


def state_evidence_of(whose: str, recorded: str) -> list[str]:
    """`read_state_evidence`, or an IntegrityError (ledger_mismatch) naming `whose` state."""
    value = read_state_evidence(recorded)
    if value is None:
        raise IntegrityError(
            f"{whose}: its evidence IDs are not a JSON array of IDs", code="ledger_mismatch"
        )
    return value
