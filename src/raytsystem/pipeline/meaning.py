"""The meaning gap (ADR 0043): an answer whose first citations say nothing like the question is
a gap, judged by a sentence-embedding model the workspace names (`[meaning] model`).

The words rules (`meeting`, `ranking`) decide which claims may answer from the words they
share with the question. A question about something the knowledge base does not hold still
meets some of its words somewhere ("What is the capital city of Australia?" asked of
biomedical abstracts: a survey "conducted in the capital city" of Belarus). A sentence
encoder reads what a sentence is about, not which words it has: the question and each of the
first `JUDGED` citations the words rules chose become unit vectors, and when no citation's
cosine similarity with the question reaches `min_similarity`, the answer is a gap.

The first `JUDGED` citations are judged whatever `--limit` asks, so the same question on the
same generation is answered or not alike at every limit. An answer that is given has its first
`READ` citations (encoded with them) re-ordered by their relevance plus `WEIGHT` times their
similarity, within their tiers (manual claims and decisions in force first, retired records'
claims last) and with the composition's cap per source applied again (`compose.select`): a
line that says what the question asks comes before one that has more of its words. An
answer's `--limit` citations are the first of that order, drawn from the composition's first
`READ`. The model is read from its folder once per session; nothing is downloaded.

When the store holds the generation's vectors (ADR 0044: an ingest made them), meaning ranks
as well as judges (`Fused`): the question alone is encoded, each of the first `FUSED`
candidates gains its source's and its own similarity with the question before the answer is
composed, the other claims of the first `ANSWERING_SOURCES` sources join them by meaning, and
the first `JUDGED` citations of that order the words found are judged with their stored
vectors. Otherwise the question and the chosen statements are encoded at query time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..config import MeaningConfig
from ..errors import IntegrityError
from ..model import scripts as writing
from ..model.sentence_encoder import SentenceEncoder
from ..storage.vectors import VectorStore, is_unit, text_key
from .claim_scoring import rowid_list
from .compose import select
from .encoding import in_context
from .ranking import EXTRACTED, Candidate

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

# How many of the first citations are judged, and how many re-ordered by meaning, with what
# weight against relevance (up to 2) (measured: bench/retrieval.md, "Meaning").
JUDGED: Final = 10
READ: Final = 20
WEIGHT: Final = 2.0
# With the generation's vectors stored (ADR 0044): how many of the best candidates by words
# are read with their vectors; how many claims of their sources at most (past that, a
# source's best similarity is its candidates'); and what each similarity adds to relevance
# (measured: bench/retrieval.md, "Stored vectors").
FUSED: Final = 1000
SOURCE_CLAIMS: Final = 4000
SOURCE_MEAN_WEIGHT: Final = 1.0
SOURCE_BEST_WEIGHT: Final = 2.0
CLAIM_WEIGHT: Final = 1.0
# The first this many sources of the rescored order are read whole: their claims that hold
# too few of the question's words, up to `SOURCE_EXTRA` of each (its most similar in
# context), join the candidates (`Fused.rescore`).
ANSWERING_SOURCES: Final = 2
SOURCE_EXTRA: Final = 20


@dataclass(frozen=True)
class Meaning:
    """A loaded model (`encoder`, read from `folder`) and the bar a citation must reach."""

    encoder: SentenceEncoder
    folder: Path
    min_similarity: float
    state_dir: Path  # where the workspace's vector store is (`storage/vectors.py`)
    scripts: frozenset[str] | None = None  # the scripts it reads (`model/scripts.py`); None: all

    @classmethod
    def named(cls, root: Path, settings: MeaningConfig, state_dir: Path) -> Meaning:
        """The model a workspace's `[meaning]` table names (a folder relative to `root`)."""
        folder = Path(settings.model).expanduser()
        folder = folder if folder.is_absolute() else root / folder
        encoder = SentenceEncoder(folder)
        read = writing.scripts_read(writing.declared_languages(folder))
        return cls(encoder, folder, settings.min_similarity, state_dir, read)

    def reads(self, question: str) -> bool:
        """Whether the model reads the question's script (`model/scripts.py`): otherwise its
        similarities are noise, and the words alone answer."""
        return writing.reads(self.scripts, question)

    def stored(self, generation: str) -> VectorStore | None:
        """The vector store, when it holds every vector of the generation (its hash); the
        caller closes it."""
        store = VectorStore.reading(self.state_dir, self.encoder.digest, self.encoder.width)
        if store is not None and not store.covers(generation):
            store.close()
            return None
        return store

    def similarities(self, question: str, statements: Sequence[str]) -> list[float]:
        """The cosine similarity of the question with each statement."""
        vectors = self.encoder.encode([question, *statements])
        return [float(x) for x in vectors[1:] @ vectors[0]]

    def judge(
        self, question: str, chosen: list[Candidate], per_source: int
    ) -> tuple[list[Candidate], dict[str, Any]]:
        """The citations (`chosen`: the composition's, in its order), their first `READ`
        re-ordered by meaning, or none when none of the first `JUDGED` is alike in meaning
        to the question; with the judgement for the answer's JSON (`report`)."""
        if not chosen:
            return chosen, self.report(None)
        head = chosen[:READ]
        alike = self.similarities(question, [c.text for c in head])
        best = max(alike[:JUDGED])
        if best < self.min_similarity:
            return [], self.report(best)
        fused = [replace(c, score=c.score + WEIGHT * a) for c, a in zip(head, alike, strict=True)]
        walk = sorted(fused, key=lambda c: (c.tier, -round(c.score, 9)))  # ties keep their order
        # The composition's cap per source again, over the new relevance (`compose.select`).
        return select(walk, len(head), per_source) + chosen[READ:], self.report(best)

    def vectors_for(self, generation: str) -> str:
        """ "stored" when the generation's vectors are (its queries rank with them), else
        "query" (its first citations are encoded at query time), as the JSON says it."""
        store = self.stored(generation)
        if store is None:
            return "query"
        store.close()
        return "stored"

    def judge_ranked(
        self, chosen: list[Candidate], fused: Fused
    ) -> tuple[list[Candidate], dict[str, Any]]:
        """The citations ranked with the stored vectors (`Fused`), or none when none of the
        first `JUDGED` (whatever the limit) that are `judged`, or carry a `judged`
        near-duplicate, is alike in meaning to the question; with the judgement. A claim of a
        source that holds too little of the question, or one `Fused` added for its meaning
        alone, is never judged: a question whose words meet nowhere in what it asks is a gap
        whatever such lines say."""
        judged = [m.rowid for c in chosen[:JUDGED] for m in (c, *c.merged) if m.judged]
        if not judged:
            return [], self.report(None)
        best = max(fused.similarities(judged).values())
        return ([] if best < self.min_similarity else chosen), self.report(best)

    def settings(self) -> dict[str, Any]:
        """The model (its folder's name) and the bar, as the JSON of `query` and `eval` name them."""
        return {"model": self.folder.name, "min_similarity": self.min_similarity}

    def report(self, similarity: float | None) -> dict[str, Any]:
        """What an answer's JSON says of the judgement (`similarity` None: nothing to judge)."""
        rounded = None if similarity is None else round(similarity, 4)
        return {"model": self.folder.name, "similarity": rounded} | self.settings()


def _rank_key(c: Candidate) -> tuple[int, float, str]:
    """The order `Fused` reads candidates and their sources in: tier, relevance, then the
    source's ID (never the rowid, which a rebuilt index may give otherwise)."""
    return (c.tier, -round(c.score, 9), c.source_id)


class Fused:
    """One question's similarities with the claims and sources of a generation whose vectors
    are stored (ADR 0044), added to the relevance of the candidates the words found: a
    source by its claims in context (`encoding.in_context`: what they are about), a claim
    itself, and the meaning gap's judgement, by its statement alone (what it says)."""

    def __init__(
        self, meaning: Meaning, store: VectorStore, conn: sqlite3.Connection, question: str
    ) -> None:
        self._np = meaning.encoder.numpy
        self._store, self._conn = store, conn
        self._question: NDArray[np.float32] = meaning.encoder.encode([question])[0]
        self._about: dict[int, float] = {}  # claim rowid -> similarity in context
        self._says: dict[int, float] = {}  # claim rowid -> similarity of the statement alone
        self._whole: dict[str, list[int]] = {}  # source -> its claim rowids, when all were read

    def rescore(self, found: list[Candidate]) -> list[Candidate]:
        """Add meaning to the relevance of the first `FUSED` candidates (and those tied with
        the last): `SOURCE_MEAN_WEIGHT` x the similarity of their source's vector,
        `SOURCE_BEST_WEIGHT` x that of its most similar claim in context, `CLAIM_WEIGHT` x
        that of their own statement.

        Then the claims of the first `ANSWERING_SOURCES` sources of that order (those read
        whole, within `SOURCE_CLAIMS`) that are not candidates (they hold too few of the
        question's words), up to `SOURCE_EXTRA` of each, join them, not `judged`: a source
        that answers may say it in other words than the question's. Each gets the words'
        relevance of its source's least relevant candidate and the same three similarities;
        it ranks no higher than an extracted claim."""
        ranked = sorted(found, key=_rank_key)
        if len(ranked) > FUSED:
            edge = (ranked[FUSED - 1].tier, round(ranked[FUSED - 1].score, 9))
            ranked = [
                c for i, c in enumerate(ranked) if i < FUSED or (c.tier, round(c.score, 9)) == edge
            ]
        sources = list(dict.fromkeys(c.source_id for c in ranked))
        best = self._best_by_source(ranked, sources)
        mean = self._source_similarities(sources)
        says = self.similarities(c.rowid for c in ranked)
        words: dict[str, float] = {}  # source -> its least relevant candidate's words' relevance
        tiers: dict[str, int] = {}  # source -> its candidates' last tier
        for c in ranked:
            words[c.source_id] = min(words.get(c.source_id, c.score), c.score)
            tiers[c.source_id] = max(tiers.get(c.source_id, EXTRACTED), c.tier)
            c.score += (
                SOURCE_MEAN_WEIGHT * mean[c.source_id]
                + SOURCE_BEST_WEIGHT * best[c.source_id]
                + CLAIM_WEIGHT * says[c.rowid]
            )
        return found + self._answering(ranked, {c.rowid for c in found}, words, tiers, mean, best)

    def _answering(
        self,
        ranked: list[Candidate],
        found: set[int],
        words: dict[str, float],
        tiers: dict[str, int],
        mean: dict[str, float],
        best: dict[str, float],
    ) -> list[Candidate]:
        """The claims `rescore` adds (see there) to the rescored `ranked` candidates."""
        order = dict.fromkeys(c.source_id for c in sorted(ranked, key=_rank_key))
        extra: dict[int, str] = {}
        for source_id in list(order)[:ANSWERING_SOURCES]:
            others = [r for r in self._whole.get(source_id, []) if r not in found]
            others.sort(key=lambda r: (-self._about[r], r))
            extra.update((r, source_id) for r in others[:SOURCE_EXTRA])
        says = self.similarities(extra)
        return [
            Candidate(
                "",
                source_id,
                words[source_id]
                + SOURCE_MEAN_WEIGHT * mean[source_id]
                + SOURCE_BEST_WEIGHT * best[source_id]
                + CLAIM_WEIGHT * says[rowid],
                None,
                rowid,
                tiers[source_id],
                judged=False,
            )
            for rowid, source_id in extra.items()
        ]

    def similarities(self, rowids: Iterable[int]) -> dict[int, float]:
        """rowid -> the similarity of the claim's statement alone with the question (what the
        meaning gap judges); a statement without its vector fails closed (`vector_missing`)."""
        # An empty heading path: the statement alone (`_similar`).
        return self._read(rowids, self._says, "SELECT rowid, '', text FROM docs")

    def _in_context(self, rowids: Iterable[int]) -> dict[int, float]:
        """rowid -> the similarity of the claim in context with the question."""
        return self._read(rowids, self._about, "SELECT rowid, heading_path, text FROM docs")

    def _read(self, rowids: Iterable[int], known: dict[int, float], query: str) -> dict[int, float]:
        wanted = list(dict.fromkeys(rowids))
        unread = [r for r in wanted if r not in known]
        if unread:
            rows = self._conn.execute(f"{query} WHERE rowid IN ({rowid_list(unread)})")
            self._similar(rows.fetchall(), known)
        return {r: known[r] for r in wanted}

    def _similar(self, rows: Sequence[tuple[int, str, str]], known: dict[int, float]) -> None:
        """Fill `known` with the similarity of each (rowid, heading path, statement): in
        context when a heading path is given, of the statement alone when it is ""."""
        keys = [text_key(in_context(h, t)) for _, h, t in rows]
        found = self._store.read(keys)
        lost = [r for (r, _, _), k in zip(rows, keys, strict=True) if k not in found]
        if lost:
            raise _missing(f"the claim of index row {lost[0]}")
        for (r, _, _), k in zip(rows, keys, strict=True):
            known[r] = self._similarity(found[k])

    def _best_by_source(self, ranked: list[Candidate], sources: list[str]) -> dict[str, float]:
        """Each source's best claim similarity (in context): over all its claims, for the
        sources (in rank order) whose claims fit in `SOURCE_CLAIMS`; over its candidates for
        the rest."""
        blocks = {
            source_id: (low, high)
            for source_id, low, high in self._conn.execute(
                "SELECT source_id, low, high FROM blocks WHERE source_id IN "
                f"({','.join('?' * len(sources))})",
                sources,
            )
        }
        best: dict[str, float] = {}
        budget = SOURCE_CLAIMS
        for source_id in sources:
            low, high = blocks[source_id]
            if high - low + 1 > budget:
                continue
            rows = self._conn.execute(
                "SELECT rowid, heading_path, text FROM docs WHERE rowid BETWEEN ? AND ? "
                "AND kind = 'claim'",
                (low, high),
            ).fetchall()
            budget -= len(rows)
            self._similar(rows, self._about)
            self._whole[source_id] = [r for r, _, _ in rows]
            best[source_id] = max(self._about[r] for r, _, _ in rows)
        about = self._in_context(c.rowid for c in ranked if c.source_id not in best)
        for c in ranked:
            if c.rowid in about:
                best[c.source_id] = max(best.get(c.source_id, -1.0), about[c.rowid])
        return best

    def _source_similarities(self, sources: list[str]) -> dict[str, float]:
        digests = dict(
            self._conn.execute(
                "SELECT source_id, digest FROM source_digests WHERE source_id IN "
                f"({','.join('?' * len(sources))})",
                sources,
            )
        )
        found = self._store.read_sources(list(digests.values()))
        out = {}
        for source_id in sources:
            vector = found.get(digests.get(source_id, ""))
            if vector is None:
                raise _missing(f"source {source_id}")
            out[source_id] = self._similarity(vector)
        return out

    def _similarity(self, vector: bytes) -> float:
        """The cosine of a stored unit vector with the question's; a vector that is not of
        unit length was not made by the encoder, and fails closed (`vector_invalid`)."""
        v = self._np.frombuffer(vector, "<f4")
        if not is_unit(float(v @ v)):
            raise IntegrityError(
                "fail closed: a stored vector is not of unit length",
                code="vector_invalid",
                subject="vector store",
            )
        return float(v @ self._question)


def _missing(what: str) -> IntegrityError:
    return IntegrityError(
        f"fail closed: the vector of {what} is not in the store, which records this "
        "generation as encoded; run `raytsystem ingest` to encode again",
        code="vector_missing",
        subject=what,
    )
