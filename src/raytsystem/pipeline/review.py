"""REVIEW: an audit of one generation that reports what needs a person's attention.

A review reads the ledger and the blobs and writes a Review: a list of findings (code,
severity, subjects, message) stored in the ledger and as `ops/reviews/<number>-<hash12>.json`
plus a readable `.md`. It never changes a claim, a status or a generation; people act on it by
editing `knowledge/manual/` and re-ingesting. The same generation always gives the same
findings, the same Review ID and byte-identical files (no time is written into them).

Checks:
- `unverified_claim`: a manual claim whose citation could not be verified (with the reason);
- `stale_citation`: a manual citation that was verified in an earlier generation and whose
  quote is gone from the cited source's current revision;
- `duplicate_statement`: the same statement (3+ words, case and spacing aside) in several sources;
- `possible_contradiction` (heuristic): claims that say the same words about the same thing but
  differ in their numbers or in negation;
- `retracted_still_cited` / `disputed_still_cited`: a current note cites text whose claim is
  retracted or disputed;
- `dead_link`: a `[[link]]` in a note that names no entity and no note;
- `unknown_claim_id`: a retraction or dispute naming a claim that is not active;
- `front_matter_invalid`: a note whose front matter is not valid;
- `normalize_failed`: an active source that could not be normalized;
- `personal_data`: an active source whose file holds e-mail addresses or phone numbers: how
  many of each and on which lines, never the values (unless `[ingest] personal_data` is
  "allow").
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..canonical import canonical_json
from ..errors import RaytError
from ..ids import make_id
from ..model.personal import scan_personal
from ..model.text import NotText, decode
from ..storage import generations, reviews, views
from ..storage import states as state
from ..storage.blobs import BlobStore
from ..storage.views import ActiveClaim
from ..workspace import is_note
from .files import now_iso
from .manual_notes import MESSAGES, Note, Texts, link_exists, locate, notes_from_ledger

if TYPE_CHECKING:
    from sqlalchemy import Connection

SEVERITY_ORDER: Final = {"error": 0, "warning": 1, "info": 2}
_WORD: Final = re.compile(r"[^\W_]+")
_NUMBER: Final = re.compile(r"^\d+(?:[.,]\d+)*$")
NEGATIONS: Final = frozenset(
    [
        "not",
        "no",
        "never",
        "none",
        "nothing",
        "cannot",
        "cant",
        "isnt",
        "arent",
        "doesnt",
        "dont",
        "didnt",
        "wont",
        "wasnt",
        "werent",
        "не",
        "нет",
        "никогда",
        "ни",
    ]
)
_HEURISTIC: Final = "heuristic: same words, different numbers or negation; check by hand"


@dataclass(frozen=True, order=True)
class ReviewFinding:
    severity_rank: int
    code: str
    subjects: tuple[str, ...]
    message: str

    def to_json(self) -> dict[str, Any]:
        severity = next(k for k, v in SEVERITY_ORDER.items() if v == self.severity_rank)
        return {
            "code": self.code,
            "severity": severity,
            "subjects": list(self.subjects),
            "message": self.message,
        }


def _finding(severity: str, code: str, subjects: list[str], message: str) -> ReviewFinding:
    return ReviewFinding(SEVERITY_ORDER[severity], code, tuple(subjects), message)


def _shape(statement: str) -> tuple[str, tuple[str, ...], bool]:
    """(words with numbers masked and negations dropped, the numbers, negated?)."""
    words = [w.casefold() for w in _WORD.findall(statement.replace("'", "").replace("’", ""))]
    numbers = tuple(w for w in words if _NUMBER.match(w))
    negated = any(w in NEGATIONS for w in words)
    key = " ".join("#" if _NUMBER.match(w) else w for w in words if w not in NEGATIONS)
    return key, numbers, negated


def audit(
    conn: Connection,
    blobs: BlobStore,
    generation: generations.GenerationRef,
    personal_data: str = "report",
) -> list[ReviewFinding]:
    """What a review of `generation` finds, in order (severity, code, subjects)."""
    number = generation.number
    # A claim whose source row is missing is left out (verify reports the dangling reference).
    claims = [c for c in views.active_claims(conn, number) if c.path is not None]
    sources = state.active_sources(conn, number)
    notes = notes_from_ledger(conn, [a for a in sources.values() if is_note(a.path)])
    paths = {a.path: a.normalization_id for a in sources.values()}
    texts = Texts(conn, blobs, paths)
    by_id = {c.claim_id: c for c in claims}
    findings = [
        *_note_findings(conn, texts, notes, paths, by_id, number),
        *_duplicates(claims),
        *_possible_contradictions(claims),
        *_withdrawn_still_cited(conn, claims, by_id),
        *_normalize_failures(conn, number),
        *(_personal_data(blobs, sources.values()) if personal_data != "allow" else ()),
    ]
    return sorted(set(findings))


def _note_findings(
    conn: Connection,
    texts: Texts,
    notes: dict[str, Note],
    paths: dict[str, str | None],
    by_id: dict[str, ActiveClaim],
    number: int,
) -> Iterator[ReviewFinding]:
    """Manual notes: why a claim is unverified and whether a once-verified citation went
    stale, invalid front matter, dead links, retractions or disputes of unknown claims.
    `paths`: the active sources' paths and normalizations."""
    for note in sorted(notes.values(), key=lambda n: n.path):
        for entry in note.meta["claims"]:
            claim = by_id.get(entry["id"])
            if claim is not None and claim.status == "unverified":
                yield from _unverified(conn, texts, note, entry, claim, number)
        if note.meta.get("note_error"):
            yield _finding("error", "front_matter_invalid", [note.path], note.meta["note_error"])
        for link in note.meta["links"]:
            if not link_exists(link, notes, paths):
                yield _finding("warning", "dead_link", [note.path], f"[[{link}]] links to nothing")
        for cid in sorted(note.directives()):
            if cid not in by_id:
                yield _finding(
                    "warning",
                    "unknown_claim_id",
                    [cid, note.path],
                    f"{note.path} retracts or disputes {cid}, which is not an active claim",
                )


def _unverified(
    conn: Connection,
    texts: Texts,
    note: Note,
    entry: dict[str, Any],
    claim: ActiveClaim,
    number: int,
) -> Iterator[ReviewFinding]:
    """Why a manual claim is unverified; whether a quote it cited was verified before."""
    reasons = [p["message"] for p in entry["problems"]]
    stale = False
    for citation in entry["citations"]:
        outcome, hit = locate(texts, citation["path"], citation["quote"], citation.get("symbol"))
        if hit is None:
            reasons.append(MESSAGES[outcome].format(**citation))
            stale = stale or (
                outcome in ("citation_not_found", "citation_drifted")
                and reviews.cited_before(conn, claim.claim_id, number)
            )
    if note.meta.get("note_error"):
        reasons.append(note.meta["note_error"])
    yield _finding(
        "warning",
        "unverified_claim",
        [claim.claim_id, note.path],
        f"{claim.statement!r}: " + "; ".join(reasons or ["its citation could not be verified"]),
    )
    if stale:
        yield _finding(
            "warning",
            "stale_citation",
            [claim.claim_id, note.path],
            f"{claim.statement!r}: a quote it cited was verified before and is gone "
            "from the source's current revision",
        )


def _counted(claims: list[ActiveClaim]) -> Iterator[ActiveClaim]:
    """The claims that count in a comparison: all but the retracted."""
    return (c for c in claims if c.status != "retracted")


def _duplicates(claims: list[ActiveClaim]) -> Iterator[ReviewFinding]:
    """The same statement (3+ words, case and spacing aside) in several sources."""
    groups: dict[str, list[ActiveClaim]] = defaultdict(list)
    for c in _counted(claims):
        key = " ".join(_WORD.findall(c.statement.casefold()))
        if len(key.split()) >= 3:
            groups[key].append(c)
    for key in sorted(groups):
        group = groups[key]
        if len({c.source_id for c in group}) > 1:
            paths = sorted({c.path or "" for c in group})
            yield _finding(
                "info",
                "duplicate_statement",
                sorted(c.claim_id for c in group),
                f"{group[0].statement!r} appears in {len(paths)} sources: " + ", ".join(paths),
            )


def _possible_contradictions(claims: list[ActiveClaim]) -> Iterator[ReviewFinding]:
    """Claims with the same words but different numbers or negation (a heuristic)."""
    shapes: dict[str, list[tuple[ActiveClaim, tuple[str, ...], bool]]] = defaultdict(list)
    for c in _counted(claims):
        shape, numbers, negated = _shape(c.statement)
        if len(shape.split()) >= 3:
            shapes[shape].append((c, numbers, negated))
    for shape in sorted(shapes):
        members = shapes[shape]
        variants = {(numbers, negated) for _, numbers, negated in members}
        if len(variants) > 1:
            yield _finding(
                "warning",
                "possible_contradiction",
                sorted(c.claim_id for c, _, _ in members),
                f"{_HEURISTIC}: " + " | ".join(sorted({c.statement for c, _, _ in members})),
            )


def _withdrawn_still_cited(
    conn: Connection, claims: list[ActiveClaim], by_id: dict[str, ActiveClaim]
) -> Iterator[ReviewFinding]:
    """Current notes citing text whose claim is retracted or disputed."""
    withdrawn = [c for c in claims if c.status in ("retracted", "disputed")]
    if not withdrawn:
        return
    spans = reviews.statement_spans(conn, [e for c in withdrawn for e in c.evidence_ids])
    cited = reviews.cited_spans(
        conn, [e for c in claims if c.authority == "manual" for e in c.evidence_ids]
    )
    for w in withdrawn:
        for eid in w.evidence_ids:
            if eid not in spans:
                continue
            seg, start, end = spans[eid]
            for citing in cited:
                if citing.segment_id == seg and citing.start < end and start < citing.end:
                    yield _finding(
                        "warning",
                        f"{w.status}_still_cited",
                        [w.claim_id, citing.claim_id],
                        f"{by_id[citing.claim_id].path} cites {w.path}, whose claim "
                        f"{w.statement!r} is {w.status}",
                    )


def _normalize_failures(conn: Connection, number: int) -> Iterator[ReviewFinding]:
    """Active sources that could not be normalized."""
    for path, nid, message in reviews.failed_normalizations(conn, number):
        yield _finding("error", "normalize_failed", [nid, path], message or "normalization failed")


_PERSONAL_WORDS: Final = (
    ("email", "e-mail address", "e-mail addresses"),
    ("phone", "phone number", "phone numbers"),
)


def _personal_data(
    blobs: BlobStore, sources: Iterable[state.ActiveSource]
) -> Iterator[ReviewFinding]:
    """Each active source's e-mail addresses and phone numbers, counted with their lines,
    from its raw file (the lines a person opens)."""
    for source in sorted(sources, key=lambda a: a.path):
        try:
            text = decode(blobs.get(source.blob))
        except (RaytError, NotText):  # a missing or purged blob: verify reports it
            continue
        found = scan_personal(source.path, text)
        if not found:
            continue
        parts = []
        for kind, one, many in _PERSONAL_WORDS:
            lines = [f.line for f in found if f.kind == kind]
            if lines:
                shown = ", ".join(map(str, sorted(set(lines))))
                parts.append(f"{len(lines)} {one if len(lines) == 1 else many} (line {shown})")
        yield _finding(
            "warning",
            "personal_data",
            [source.path],
            "personal data: " + "; ".join(parts) + ". Remove it, or set [ingest] "
            'personal_data = "allow" if it is meant to be here',
        )


def review(
    conn: Connection,
    blobs: BlobStore,
    generation: generations.GenerationRef,
    reviews_dir: Path,
    personal_data: str = "report",
) -> dict[str, Any]:
    """Audit `generation`, record the Review and write its report files. Changes no knowledge."""
    findings = [f.to_json() for f in audit(conn, blobs, generation, personal_data)]
    review_id = make_id("review", generation=generation.hash, findings=findings)
    counts: dict[str, int] = defaultdict(int)
    for f in findings:
        counts[f["severity"]] += 1
    report = {
        "schema_version": "1",
        "review_id": review_id,
        "generation": generation.to_json(),
        "counts": {k: counts.get(k, 0) for k in SEVERITY_ORDER},
        "findings": findings,
    }
    body = canonical_json(report).decode("utf-8")
    reviews.record_review(conn, review_id, generation.hash, now_iso(), body)
    reviews_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{generation.number:06d}-{generation.hash[:12]}"
    json_path = reviews_dir / f"{stem}.json"
    md_path = reviews_dir / f"{stem}.md"
    _write_atomic(json_path, json.dumps(report, ensure_ascii=False, indent=2) + "\n")
    _write_atomic(md_path, render_markdown(report))
    return {**report, "files": [str(json_path), str(md_path)]}


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


_MD_SPECIAL: Final = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")


def md_escape(text: str) -> str:
    """Document text as inert Markdown: every character that could be markup is escaped."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def render_markdown(report: dict[str, Any]) -> str:
    g = report["generation"]
    c = report["counts"]
    lines = [
        f"# Review of generation {g['number']}",
        "",
        f"Generation `{g['hash']}` · review `{report['review_id']}`",
        "",
        f"{c['error']} errors, {c['warning']} warnings, {c['info']} notes. "
        "A review changes no knowledge: fix what it finds in `knowledge/manual/` and re-ingest.",
        "",
    ]
    if not report["findings"]:
        lines.append("Nothing to report.")
    current = None
    for f in report["findings"]:
        if f["code"] != current:
            current = f["code"]
            lines += ["", f"## {current} ({f['severity']})", ""]
        subjects = ", ".join(md_escape(x) for x in f["subjects"])
        lines.append(f"- {md_escape(f['message'])} — {subjects}")
    return "\n".join(lines).rstrip() + "\n"
