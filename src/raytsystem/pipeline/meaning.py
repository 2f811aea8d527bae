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
`READ`. The model is read from its folder once per session; nothing is downloaded, and
nothing about the knowledge base is stored: only the question and the chosen statements are
encoded, at query time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from ..config import MeaningConfig
from ..model.sentence_encoder import SentenceEncoder
from .compose import select
from .ranking import Candidate

# How many of the first citations are judged, and how many re-ordered by meaning, with what
# weight against relevance (up to 2) (measured: bench/retrieval.md, "Meaning").
JUDGED: Final = 10
READ: Final = 20
WEIGHT: Final = 2.0


@dataclass(frozen=True)
class Meaning:
    """A loaded model (`encoder`, read from `folder`) and the bar a citation must reach."""

    encoder: SentenceEncoder
    folder: Path
    min_similarity: float

    @classmethod
    def named(cls, root: Path, settings: MeaningConfig) -> Meaning:
        """The model a workspace's `[meaning]` table names (a folder relative to `root`)."""
        folder = Path(settings.model).expanduser()
        folder = folder if folder.is_absolute() else root / folder
        return cls(SentenceEncoder(folder), folder, settings.min_similarity)

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

    def settings(self) -> dict[str, Any]:
        """The model (its folder's name) and the bar, as the JSON of `query` and `eval` name them."""
        return {"model": self.folder.name, "min_similarity": self.min_similarity}

    def report(self, similarity: float | None) -> dict[str, Any]:
        """What an answer's JSON says of the judgement (`similarity` None: nothing to judge)."""
        rounded = None if similarity is None else round(similarity, 4)
        return {"model": self.folder.name, "similarity": rounded} | self.settings()
