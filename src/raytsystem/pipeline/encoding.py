"""Encode a generation's claims and sources with the model `[meaning]` names (ADR 0044).

After an ingest, whether or not it made a generation, every claim of the current generation
has two texts encoded: its statement alone (what it says: the meaning gap judges it) and its
statement in context, after its heading path (`in_context`: what it is about, which ranks
it). Each text without a vector of this model gets one, and every source without one gets the
normalized mean of its claims' vectors in context (`storage/vectors.py`). Only texts never
encoded before are run through the model: a re-ingest that changed one file encodes that
file's new sentences. Vectors are written a chunk at a time, so an encoding cut short keeps
what it did and the next ingest goes on from there. Once all are there, the store records
the generation as encoded, and queries of it rank by meaning (`meaning.py`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..progress import Progress
from ..storage import index_file
from ..storage.vectors import VectorStore, text_key

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from ..model.sentence_encoder import SentenceEncoder
    from ..storage.generations import GenerationRef

CHUNK: Final = 256  # texts encoded, then stored, at a time


def encode_generation(
    encoder: SentenceEncoder,
    state_dir: Path,
    index_dir: Path,
    generation: GenerationRef,
    progress: Progress | None = None,
) -> int:
    """Give the generation's claims and sources their vectors; how many texts were encoded
    (0 when the store had them all)."""
    path = index_file.index_path(index_dir, generation.number, generation.hash)
    with (
        VectorStore.opened(state_dir, encoder.digest, encoder.width) as store,
        index_file.open_index(path, generation.hash) as conn,
    ):
        # What is missing is looked up even for a generation marked encoded: a store that
        # lost rows is mended by the next ingest.
        texts = claim_texts(conn)
        todo = sorted(texts.keys() - store.known(texts))
        for done, chunk in enumerate(_chunks(todo), 1):
            vectors = encoder.encode([texts[k] for k in chunk])
            store.add(zip(chunk, (v.astype("<f4").tobytes() for v in vectors), strict=True))
            if progress:
                progress("encode", min(done * CHUNK, len(todo)), len(todo), 0)
        _encode_sources(conn, store, encoder)
        store.mark(generation.hash)
        return len(todo)


def claim_texts(conn: sqlite3.Connection) -> dict[bytes, str]:
    """Every text of an index's claims, by its name: each statement alone and in context."""
    return {
        text_key(text): text
        for heading_path, statement in conn.execute(
            "SELECT heading_path, text FROM docs WHERE kind = 'claim'"
        )
        for text in (statement, in_context(heading_path, statement))
    }


def heading_names(heading_path: str) -> str:
    """A claim's headings (`heading_path`: the index's JSON array) joined as one line,
    "Payments / Refunds"; "" when it has none."""
    try:
        headings = json.loads(heading_path) if heading_path else []
    except ValueError:
        headings = [heading_path]
    return " / ".join(h.strip() for h in headings if isinstance(h, str) and h.strip())


def in_context(heading_path: str, statement: str) -> str:
    """A claim's statement after its headings (`heading_names`), "Payments / Refunds:
    Refunds are paid ..."; the statement alone when it has none."""
    names = heading_names(heading_path)
    return f"{names}: {statement}" if names else statement


def _encode_sources(conn: sqlite3.Connection, store: VectorStore, encoder: SentenceEncoder) -> None:
    """Each source without a vector gets the normalized mean of its claims' (a source
    without claims gets none)."""
    digests = dict(conn.execute("SELECT source_id, digest FROM source_digests"))
    missing = set(digests.values()) - store.known_sources(digests.values())
    if missing:
        means = source_means(conn, store.read, encoder.numpy, missing)
        store.add_sources((d, v.astype("<f4").tobytes()) for d, v in means)


def source_means(
    conn: sqlite3.Connection,
    read: Callable[[list[bytes]], Mapping[bytes, bytes]],
    np_: Any,
    wanted: set[str] | None = None,
) -> Iterator[tuple[str, NDArray[np.float32]]]:
    """(source digest, the normalized mean of its claims' vectors in context) for each source of the
    index with claims (of the `wanted` digests only, when given); `read` gives the vectors
    of text hashes, and must give each."""
    digests = dict(conn.execute("SELECT source_id, digest FROM source_digests"))
    for source_id, low, high in conn.execute(
        "SELECT source_id, low, high FROM blocks ORDER BY low"
    ).fetchall():
        digest = digests.get(source_id)
        if digest is None or (wanted is not None and digest not in wanted):
            continue
        keys = [
            text_key(in_context(h, t))
            for h, t in conn.execute(
                "SELECT heading_path, text FROM docs WHERE rowid BETWEEN ? AND ? "
                "AND kind = 'claim'",
                (low, high),
            )
        ]
        if not keys:
            continue
        found = read(keys)
        vectors = np_.frombuffer(b"".join(found[k] for k in keys), "<f4").reshape(len(keys), -1)
        mean = vectors.sum(0)
        mean /= np_.linalg.norm(mean) or 1.0
        yield str(digest), mean


def _chunks(keys: list[bytes]) -> Iterator[list[bytes]]:
    for start in range(0, len(keys), CHUNK):
        yield keys[start : start + CHUNK]
