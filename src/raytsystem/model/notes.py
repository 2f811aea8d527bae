"""Manual notes: what a note in `knowledge/manual/` says, parsed from its normalization alone.

A note is Markdown with optional YAML front matter (validated by `NoteMeta`). Each sentence of
its prose is a manual claim. A sentence may cite sources with footnotes whose definition is

    [^label]: <workspace-relative path> "<quote>"

(straight or curly double quotes; several `path "quote"` pairs may follow one another). The quote
is located later, per generation, in the cited source's current normalized text (`resolve.py`).
`[[Name]]` and `[[note-path]]` links are recorded with the claim they appear in.

`knowledge/manual/entities.md` is the entity registry: each list item `Name: one-line
description` (or `Name — description`) names an entity.

Everything here is a pure function of the note's bytes; it is stored as the note
normalization's `meta` so later generations can re-resolve citations without re-parsing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..canonical import sha256_hex
from .adapters import PROSE_KINDS, Normalized
from .claims import sentences
from .objects import ChainIds, ClaimRow, EvidenceRow, SegmentRow

ENTITIES_PATH: Final = "knowledge/manual/entities.md"
_CITATION: Final = re.compile(r'\s*(?P<path>[^\s"“”]+)\s+["“](?P<quote>[^"“”]+)["”]')
_ENTITY: Final = re.compile(r"^(?P<name>[^:—–]+?)\s*(?::|—|–| - )\s*(?P<description>.+)$", re.S)
_CLAIM_ID: Final = re.compile(r"^clm_[0-9a-f]{32}$")
# A footnote reference markdown-it left as text: its label has no definition.
_UNDEFINED_REF: Final = re.compile(r"\[\^([^\]\s]+)\]")


class NoteMeta(BaseModel):
    """The front matter of a manual note."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: str | None = None
    status: Literal["current", "draft", "outdated"] = "current"
    retracts: tuple[str, ...] = ()
    disputes: tuple[str, ...] = ()
    supersedes: tuple[str, ...] = ()
    tags: tuple[str, ...] = Field(default=())

    @field_validator("retracts", "disputes")
    @classmethod
    def _claim_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in value if not _CLAIM_ID.match(v)]
        if bad:
            raise ValueError(f"not claim IDs: {', '.join(map(repr, bad))}")
        return value


def parse_front_matter(text: str | None) -> tuple[NoteMeta, str | None]:
    """The note's metadata, or the defaults and an error message when it is invalid."""
    if text is None:
        return NoteMeta(), None
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return NoteMeta(), f"front matter is not valid YAML: {' '.join(str(exc).split())}"
    if data is None:
        return NoteMeta(), None
    if not isinstance(data, dict):
        return NoteMeta(), "front matter must be a mapping of keys to values"
    try:
        return NoteMeta.model_validate(data), None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'front matter'}: {err['msg']}"
            for err in exc.errors()
        )
        return NoteMeta(), f"front matter is invalid: {problems}"


def parse_citations(text: str) -> list[tuple[str, str]] | None:
    """`path "quote"` pairs of a footnote definition, or None if it does not follow the grammar."""
    pairs = []
    pos = 0
    body = " ".join(text.split())
    while pos < len(body):
        m = _CITATION.match(body, pos)
        if m is None:
            return None
        pairs.append((m.group("path"), m.group("quote")))
        pos = m.end()
        while pos < len(body) and body[pos] in " ,;":
            pos += 1
    return pairs or None


def parse_note(
    ids: ChainIds, path: str, source_id: str, normalized: Normalized, segments: list[SegmentRow]
) -> tuple[list[ClaimRow], list[EvidenceRow], dict[str, Any]]:
    """The claim rows, statement evidence and meta of a note (see module docstring)."""
    meta, error = parse_front_matter(normalized.front_matter)
    definitions = _footnote_definitions(normalized)
    text = normalized.text
    claims: list[ClaimRow] = []
    evidence: list[EvidenceRow] = []
    entries: list[dict[str, Any]] = []
    links: list[str] = []
    entities: list[dict[str, str]] = []
    occurrences: dict[str, int] = {}
    for ordinal, seg in enumerate(normalized.segments):
        links.extend(t for _, _, t in seg.links)
        if path == ENTITIES_PATH and seg.kind == "list_item":
            entity = _entity(text[seg.start : seg.end])
            if entity is not None:
                entities.append(entity)
        if seg.kind not in PROSE_KINDS or seg.kind == "footnote" or meta.status == "draft":
            continue
        seg_row = segments[ordinal]
        for sentence in sentences(text, seg, ordinal):
            occurrence = occurrences.get(sentence.statement, 0)
            occurrences[sentence.statement] = occurrence + 1
            cid = ids.claim_id(source_id, "manual", sentence.statement, occurrence)
            sha = sha256_hex(text[sentence.start : sentence.end])
            eid = ids.evidence_id(cid, seg_row.id, sentence.start, sentence.end, sha, "statement")
            claims.append(ClaimRow(cid, source_id, "manual", sentence.statement, occurrence))
            evidence.append(
                EvidenceRow(eid, cid, seg_row.id, sentence.start, sentence.end, sha, "statement")
            )
            citations, problems = _citations(
                sentence.refs, definitions, text[sentence.start : sentence.end]
            )
            rel_start = sentence.start - seg.start
            rel_end = sentence.end - seg.start
            entries.append(
                {
                    "id": cid,
                    "statement_evidence": eid,
                    "citations": citations,
                    "problems": problems,
                    "links": [t for s, e, t in seg.links if rel_start <= s and e <= rel_end],
                }
            )
    note_meta = {
        "note": meta.model_dump(mode="json"),
        "note_error": error,
        "claims": entries,
        "links": sorted(set(links)),
        "entities": entities,
    }
    return claims, evidence, note_meta


def _footnote_definitions(normalized: Normalized) -> dict[str, str]:
    """label -> the text of its footnote definition (the paragraphs of one label joined)."""
    definitions: dict[str, str] = {}
    for seg in normalized.segments:
        if seg.kind == "footnote" and seg.label is not None:
            body = normalized.text[seg.start : seg.end]
            definitions[seg.label] = (
                (definitions[seg.label] + " " + body) if seg.label in definitions else body
            )
    return definitions


def _entity(item: str) -> dict[str, str] | None:
    """The entity a list item of the registry names (`Name: description`), if it names one."""
    m = _ENTITY.match(" ".join(item.split()))
    if m is None:
        return None
    return {"name": m.group("name").strip(), "description": m.group("description").strip()}


def _citation(label: str, path: str, quote: str) -> dict[str, str]:
    """One citation: `path "quote"`, or `path::Symbol.name "quote"` for a quote that must lie
    inside that symbol of a source file (its span is in the file's normalization meta)."""
    path, sep, symbol = path.partition("::")
    cited = {"label": label, "path": path, "quote": quote}
    return {**cited, "symbol": symbol} if sep and symbol else cited


def _citations(
    refs: Sequence[str], definitions: dict[str, str], excerpt: str
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The citations of a sentence with footnote references `refs` and text `excerpt`, and
    the problems of those that cannot be read: no definition, or not `path "quote"`."""
    citations: list[dict[str, str]] = []
    problems: list[dict[str, str]] = []
    for label in refs:
        if label not in definitions:
            problems.append(
                {
                    "code": "citation_undefined",
                    "message": f"footnote [^{label}] has no definition",
                }
            )
            continue
        pairs = parse_citations(definitions[label])
        if pairs is None:
            problems.append(
                {
                    "code": "citation_malformed",
                    "message": f'footnote [^{label}] is not `path "quote"`: {definitions[label][:120]}',
                }
            )
            continue
        citations.extend(_citation(label, p, q) for p, q in pairs)
    for label in _UNDEFINED_REF.findall(excerpt):
        problems.append(
            {
                "code": "citation_undefined",
                "message": f"footnote [^{label}] has no definition",
            }
        )
    return citations, problems
