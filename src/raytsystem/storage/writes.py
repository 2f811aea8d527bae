"""The ledger's writes outside staging: immutable rows, a new generation with the head's move,
and the record of an ingest run. Each runs in the caller's transaction and commits nothing.

Immutable rows are content-addressed: a row whose ID is already there is the same row and is
skipped, so writing a file's rows twice (a retried ingest) is harmless.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Table, bindparam, insert, or_, text, update

from .. import faults
from ..errors import RaytError
from .db import insert_rows
from .generations import GenerationRef
from .index_file import DIGESTS_OF_THIS_FORMAT, FORMAT
from .tables import (
    Claim,
    Evidence,
    Generation,
    Head,
    IngestRun,
    Normalization,
    Revision,
    Segment,
    Source,
    SourceState,
)

Row = tuple[Any, ...]


def as_row(table: Table, **values: Any) -> Row:
    """A row as a tuple in its table's column order (a missing or extra value is a KeyError)."""
    columns = [c.name for c in table.columns]
    if len(values) != len(columns):
        raise KeyError(f"{table.name}: {sorted(set(values) ^ set(columns))}")
    return tuple(values[c] for c in columns)


@dataclass
class ObjectRows:
    """Rows of the immutable tables, each a tuple in its table's column order."""

    sources: list[Row] = field(default_factory=list)
    revisions: list[Row] = field(default_factory=list)
    normalizations: list[Row] = field(default_factory=list)
    segments: list[Row] = field(default_factory=list)
    claims: list[Row] = field(default_factory=list)
    evidence: list[Row] = field(default_factory=list)

    def add_file(
        self,
        source: tuple[str, str],
        revision: tuple[str, str, int, str],
        normalization: dict[str, Any],
        seen_at: str,
    ) -> None:
        """A new file's source (ID, path), revision (ID, blob, size, media type) and
        normalization (its row as a dict of columns), first seen at `seen_at`."""
        source_id, path = source
        revision_id, blob, size, media_type = revision
        self.sources.append(as_row(Source, id=source_id, path=path, first_seen_at=seen_at))
        self.revisions.append(
            as_row(
                Revision,
                id=revision_id,
                source_id=source_id,
                blob=blob,
                size=size,
                media_type=media_type,
                first_seen_at=seen_at,
            )
        )
        self.normalizations.append(as_row(Normalization, **normalization))


def insert_objects(conn: Connection, rows: ObjectRows) -> None:
    """Insert immutable rows, parents first; rows already there are skipped."""
    for table, part in (
        (Source, rows.sources),
        (Revision, rows.revisions),
        (Normalization, rows.normalizations),
        (Segment, rows.segments),
        (Claim, rows.claims),
        (Evidence, rows.evidence),
    ):
        _insert_ignore(conn, table, part)


def _insert_ignore(conn: Connection, table: Table, rows: Sequence[Row]) -> None:
    insert_rows(conn, table.name, [c.name for c in table.columns], rows, existing="skip")


def commit_generation(
    conn: Connection, generation: GenerationRef, current: GenerationRef | None
) -> None:
    """Insert `generation` and move the head to it from `current` (None: no head yet). Fails
    with `generation_moved` if the head is no longer at `current`."""
    conn.execute(
        insert(Generation),
        {
            "hash": generation.hash,
            "number": generation.number,
            "parent_hash": generation.parent_hash,
            "manifest_digest": generation.manifest_digest,
            "created_at": generation.created_at,
            "source_count": generation.source_count,
            "claim_count": generation.claim_count,
            "summary": json.dumps(generation.summary, sort_keys=True, ensure_ascii=False),
            "index_digest": generation.index_digest,
        },
    )
    faults.point("ingest.before_head")
    if current is None:
        record_index_format(conn)  # the first generation: every digest is of this format
        conn.execute(
            insert(Head),
            {"name": "current", "generation_hash": generation.hash, "number": generation.number},
        )
        return
    moved = conn.execute(
        update(Head)
        .where(Head.c.name == "current", Head.c.generation_hash == current.hash)
        .values(generation_hash=generation.hash, number=generation.number)
    )
    if moved.rowcount != 1:
        raise RaytError("the head moved during ingest", code="generation_moved")


def record_ingest_run(
    conn: Connection,
    started_at: str,
    finished_at: str,
    generation_hash: str | None,
    summary: dict[str, Any],
) -> None:
    conn.execute(
        insert(IngestRun),
        {
            "started_at": started_at,
            "finished_at": finished_at,
            "generation_hash": generation_hash,
            "summary": json.dumps(summary, ensure_ascii=False, sort_keys=True),
        },
    )


def record_index_format(conn: Connection) -> None:
    """Name this raytsystem's index format as the one the ledger's index digests are of."""
    conn.execute(text("DELETE FROM settings WHERE name = 'index_format'"))
    insert_rows(conn, "settings", ("name", "value"), [("index_format", FORMAT)])


def digests_of_this_format(conn: Connection) -> bool:
    """Whether the ledger's index digests are of this raytsystem's index format."""
    return bool(conn.execute(text(f"SELECT {DIGESTS_OF_THIS_FORMAT}")).scalar())


def rerecord_index_digests(
    conn: Connection, number: int, rows_digest: str, per_source: Mapping[str, str]
) -> None:
    """Make the ledger's index digests those of this index format (ADR 0041): generation
    `number`'s and its active source states' are the given ones (an index of it this format
    wrote, derived from the ledger alone), every other one is forgotten (NULL: a query then
    compares an index of those with its own records, as before migration 0004)."""
    conn.execute(update(SourceState).values(index_digest=None))
    conn.execute(update(Generation).values(index_digest=None))
    conn.execute(
        update(Generation).where(Generation.c.number == number).values(index_digest=rows_digest)
    )
    active = (
        update(SourceState)
        .where(
            SourceState.c.source_id == bindparam("b_source"),
            SourceState.c.gen_from <= number,
            or_(SourceState.c.gen_to.is_(None), SourceState.c.gen_to > number),
        )
        .values(index_digest=bindparam("b_digest"))
    )
    if per_source:
        conn.execute(
            active, [{"b_source": s, "b_digest": d} for s, d in sorted(per_source.items())]
        )
    record_index_format(conn)
