"""Plain BM25 baselines that `eval` measures QUERY against, built from one generation.

Two throwaway in-memory SQLite FTS5 indexes, made from the generation the evaluation answers
from, so that a figure of raytsystem's and the baseline's are over the same texts:

- **sources**: one document per source, its whole normalized text (the blob its index row
  names), ranked by FTS5's `bm25()`: what "plain full-text search over whole files" finds;
- **sentences**: one document per confirmed claim of the generation (its statement, a sentence
  of a prose block, searched with its heading path, so that a sentence of a titled abstract
  or section is found by the words of its title as plain sentence search over titled
  documents finds it), ranked the same way: the baseline of evidence-sentence recall.

Both use FTS5's `porter` tokenizer over `unicode61` (English stemming; CJK runs stay whole
tokens, as plain FTS5 has them) and a question's English stop words (those of `terms.py`) are
dropped; the other words are each quoted and joined with OR, so no user text is an operator.
Nothing here is raytsystem's own analysis or ranking: it is the yardstick.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from dataclasses import dataclass
from typing import Final

from ..model.terms import STOPWORDS
from ..storage import chains
from ..storage.blobs import BlobStore
from ..storage.reader import Reader
from .encoding import heading_names

_WORD: Final = re.compile(r"[^\W_]+")
ENGLISH_STOPWORDS: Final = frozenset(w for w in STOPWORDS if w.isascii())


@dataclass(frozen=True)
class Hit:
    path: str
    text: str  # a sentence's statement; "" for a whole source


def baseline_expression(question: str) -> str | None:
    """The FTS5 MATCH expression of a question: its words less English stop words, quoted and
    joined with OR; None when nothing is left."""
    folded = unicodedata.normalize("NFKC", question).casefold()
    words = [w for w in dict.fromkeys(_WORD.findall(folded)) if w not in ENGLISH_STOPWORDS]
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


class Baseline:
    """The two BM25 indexes of one generation (see the module docstring)."""

    def __init__(
        self, sources: list[tuple[str, str]], sentences: list[tuple[str, str, str]]
    ) -> None:
        """`sources`: (path, whole text); `sentences`: (path, heading path, statement)."""
        self.conn = sqlite3.connect(":memory:")
        tokenize = "tokenize='porter unicode61'"
        self.conn.execute(
            f"CREATE VIRTUAL TABLE sources USING fts5(path UNINDEXED, body, {tokenize})"
        )
        self.conn.execute(
            f"CREATE VIRTUAL TABLE sentences USING fts5(path UNINDEXED, heading, body, {tokenize})"
        )
        self.conn.executemany("INSERT INTO sources(path, body) VALUES (?, ?)", sources)
        self.conn.executemany(
            "INSERT INTO sentences(path, heading, body) VALUES (?, ?, ?)", sentences
        )
        self.source_count = len(sources)
        self.sentence_count = len(sentences)

    def close(self) -> None:
        self.conn.close()

    def _search(self, table: str, question: str, limit: int) -> list[Hit]:
        expression = baseline_expression(question)
        if expression is None:
            return []
        # Ties are settled by path and text, so the baseline is as deterministic as QUERY.
        return [
            Hit(path, body if table == "sentences" else "")
            for path, body in self.conn.execute(
                f"SELECT path, body FROM {table} WHERE {table} MATCH ? "
                f"ORDER BY bm25({table}), path, body LIMIT ?",
                (expression, limit),
            )
        ]

    def sources(self, question: str, limit: int) -> list[str]:
        """The paths of the `limit` best sources by BM25 over their whole text."""
        return [h.path for h in self._search("sources", question, limit)]

    def sentences(self, question: str, limit: int) -> list[Hit]:
        """The `limit` best sentences (confirmed claims, with their heading paths) by BM25."""
        return self._search("sentences", question, limit)


def build_baseline(conn: sqlite3.Connection, reader: Reader, blobs: BlobStore) -> Baseline:
    """The baselines of the generation whose index `conn` is.

    The index names each source's normalization (its source row) and holds each confirmed
    claim's statement; the normalized texts come from their blobs, found through the ledger."""
    named = conn.execute(
        "SELECT source_path, object_hash FROM docs WHERE kind = 'source' ORDER BY source_path"
    ).fetchall()
    text_blob: dict[str, str] = {}
    ids = sorted({nid for _, nid in named})
    text_blob.update(
        (nid, row.text_blob)
        for nid, row in chains.normalizations(reader, ids).items()
        if row.text_blob
    )
    sources = [
        (path, blobs.get(text_blob[nid]).decode("utf-8")) for path, nid in named if nid in text_blob
    ]
    sentences = conn.execute(
        "SELECT source_path, heading_path, text FROM docs WHERE kind = 'claim' "
        "AND status = 'confirmed' ORDER BY source_path, object_id"
    ).fetchall()
    return Baseline(sources, [(p, heading_names(h), t) for p, h, t in sentences])
