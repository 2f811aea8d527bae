"""QUERY: an answer made only of verified, confirmed claims of one generation, or nothing.

1. The question becomes a bounded list of literal terms (the same analysis as indexing); FTS5
   syntax, quotes, `NEAR`, `*` or SQL in the question are just characters, and terms are
   letters and digits only, quoted into the MATCH expression.
2. The generation's index is searched for the claims that may answer and their order
   (`ranking`: sources that hold enough of the question, claims that say something about it,
   ranked deterministically), and the answer's claims are picked from that order (`compose`:
   a relevance cliff, a cap per source that demotes, near-duplicates merged). None: a gap.
3. The chosen claims are checked down to the raw bytes (`chain.Checker`). Any mismatch fails
   the whole query closed: no answer, a stable code, exit status 3.
4. The answer is the statements joined with citation markers; every citation carries the span of
   its statement in the answer, in code points and in UTF-16 units, and the evidence of its
   merged near-duplicates (role `duplicate`); `sources` counts the sources drawn on.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..errors import IntegrityError, UsageError
from ..model.terms import is_han_bigram, query_terms, terms
from ..storage import chains, index_file
from ..storage.blobs import BlobStore
from ..storage.generations import GenerationRef, head, target_generation
from ..storage.reader import Reader
from .chain import Checker, ClaimView, EvidenceView
from .claim_scoring import vocabulary
from .compose import DEFAULT_PER_SOURCE, MAX_PER_SOURCE, compose_answer
from .meaning import JUDGED, READ, Fused
from .ranking import Candidate

if TYPE_CHECKING:
    from .meaning import Meaning

SCHEMA_VERSION: Final = "1"
MAX_QUERY_CHARS: Final = 2000
MAX_TERMS: Final = 32
DEFAULT_LIMIT: Final = 5
MAX_LIMIT: Final = 50


def parse_query(text: str) -> list[str]:
    """The distinct terms of a question, in order; raise on an unusable question."""
    if len(text) > MAX_QUERY_CHARS:
        raise UsageError(
            f"the question is {len(text)} characters long; the limit is {MAX_QUERY_CHARS}",
            code="query_too_long",
        )
    distinct = list(dict.fromkeys(query_terms(text)))
    if not distinct:
        # Only stop words ("the", "how is it"): nothing to look for, and matching them would
        # touch nearly every claim of a large knowledge base.
        reason = "only stop words" if terms(text) else "no searchable words"
        raise UsageError(f"the question has {reason}", code="query_empty")
    if len(distinct) > MAX_TERMS:
        raise UsageError(
            f"the question has {len(distinct)} distinct terms; the limit is {MAX_TERMS}",
            code="query_too_many_terms",
        )
    return distinct


def searched_terms(
    conn: sqlite3.Connection, query_terms: list[str]
) -> tuple[list[str], dict[str, int]]:
    """The terms `query` and `bundle` search for a question's terms (`word_terms`), and how
    many sources hold each of the question's terms (`vocabulary` of `sources_fts`)."""
    holding = vocabulary(conn, "sources_fts", query_terms)
    return word_terms(query_terms, holding), holding


def word_terms(query_terms: list[str], holding: Mapping[str, int]) -> list[str]:
    """The question's terms less those bigrams of a Chinese run that are taken to span two
    words (`holding`: how many sources hold each term, `vocabulary` of `sources_fts`).

    Chinese is written without spaces, and a question's run is overlapping bigrams (ADR 0036):
    in 搜索文本 ("search text"), 索文 spans 搜索 and 文本, and a line on 搜索文件 ("search
    files") holds it and 搜索, two of the three terms. A bigram across a word boundary is held
    only where the two words stand together, so it is rarer than the bigrams beside it; one
    inside a word is held wherever the word is. So a bigram between two others of its run is
    left out when fewer sources hold it than hold either of them. The index is unchanged."""
    out = []
    for i, term in enumerate(query_terms):
        if 0 < i < len(query_terms) - 1 and is_han_bigram(term):
            before, after = query_terms[i - 1], query_terms[i + 1]
            if (
                is_han_bigram(before)
                and is_han_bigram(after)
                and before[1] == term[0]
                and term[1] == after[0]
                and holding[term] < min(holding[before], holding[after])
            ):
                continue
        out.append(term)
    return out


def utf16_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-16-le")) // 2


@dataclass(frozen=True)
class Citation:
    """A cited claim: where its statement is in the answer, and its checked chain."""

    number: int
    start: int  # the statement's span in the answer, in code points
    end: int
    start_utf16: int  # the same span in UTF-16 code units, for JavaScript clients
    end_utf16: int
    claim: ClaimView
    role: str = ""  # its role in a decision record ("" outside records: no key in the JSON)
    record_status: str = ""  # that record's status ("" when it states none: no key)
    # Near-duplicates of the claim in other sources, merged into this citation (checked
    # like it): each gives evidence entries of role `duplicate` naming its own claim.
    merged: tuple[ClaimView, ...] = ()

    def sources(self) -> set[str]:
        """The sources this citation draws on: its claim's and its merged duplicates'."""
        return {self.claim.source_id, *(m.source_id for m in self.merged)}

    def entries(self) -> list[tuple[EvidenceView, str, ClaimView]]:
        """(evidence, its role, the claim it is of) of each evidence entry: the cited claim's,
        then the statement evidence of each merged near-duplicate, as `duplicate`."""
        own = [(e, e.role, self.claim) for e in self.claim.evidence]
        return own + [
            (e, "duplicate", m) for m in self.merged for e in m.evidence if e.role == "statement"
        ]

    def to_json(self) -> dict[str, Any]:
        view = self.claim
        claim: dict[str, Any] = {
            "id": view.id,
            "hash": view.hash,
            "status": view.status,
            "authority": view.authority,
            "statement": view.statement,
        }
        claim.update(record_fields(self.role, self.record_status))
        return {
            "id": self.number,
            "answer_span": {"start": self.start, "end": self.end},
            "answer_span_utf16": {"start": self.start_utf16, "end": self.end_utf16},
            "claim": claim,
            "evidence": [
                e.to_json()
                if of is view
                else {"role": role, "claim_id": of.id, "claim_hash": of.hash}
                | {k: v for k, v in e.to_json().items() if k != "role"}
                for e, role, of in self.entries()
            ],
        }


def record_fields(role: str, record_status: str) -> dict[str, str]:
    """What a cited claim of a decision record adds to its JSON: `role` and, when the record
    states one, `record_status`; nothing for a claim of any other source."""
    out = {"role": role} if role else {}
    if role and record_status:
        out["record_status"] = record_status
    return out


@dataclass(frozen=True)
class Answer:
    """What a query returns: an answer with its citations, or a gap (`status`)."""

    status: str  # "answered" | "gap"
    query: str
    query_terms: list[str]
    generation: GenerationRef
    answer: str
    citations: list[Citation]
    ms: float  # how long the query took
    # The question's words that no source of the generation holds (`unmatched_words`)
    unmatched_terms: list[str] = field(default_factory=list)
    # The meaning gap's judgement, when the workspace names a model (`Meaning.report`)
    meaning: dict[str, Any] | None = None

    def source_count(self) -> int:
        """How many distinct sources the answer draws on (merged duplicates' too)."""
        return len(set().union(*(c.sources() for c in self.citations)))

    def to_json(self) -> dict[str, Any]:
        """The query's JSON (schema_version "1"), the contract the README documents."""
        return {
            "schema_version": SCHEMA_VERSION,
            "status": self.status,
            "query": self.query,
            "query_terms": self.query_terms,
            "unmatched_terms": self.unmatched_terms,
            "generation": self.generation.to_json(),
            "answer": self.answer,
            "sources": self.source_count(),
            "citations": [c.to_json() for c in self.citations],
            **({"meaning": self.meaning} if self.meaning is not None else {}),
            "timing": {"ms": self.ms},
        }


def join_statements(
    chosen: list[Candidate], views: Mapping[str, ClaimView]
) -> tuple[str, list[Citation]]:
    """The answer text, the chosen claims' statements (their checked `views`, by claim ID)
    joined with citation markers, and its citations: each with the role and record status the
    index gives its claim, and its merged near-duplicates."""
    parts: list[str] = []
    spans = []
    length = 0
    for n, c in enumerate(chosen, start=1):
        if parts:
            parts.append(" ")
            length += 1
        statement, marker = views[c.claim_id].statement, f" [{n}]"
        spans.append((n, length, length + len(statement), c))
        parts += [statement, marker]
        length += len(statement) + len(marker)
    answer = "".join(parts)
    citations = [
        Citation(
            n,
            start,
            end,
            utf16_offset(answer, start),
            utf16_offset(answer, end),
            views[c.claim_id],
            c.role,
            c.record_status,
            tuple(views[m.claim_id] for m in c.merged),
        )
        for n, start, end, c in spans
    ]
    return answer, citations


def verify_chosen(
    checker: Checker, chosen: list[Candidate], number: int, index: sqlite3.Connection
) -> dict[str, ClaimView]:
    """The chains of the chosen claims and of their merged near-duplicates, checked down to
    the raw bytes; any mismatch fails closed.

    Also checks that each chosen claim's index row says what the ledger says (hash,
    statement, source), that the claim is confirmed (only confirmed claims may answer or
    enter a bundle), and that every row the index holds of the sources it cites hashes to
    the digest the ledger records for that source: an index row injected, edited or removed
    in a cited source (whatever index file it came from) fails the query closed.
    """
    every = [m for c in chosen for m in (c, *c.merged)]
    views, problems = checker.claims([c.claim_id for c in every], number)
    if problems:
        p = problems[0]
        raise IntegrityError(f"fail closed: {p.message}", code=p.code, subject=p.subject)
    for c in every:
        view = views[c.claim_id]
        if c.object_hash != view.hash or c.text != view.statement or c.source_id != view.source_id:
            raise IntegrityError(
                f"fail closed: the index row of claim {c.claim_id} does not match the ledger",
                code="index_row_mismatch",
                subject=c.claim_id,
            )
        if view.status != "confirmed":
            raise IntegrityError(
                f"fail closed: claim {c.claim_id} is {view.status}, not confirmed",
                code="index_row_mismatch",
                subject=c.claim_id,
            )
    cited = sorted({v.source_id for v in views.values()})
    altered = index_file.altered_sources(index, chains.index_digests(checker.reader, cited, number))
    if altered:
        raise IntegrityError(
            f"fail closed: the index rows of source {altered[0]} do not match the ledger",
            code="index_row_mismatch",
            subject=altered[0],
        )
    return views


def query(
    reader: Reader,
    blobs: BlobStore,
    index_dir: Path,
    text: str,
    *,
    limit: int = DEFAULT_LIMIT,
    per_source: int = DEFAULT_PER_SOURCE,
    generation: str | None = None,
    expect_generation: str | None = None,
    meaning: Meaning | None = None,
) -> Answer:
    """Answer `text` from the verified, confirmed claims of a generation (the current one
    unless `generation` names another), or a gap; fails closed on any mismatch. At most
    `limit` citations; a source's claims past `per_source` only where other sources leave
    room (`compose`); with `meaning`, a gap unless one of the first citations is alike in
    meaning to the question, and the first ones re-ordered by it (`meaning.py`, ADR 0043)."""
    from .. import faults

    started = time.perf_counter()
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"--limit must be between 1 and {MAX_LIMIT}", code="invalid_limit")
    if not 1 <= per_source <= MAX_PER_SOURCE:
        raise UsageError(
            f"--per-source must be between 1 and {MAX_PER_SOURCE}", code="invalid_per_source"
        )
    query_terms = parse_query(text)
    target, current = target_generation(reader, generation, expect_generation)
    path = index_file.index_path(index_dir, target.number, target.hash)
    answer, citations = "", list[Citation]()
    judged: dict[str, Any] | None = None
    with index_file.open_index(path, target.hash, target.index_digest) as conn:
        query_terms, found_in = searched_terms(conn, query_terms)
        unmatched = unmatched_words(text, [t for t in query_terms if not found_in[t]])
        if meaning is None:
            chosen = compose_answer(conn, query_terms, limit, per_source, found_in)
        else:
            chosen, judged = _by_meaning(
                meaning, conn, target.hash, text, query_terms, found_in, limit, per_source
            )
        faults.point("query.after_search")
        if chosen:
            views = verify_chosen(Checker(reader, blobs), chosen, target.number, conn)
            answer, citations = join_statements(chosen, views)
    if generation is None:
        reader.refresh()
        after = head(reader)
        if after != current:
            raise IntegrityError(
                "fail closed: the current generation moved while the query ran",
                code="generation_moved",
            )
    return Answer(
        "answered" if citations else "gap",
        text,
        query_terms,
        target,
        answer,
        citations,
        round((time.perf_counter() - started) * 1000, 3),
        unmatched,
        judged,
    )


def _by_meaning(
    meaning: Meaning,
    conn: sqlite3.Connection,
    generation: str,
    text: str,
    query_terms: list[str],
    found_in: dict[str, int],
    limit: int,
    per_source: int,
) -> tuple[list[Candidate], dict[str, Any]]:
    """The citations when the workspace names a model: the meaning gap judges instead of the
    word gaps (ADR 0043), and with the generation's vectors stored, meaning ranks too (ADR
    0044); otherwise the first citations are encoded and re-ordered. A question in a script
    the model does not read is answered by the words alone, word gaps included."""
    if not meaning.reads(text):  # a script the model does not read: the words alone
        chosen = compose_answer(conn, query_terms, limit, per_source, found_in)
        return chosen, meaning.report(None) | {"vectors": None, "read": False}
    store = meaning.stored(generation)
    if store is None:
        wanted = max(limit, READ)
        found = compose_answer(conn, query_terms, wanted, per_source, found_in, word_gaps=False)
        chosen, judged = meaning.judge(text, found, per_source)
        return chosen[:limit], judged | {"vectors": "query", "read": True}
    try:
        fused = Fused(meaning, store, conn, text)
        wanted = max(limit, JUDGED)  # the same ones judged at every limit
        found = compose_answer(
            conn,
            query_terms,
            wanted,
            per_source,
            found_in,
            word_gaps=False,
            rescore=fused.rescore,
            every_source=True,
        )
        chosen, judged = meaning.judge_ranked(found, fused)
    finally:
        store.close()
    return chosen[:limit], judged | {"vectors": "stored", "read": True}


def unmatched_words(text: str, missing: list[str]) -> list[str]:
    """The words of the question behind the `missing` terms, as the user wrote them, so
    that they can be rephrased: a word that is one term is given as written (`pipelines`,
    not the stem `pipelin`); a term made from part of a word (a compound's part, a CJK
    bigram) is given as the term."""
    words: list[str] = []
    for term in missing:
        word = next(
            (
                token
                for token in (t.strip(_PUNCTUATION) for t in text.split())
                if query_terms(token) == [term]
            ),
            term,
        )
        if word not in words:
            words.append(word)
    return words


_PUNCTUATION: Final = "\"'`“”‘’«»()[]{}<>.,;:!?¿¡。、，：；！？「」『』（）"
