"""The generations: the one generation type, the head, and a generation by reference.

Plain SQL through `reader.Rows`, so the query's stdlib-sqlite3 reader and a command's
SQLAlchemy connection read them the same way, and a query never imports SQLAlchemy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import IntegrityError, NotFound, UsageError
from ..model.generation import generation_hash
from .index_file import DIGESTS_OF_THIS_FORMAT
from .reader import Rows, as_rows

if TYPE_CHECKING:
    from sqlalchemy import Connection


@dataclass(frozen=True)
class GenerationRef:
    """A generation as the ledger records it."""

    number: int
    hash: str
    parent_hash: str | None
    manifest_digest: str
    created_at: str
    source_count: int
    claim_count: int
    summary: dict[str, Any]
    # Its index's rows digest: None before migration 0004, or recorded for another index format.
    index_digest: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "hash": self.hash}


# Plain SQL, so that the query's stdlib-sqlite3 reader and a SQLAlchemy connection run the same.
_GENERATION = (
    "SELECT g.number, g.hash, g.parent_hash, g.manifest_digest, g.created_at, g.source_count, "
    f"g.claim_count, g.summary, CASE WHEN {DIGESTS_OF_THIS_FORMAT} THEN g.index_digest END "
    "FROM generations g "
)
_HEAD = _GENERATION + "JOIN head h ON h.generation_hash = g.hash WHERE h.name = 'current'"
# A generation number is a SQL integer: more digits than this cannot name one.
_MAX_NUMBER_DIGITS = 18


def _gen(row: Sequence[Any]) -> GenerationRef:
    number, ghash, parent, manifest, created, sources, claims, summary, index_digest = row
    return GenerationRef(
        number, ghash, parent, manifest, created, sources, claims, json.loads(summary), index_digest
    )


def head(ledger: Rows | Connection) -> GenerationRef | None:
    """The current generation, or None before the first one."""
    rows = as_rows(ledger).rows(_HEAD)
    return _gen(rows[0]) if rows else None


def require_head(ledger: Rows | Connection) -> GenerationRef:
    current = head(ledger)
    if current is None:
        raise NotFound(
            "the knowledge base has no generation yet: run `raytsystem ingest`",
            code="no_generation",
        )
    return current


def generation(ledger: Rows | Connection, ref: str) -> GenerationRef:
    """A generation by number (ASCII digits), full hash, or a unique hash prefix of 8+ hex
    digits."""
    rows = as_rows(ledger)
    wanted = ref.strip().lower()
    if wanted.isascii() and wanted.isdigit():
        if len(wanted) > _MAX_NUMBER_DIGITS:
            raise UsageError(
                f"not a generation: {ref!r} has more digits than a generation number can",
                code="invalid_generation",
            )
        found = rows.rows(_GENERATION + "WHERE g.number = :n", {"n": int(wanted)})
    elif len(wanted) >= 8 and all(c in "0123456789abcdef" for c in wanted):
        found = rows.rows(
            _GENERATION + "WHERE g.hash >= :lo AND g.hash < :hi ORDER BY g.number LIMIT 2",
            {"lo": wanted, "hi": wanted + "g"},
        )
        if len(found) > 1:
            raise UsageError(
                f"generation prefix {wanted} is ambiguous", code="ambiguous_generation"
            )
    else:
        raise UsageError(
            f"not a generation: {ref!r} (give a number or 8+ hex digits of its hash)",
            code="invalid_generation",
        )
    if not found:
        raise NotFound(f"no generation {wanted}", code="generation_not_found")
    return _gen(found[0])


def generation_or_head(ledger: Rows | Connection, ref: str | None) -> GenerationRef:
    """The generation `ref` names, or the current one when `ref` is None."""
    return generation(ledger, ref) if ref is not None else require_head(ledger)


def _fail_if_forged(gen: GenerationRef) -> GenerationRef:
    if generation_hash(gen.number, gen.parent_hash, gen.manifest_digest) != gen.hash:
        raise IntegrityError(
            f"fail closed: generation {gen.number} does not hash to its recorded hash",
            code="ledger_mismatch",
            subject=gen.hash,
        )
    return gen


def checked_head(ledger: Rows | Connection) -> GenerationRef:
    """The current generation for an answer: the head must name a generation the ledger has,
    the newest one, whose row hashes to its hash; anything else fails closed
    (`ledger_mismatch`)."""
    rows = as_rows(ledger)
    current = head(rows)
    if current is None:
        if rows.rows("SELECT generation_hash FROM head WHERE name = 'current'"):
            raise IntegrityError(
                "fail closed: the head names a generation the ledger does not have",
                code="ledger_mismatch",
            )
        return require_head(rows)
    (newest,) = rows.rows("SELECT max(number) FROM generations")[0]
    if newest != current.number:
        raise IntegrityError(
            f"fail closed: the head is at generation {current.number}, but the newest "
            f"generation is {newest}",
            code="ledger_mismatch",
        )
    return _fail_if_forged(current)


def target_generation(
    ledger: Rows | Connection, ref: str | None, expect: str | None
) -> tuple[GenerationRef, GenerationRef]:
    """(the generation to answer from, the current one), both checked (`checked_head`); fails
    closed with `generation_stale` when `expect` (8+ hex digits of a hash) is not the current
    one's."""
    current = checked_head(ledger)
    if expect is not None:
        wanted = expect.strip().lower()
        if len(wanted) < 8 or not all(c in "0123456789abcdef" for c in wanted):
            raise UsageError(
                f"--expect-generation takes 8 to 64 hex digits of a generation's hash, not "
                f"{expect!r}",
                code="invalid_generation",
            )
        if not current.hash.startswith(wanted):
            raise IntegrityError(
                f"expected generation {wanted}, but the current generation is "
                f"{current.number} {current.hash}",
                code="generation_stale",
                expected=wanted,
                current=current.hash,
            )
    if ref is None:
        return current, current
    return _fail_if_forged(generation(ledger, ref)), current


def generations(ledger: Rows | Connection) -> list[GenerationRef]:
    return [_gen(r) for r in as_rows(ledger).rows(_GENERATION + "ORDER BY g.number")]
