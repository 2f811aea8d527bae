"""Decision records: whether a source is one, its status, and the part of it each sentence is.

A decision record (an ADR) is recognised by its template, which is a format like any other:

- **MADR**: a `Decision Outcome` or a `Considered Options` section (its outcome is the
  paragraph or list item that begins `Chosen option:`). Its other sections: `Context and Problem Statement`,
  `Decision Drivers`, `Pros and Cons of the Options`, `Consequences` (and MADR 2's `Positive
  Consequences`/`Negative Consequences`; `* Good, because …` items are under them),
  `Confirmation`, `More Information`.
- **Nygard**: a `Decision` section beside a `Context`, `Status` or `Consequences` section, or
  beside a status line.
- **Status line**: a record in the looser form of Nygard's: a paragraph or list item
  `Status: <status>` right under the title (no heading but the title above it, among the
  first `LEAD_PARAGRAPHS` paragraphs), whatever the sections after it.

Headings are matched case-folded, without leading numbering (`2. Decision`) or a trailing
colon. The status is the first word of the record's front matter `status:` value, else of its
`Status` section's first paragraph (a later paragraph of that section that begins with a
retired status wins: adr-tools appends `Superseded by …`), else of a paragraph or list item
that begins `Status:`; only the words of `STATUSES` count. `superseded`, `deprecated`,
`rejected` and `obsolete` are retired statuses: QUERY ranks such a record after the others.

Each sentence of a record gets a role: `status` (the status line or section), `decision`
(the `Chosen option:` paragraph, or the innermost recognised section is the decision), else
the role of the innermost recognised section of its heading path (`considered_option`,
`context`, `consequence`, `confirmation`), else `other`; in a record with no decision section
and no `Chosen option:` (a status-line record, whose body is its decision) `decision` instead
of `other`. A source that is not a record gets no
role. Everything is a pure function of the source's segments, so the index rows that carry it
are derived the same from the ledger as at ingest (`pipeline/indexing.py`).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

# Section headings of the templates (normalized by `section`) and the role of what they hold.
SECTION_ROLES: Final = {
    "decision outcome": "decision",
    "decision": "decision",
    "considered options": "considered_option",
    "options considered": "considered_option",
    "pros and cons of the options": "considered_option",
    "context and problem statement": "context",
    "context": "context",
    "decision drivers": "context",
    "consequences": "consequence",
    "positive consequences": "consequence",
    "negative consequences": "consequence",
    "confirmation": "confirmation",
    "status": "status",
}
ROLES: Final = frozenset(SECTION_ROLES.values()) | {"other"}
# A source that is a record has this role on its own index row (its claims carry theirs).
RECORD: Final = "record"
MADR_SECTIONS: Final = frozenset({"decision outcome", "considered options"})
_MARKS: Final = MADR_SECTIONS | {"decision"}  # one of these headings, or a status line
NYGARD_COMPANIONS: Final = frozenset({"context", "status", "consequences"})
STATUSES: Final = frozenset(
    {
        "proposed",
        "draft",
        "accepted",
        "approved",
        "superseded",
        "deprecated",
        "rejected",
        "obsolete",
    }
)
RETIRED: Final = frozenset({"superseded", "deprecated", "rejected", "obsolete"})
# Statuses of a decision in force (a record that states none is taken to be in force).
IN_FORCE: Final = frozenset({"", "accepted", "approved"})
# How early a status line must come to make a source a record by itself.
LEAD_PARAGRAPHS: Final = 3

_NUMBERING = re.compile(r"^(?:[\dIVXivx]+[.)]|\d+(?:\.\d+)*)\s+")
_CHOSEN = re.compile(r"\s*chosen option\s*:", re.IGNORECASE)
_STATUS_LINE = re.compile(r"\s*status\s*:\s*(.*)", re.IGNORECASE | re.DOTALL)
_FRONT_STATUS = re.compile(r"^status\s*:\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_FIRST_WORD = re.compile(r"[^\W\d_]+")
_PROSE: Final = frozenset({"paragraph", "list_item"})


def section(heading: str) -> str:
    """A heading as templates are matched: case-folded, no leading numbering, no colon."""
    text = " ".join(heading.split()).rstrip(":").strip()
    return _NUMBERING.sub("", text).casefold()


def status_word(text: str) -> str | None:
    """The status a status text states: its first word, if it is one of `STATUSES`
    ("Superseded by ADR 0031" -> superseded; "see below" -> None)."""
    found = _FIRST_WORD.search(text)
    word = found.group(0).casefold() if found else ""
    return word if word in STATUSES else None


@dataclass(frozen=True)
class Record:
    """A source recognised as a decision record."""

    template: str  # "madr" | "nygard" | "status_line"
    status: str  # a word of STATUSES, "" when the record states none
    status_segments: frozenset[str]  # IDs of the segments that state the status
    chosen_segments: frozenset[str]  # IDs of the `Chosen option:` segments
    # What a sentence outside any recognised section is: "decision" when the record has no
    # decision section nor `Chosen option:` (its body is its decision), else "other".
    unsectioned: str = "other"

    @property
    def retired(self) -> bool:
        return self.status in RETIRED

    @property
    def in_force(self) -> bool:
        return self.status in IN_FORCE

    def role(self, segment_id: str, path: Sequence[str]) -> str:
        """The role of a segment of this record (and of every sentence in it)."""
        if segment_id in self.status_segments:
            return "status"
        if segment_id in self.chosen_segments:
            return "decision"
        for heading in reversed(path):
            role = SECTION_ROLES.get(section(heading))
            if role is not None:
                return role
        return self.unsectioned


def heading_list(heading_json: str, cache: dict[str, list[str]]) -> list[str]:
    """A heading path's canonical JSON as a list (memoized in `cache`: a source's segments
    share a few paths)."""
    got = cache.get(heading_json)
    if got is None:
        loaded = json.loads(heading_json)
        got = cache[heading_json] = [str(h) for h in loaded] if isinstance(loaded, list) else []
    return got


def _status_of_section(texts: Iterable[str]) -> str | None:
    """The status a `Status` section's paragraphs state (see the module docstring)."""
    status = None
    for text in texts:
        word = status_word(text)
        if word is not None and (status is None or word in RETIRED):
            status = word
    return status


def _may_be_record(segments: Sequence[tuple[str, str, str, str]]) -> bool:
    """Whether a source can be a record at all: a heading of a decision or of the considered
    options, or a status line among its first paragraphs. This runs for every file ingested,
    so it looks at the headings and the first paragraphs only."""
    if any(kind == "heading" and section(text) in _MARKS for _, kind, _, text in segments):
        return True
    prose = (text for _, kind, _, text in segments if kind in _PROSE)
    return any(_STATUS_LINE.match(text) for text in itertools.islice(prose, LEAD_PARAGRAPHS))


def read_record(segments: Iterable[tuple[str, str, str, str]]) -> Record | None:
    """The record a source's segments ((ID, kind, heading path JSON, text), in order) make, or
    None when the source is not a decision record of a known template."""
    segments = list(segments)
    if not _may_be_record(segments):
        return None
    sections: set[str] = set()
    paths: dict[str, list[str]] = {}
    chosen: set[str] = set()
    status_lines: list[tuple[str, str]] = []  # (segment ID, status word)
    in_status: list[tuple[str, str]] = []  # (segment ID, text) of the Status section
    front: str | None = None
    lead = False  # a status line right under the title, among the first paragraphs
    prose = 0
    for seg_id, kind, heading_json, text in segments:
        if kind == "heading":
            sections.add(section(text))
            continue
        if kind == "front_matter":
            found = _FRONT_STATUS.search(text)
            front = front or (status_word(found.group(1).strip("\"' ")) if found else None)
            continue
        if kind not in _PROSE:
            continue
        prose += 1
        if _CHOSEN.match(text):
            chosen.add(seg_id)
            continue
        line = _STATUS_LINE.match(text)
        word = status_word(line.group(1)) if line else None
        if word is not None:
            status_lines.append((seg_id, word))
            lead = lead or (
                prose <= LEAD_PARAGRAPHS and len(heading_list(heading_json, paths)) <= 1
            )
            continue
        if "status" in sections:  # a section's heading comes before what it holds
            path = heading_list(heading_json, paths)
            if path and section(path[-1]) == "status":
                in_status.append((seg_id, text))
    from_section = _status_of_section(text for _, text in in_status)
    status = front or from_section or (status_lines[0][1] if status_lines else None)
    if sections & MADR_SECTIONS:
        template = "madr"
    elif "decision" in sections and (sections & NYGARD_COMPANIONS or status is not None):
        template = "nygard"
    elif lead:
        template = "status_line"
    else:
        return None
    decided = chosen or any(SECTION_ROLES.get(s) == "decision" for s in sections)
    return Record(
        template,
        status or "",
        frozenset(seg_id for seg_id, _ in status_lines) | {seg_id for seg_id, _ in in_status},
        frozenset(chosen),
        "other" if decided else "decision",
    )
