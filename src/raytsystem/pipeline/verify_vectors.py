"""VERIFY's check of the stored vectors (ADR 0044), when the workspace names a model.

For the current generation, when the store records it as encoded: every text of its claims
(each statement alone and in context, `encoding.in_context`) has a vector of the model's width
and of unit length; every source's vector is the normalized mean of its claims' in context
(recomputed from them); and `SAMPLE` texts drawn at random are encoded again and must give
their stored vectors. A query reads only the vectors it ranks with, and can tell a missing or
malformed one but not one replaced by another unit vector: this sample can, with a chance
that grows with the share replaced (drawn afresh each run). A generation the store does not
record as encoded is reported as a note: its queries encode their first citations instead.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..errors import IntegrityError
from ..storage import index_file
from ..storage.generations import GenerationRef
from ..storage.vectors import FILE_NAME, VectorStore, is_unit
from .encoding import claim_texts, source_means
from .verify_report import VerifyReport

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from .meaning import Meaning

SAMPLE: Final = 64  # texts encoded again
TOLERANCE: Final = 1e-4  # how far a component of a vector encoded again may move


def check_vectors(
    meaning: Meaning,
    state_dir: Path,
    index_dir: Path,
    current: GenerationRef | None,
    report: VerifyReport,
) -> None:
    if current is None:
        return
    store = None
    try:
        store = VectorStore.reading(state_dir, meaning.encoder.digest, meaning.encoder.width)
        if store is None or not store.covers(current.hash):
            report.add(
                "note",
                "vectors_not_encoded",
                f"generation {current.number}",
                f"the vector store holds no vectors of generation {current.number} by model "
                f"{meaning.folder.name}: `raytsystem ingest` encodes them",
            )
            return
        path = index_file.index_path(index_dir, current.number, current.hash)
        with index_file.open_index(path, current.hash) as conn:
            _check_generation(meaning, conn, store, report)
    except IntegrityError as exc:
        report.add("error", exc.code, "vector store", str(exc))
    except sqlite3.Error as exc:
        report.add(
            "error",
            "vector_invalid",
            "vector store",
            f"the vector store cannot be read ({exc}): delete .raytsystem/{FILE_NAME} and run "
            "`raytsystem ingest` to encode again",
        )
    finally:
        if store is not None:
            store.close()


def _check_generation(
    meaning: Meaning, conn: sqlite3.Connection, store: VectorStore, report: VerifyReport
) -> None:
    np_ = meaning.encoder.numpy
    texts = claim_texts(conn)
    found = store.read(list(texts))
    for key in texts.keys() - found.keys():
        report.add(
            "error", "vector_missing", f"text {key.hex()}", f"no vector of {texts[key][:80]!r}"
        )
    vectors = {k: np_.frombuffer(v, "<f4") for k, v in found.items()}
    for key, v in vectors.items():
        if not is_unit(float(v @ v)):
            report.add(
                "error",
                "vector_invalid",
                f"text {key.hex()}",
                "a stored vector is not of unit length",
            )
    report.counts["vectors"] = len(found)
    _check_sample(meaning, texts, vectors, report)
    if len(vectors) == len(texts):  # else a source's mean cannot be made (reported above)
        _check_sources(conn, store, vectors, report, np_)


def _check_sample(
    meaning: Meaning,
    statements: dict[bytes, str],
    vectors: dict[bytes, NDArray[np.float32]],
    report: VerifyReport,
) -> None:
    """`SAMPLE` texts, drawn at random, encoded again: each must give its stored vector."""
    drawn = random.sample(sorted(vectors), min(SAMPLE, len(vectors)))
    if not drawn:
        return
    again = meaning.encoder.encode([statements[k] for k in drawn])
    for key, vector in zip(drawn, again, strict=True):
        if not float(abs(vectors[key] - vector).max()) <= TOLERANCE:  # NaN too
            report.add(
                "error",
                "vector_mismatch",
                f"text {key.hex()}",
                f"the stored vector of {statements[key][:80]!r} is not the model's",
            )
    report.counts["vectors_encoded_again"] = len(drawn)


def _check_sources(
    conn: sqlite3.Connection,
    store: VectorStore,
    vectors: dict[bytes, NDArray[np.float32]],
    report: VerifyReport,
    np_: Any,
) -> None:
    """Each source's stored vector is the normalized mean of its claims' vectors."""
    means = dict(source_means(conn, lambda keys: {k: vectors[k].tobytes() for k in keys}, np_))
    stored = store.read_sources(list(means))
    for digest, mean in means.items():
        vector = stored.get(digest)
        if vector is None:
            report.add("error", "vector_missing", f"source {digest}", "no vector of the source")
        elif not float(abs(np_.frombuffer(vector, "<f4") - mean).max()) <= TOLERANCE:
            report.add(
                "error",
                "vector_mismatch",
                f"source {digest}",
                "the source's stored vector is not the mean of its claims'",
            )
