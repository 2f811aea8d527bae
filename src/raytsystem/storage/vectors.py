"""Sentence vectors kept between queries (ADR 0044): `.raytsystem/vectors.sqlite3`.

A claim's vector is named by the model that made it (`SentenceEncoder.digest`: the model's
bytes and the encoder's version) and the SHA-256 of the UTF-8 statement it encodes, so it
serves every claim that states those words, in any source, revision or generation, and never
a statement or a model it was not made from. A source's vector, the normalized mean of its
claims' vectors, is named by the model and the digest of the source's index rows (the
`source_digests` an index file records, which the ledger holds too). Vectors are float32,
little-endian, of the model's width.

`encoded` records the generations whose every claim has its vector here: only for those does a
query rank by the stored vectors (`pipeline/meaning.py`), and a vector missing or malformed
for one of their claims fails the query closed (`vector_missing`, `vector_invalid`).

The store is derived data, like an index file: it can be deleted at any time (the next ingest
encodes again), and writers only add rows, so two ingests may add the same vector at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from ..errors import IntegrityError

FILE_NAME: Final = "vectors.sqlite3"
# Vectors live in rowid tables, several to a page, found through a unique index on their
# name: in a WITHOUT ROWID table a 1.5 KB row spills to an overflow page of its own, which
# made the store four times its vectors' size. A model is a small number in the rows.
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS models (id INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE)",
    "CREATE TABLE IF NOT EXISTS vectors (model INTEGER NOT NULL, text_hash BLOB NOT NULL, "
    "vector BLOB NOT NULL)",
    "CREATE UNIQUE INDEX IF NOT EXISTS vectors_name ON vectors (model, text_hash)",
    "CREATE TABLE IF NOT EXISTS source_vectors (model INTEGER NOT NULL, digest TEXT NOT NULL, "
    "vector BLOB NOT NULL)",
    "CREATE UNIQUE INDEX IF NOT EXISTS source_vectors_name ON source_vectors (model, digest)",
    "CREATE TABLE IF NOT EXISTS encoded (model INTEGER NOT NULL, generation TEXT NOT NULL, "
    "PRIMARY KEY (model, generation)) WITHOUT ROWID",
)
# Ten 1.5 KB vectors fill a 16 KB page; two fill a 4 KB one and leave a quarter of it empty.
PAGE_SIZE: Final = 16384
_CHUNK: Final = 500  # keys per SELECT ... IN (...)
# Where each kind of vector is: a claim text's by its hash, a source's by its digest.
_TABLES: Final = {False: ("vectors", "text_hash"), True: ("source_vectors", "digest")}


UNIT_TOLERANCE: Final = 1e-3  # how far a stored vector's squared length may be from 1


def is_unit(squared_length: float) -> bool:
    """Whether a vector of this squared length is one the encoder made: finite, of unit
    length (a NaN fails too)."""
    return math.isfinite(squared_length) and abs(squared_length - 1.0) <= UNIT_TOLERANCE


def text_key(text: str) -> bytes:
    """The name of a text's vector: SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).digest()


class VectorStore:
    """One model's vectors in a workspace's store (see the module's docstring)."""

    def __init__(self, conn: sqlite3.Connection, model: str, width: int) -> None:
        self._conn = conn
        self.model = model
        self.width = width
        found = conn.execute("SELECT id FROM models WHERE digest = ?", (model,)).fetchone()
        self._id: int = found[0] if found else -1  # -1: no vector of this model is here

    @classmethod
    @contextlib.contextmanager
    def opened(cls, state_dir: Path, model: str, width: int) -> Iterator[VectorStore]:
        """The store for writing (made when missing)."""
        state_dir.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(state_dir / FILE_NAME, timeout=30.0)
        try:
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new file's only
            conn.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute("INSERT OR IGNORE INTO models (digest) VALUES (?)", (model,))
            conn.commit()
            yield cls(conn, model, width)
        finally:
            conn.close()

    @classmethod
    def reading(cls, state_dir: Path, model: str, width: int) -> VectorStore | None:
        """The store for reading, or None when there is none (nothing was ever encoded).
        The caller closes it (`close`)."""
        path = state_dir / FILE_NAME
        if not path.exists():
            return None
        try:
            conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
            conn.execute("SELECT 1 FROM encoded LIMIT 1").fetchall()
            return cls(conn, model, width)
        except sqlite3.Error as exc:
            raise IntegrityError(
                f"fail closed: the vector store {path} cannot be read ({exc}); delete it and "
                "run `raytsystem ingest` to encode again",
                code="vector_invalid",
                subject=str(path),
            ) from exc

    def close(self) -> None:
        self._conn.close()

    def covers(self, generation: str) -> bool:
        """Whether every claim and source of the generation (its hash) has its vector here."""
        found = self._conn.execute(
            "SELECT 1 FROM encoded WHERE model = ? AND generation = ?", (self._id, generation)
        ).fetchone()
        return found is not None

    def mark(self, generation: str) -> None:
        """Record that every claim and source of the generation has its vector here."""
        self._conn.execute(
            "INSERT OR IGNORE INTO encoded (model, generation) VALUES (?, ?)",
            (self._id, generation),
        )
        self._conn.commit()

    def known(self, keys: Iterable[bytes]) -> set[bytes]:
        """Which of the statement hashes have a vector."""
        return self._known(keys, False)

    def known_sources(self, digests: Iterable[str]) -> set[str]:
        """Which of the source digests have a vector."""
        return self._known(digests, True)

    def add(self, rows: Iterable[tuple[bytes, bytes]]) -> None:
        """Store (statement hash, vector bytes) rows, in one transaction."""
        self._add(rows, False)

    def add_sources(self, rows: Iterable[tuple[str, bytes]]) -> None:
        """Store (source digest, vector bytes) rows, in one transaction."""
        self._add(rows, True)

    def read(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """statement hash -> vector bytes, for each that has a vector (one not of this
        model's width fails closed: `vector_invalid`)."""
        return self._read(keys, False)

    def read_sources(self, digests: Sequence[str]) -> dict[str, bytes]:
        """source digest -> vector bytes, as `read`."""
        return self._read(digests, True)

    def _known(self, keys: Iterable[Any], of_sources: bool) -> set[Any]:
        table, column = _TABLES[of_sources]
        found: set[Any] = set()
        for chunk in _chunks(list(keys)):
            found.update(
                k
                for (k,) in self._conn.execute(
                    f"SELECT {column} FROM {table} WHERE model = ? AND {column} IN "
                    f"({','.join('?' * len(chunk))})",
                    (self._id, *chunk),
                )
            )
        return found

    def _add(self, rows: Iterable[tuple[Any, bytes]], of_sources: bool) -> None:
        table, column = _TABLES[of_sources]
        size = 4 * self.width
        with self._conn:
            for key, vector in rows:
                if len(vector) != size:
                    raise ValueError(f"a vector of {len(vector)} bytes, not {size}")
                self._conn.execute(
                    f"INSERT OR IGNORE INTO {table} (model, {column}, vector) VALUES (?, ?, ?)",
                    (self._id, key, vector),
                )

    def _read(self, keys: Sequence[Any], of_sources: bool) -> dict[Any, bytes]:
        table, column = _TABLES[of_sources]
        out: dict[Any, bytes] = {}
        size = 4 * self.width
        for chunk in _chunks(list(dict.fromkeys(keys))):
            for key, vector in self._conn.execute(
                f"SELECT {column}, vector FROM {table} WHERE model = ? AND {column} IN "
                f"({','.join('?' * len(chunk))})",
                (self._id, *chunk),
            ):
                if not isinstance(vector, bytes) or len(vector) != size:
                    name = key.hex() if isinstance(key, bytes) else key
                    raise IntegrityError(
                        f"fail closed: a stored vector is not {size} bytes ({table} {name})",
                        code="vector_invalid",
                        subject=f"vector {name}",
                    )
                out[key] = vector
        return out


def _chunks(keys: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(keys), _CHUNK):
        yield keys[start : start + _CHUNK]
