"""The ledger's writes outside staging: immutable rows, a new generation with the head's move,
and the record of an ingest run. Each runs in the caller's transaction and commits nothing.

Immutable rows are content-addressed: a row whose ID is already there is the same row and is
skipped, so writing a file's rows twice (a retried ingest) is harmless.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Table, insert, update

from .. import faults
from ..errors import RaytError
from .db import insert_rows
from .generations import GenerationRef
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
