"""Tombstones: the ledger's record of purged blobs (table `tombstones`, ADR 0040).

Reads take a `Rows` (the query's sqlite3 reader, or a SQLAlchemy connection through
`as_rows`), so the query's chain check and verify read them the same way; SQLAlchemy is
imported only by the writer's functions (the query path does without it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .reader import Rows, as_rows, expand

if TYPE_CHECKING:
    from sqlalchemy import Connection


class TombstoneRecord(NamedTuple):
    address: str
    kind: str  # "raw" | "text"
    raw: str  # the raw blob whose purge removed it
    reason: str
    purged_at: str
    generation_number: int | None
    generation_hash: str | None

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


_COLUMNS = "address, kind, raw, reason, purged_at, generation_number, generation_hash"


def tombstones(source: Rows | Connection, addresses: Sequence[str]) -> dict[str, TombstoneRecord]:
    """The tombstones of these addresses (those that have one)."""
    found: dict[str, TombstoneRecord] = {}
    rows = as_rows(source)
    for i in range(0, len(addresses), 500):
        clause, params = expand("a", list(addresses[i : i + 500]))
        for row in rows.rows(
            f"SELECT {_COLUMNS} FROM tombstones WHERE address IN ({clause})", params
        ):
            found[row[0]] = TombstoneRecord(*row)
    return found


def of_raw(source: Rows | Connection, raw: str) -> list[TombstoneRecord]:
    """The tombstones one raw blob's purge recorded (itself and its texts)."""
    rows = as_rows(source).rows(
        f"SELECT {_COLUMNS} FROM tombstones WHERE raw = :raw ORDER BY kind, address",
        {"raw": raw},
    )
    return [TombstoneRecord(*r) for r in rows]


def purged_addresses(source: Rows | Connection) -> set[str]:
    """Every purged address (few: a purge is a rare, deliberate act)."""
    return {r[0] for r in as_rows(source).rows("SELECT address FROM tombstones")}


def record(conn: Connection, records: Iterable[TombstoneRecord]) -> None:
    from sqlalchemy import insert

    from .tables import Tombstone

    rows = [r._asdict() for r in records]
    if rows:
        conn.execute(insert(Tombstone), rows)


def raw_blobs_of_source(conn: Connection, source_id: str) -> list[str]:
    """The raw blobs of every revision of a source."""
    from sqlalchemy import select

    from .tables import Revision

    return sorted(
        set(conn.scalars(select(Revision.c.blob).where(Revision.c.source_id == source_id)))
    )


def is_raw_blob(conn: Connection, address: str) -> bool:
    from sqlalchemy import select

    from .tables import Revision

    found = conn.execute(select(Revision.c.id).where(Revision.c.blob == address).limit(1))
    return found.first() is not None


def texts_of_raw(conn: Connection, raw: str) -> list[str]:
    """The normalized text blobs made from the raw blob `raw` (by any adapter)."""
    from sqlalchemy import select

    from .tables import Normalization, Revision

    stmt = (
        select(Normalization.c.text_blob)
        .join(Revision, Revision.c.id == Normalization.c.revision_id)
        .where(Revision.c.blob == raw, Normalization.c.text_blob.is_not(None))
    )
    return sorted(set(conn.scalars(stmt)))


def raws_of_text(conn: Connection, text: str) -> list[str]:
    """The raw blobs a normalized text blob was made from."""
    from sqlalchemy import select

    from .tables import Normalization, Revision

    stmt = (
        select(Revision.c.blob)
        .join(Normalization, Revision.c.id == Normalization.c.revision_id)
        .where(Normalization.c.text_blob == text)
    )
    return sorted(set(conn.scalars(stmt)))
