"""Manual notes as the ledger holds them, and the look-ups their citations and links need.

Ingest (`manual.py`) resolves notes with these, and `review` and `graph` read notes back with
them: `Note` is a note with the meta ingest parsed from it (`model/notes.py`),
`notes_from_ledger` reads the notes of a generation, `Texts` and `locate` find a cited quote
in the current text of a source, `link_exists` tells whether a `[[link]]` resolves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from ..canonical import sha256_hex
from ..storage import sources as ledger_sources
from ..storage.blobs import BlobStore
from ..storage.states import ActiveSource


@dataclass
class Note:
    """A manual note of a generation, with the meta ingest parsed from it: front matter,
    claims with their citations and problems, links, entities (`model/notes.parse_note`)."""

    path: str
    source_id: str
    revision_id: str
    normalization_id: str
    meta: dict[str, Any]

    @property
    def current(self) -> bool:
        return self.meta.get("note_error") is None and self.meta["note"]["status"] == "current"

    def directives(self) -> dict[str, str]:
        if not self.current:
            return {}
        out = {cid: "disputed" for cid in self.meta["note"]["disputes"]}
        out.update({cid: "retracted" for cid in self.meta["note"]["retracts"]})
        return out

    def cited_paths(self) -> set[str]:
        return {c["path"] for e in self.meta["claims"] for c in e["citations"]}


def notes_from_ledger(conn: Connection, items: Iterable[ActiveSource]) -> dict[str, Note]:
    """path -> the note there, with its meta as ingest parsed it, of each source in `items`
    that is a note (a source whose normalization has no note meta is left out)."""
    items = [a for a in items if a.normalization_id]
    metas = ledger_sources.normalization_metas(
        conn, [a.normalization_id for a in items if a.normalization_id]
    )
    out = {}
    for a in items:
        raw = metas.get(a.normalization_id or "")
        if raw:
            meta = json.loads(raw)
            if "claims" in meta:
                out[a.path] = Note(
                    a.path, a.source_id, a.revision_id, a.normalization_id or "", meta
                )
    return out


class Texts:
    """Current normalized text and segments of sources, read from the ledger and the blobs."""

    def __init__(self, conn: Connection, blobs: BlobStore, sources: dict[str, str | None]) -> None:
        self.conn = conn
        self.blobs = blobs
        self.sources = sources  # path -> its normalization in the new generation
        self._cache: dict[str, tuple[str, str, list[tuple[str, int, int]]] | None] = {}
        self._symbols: dict[str, dict[str, tuple[int, int]]] = {}  # path -> name -> span

    def get(self, path: str) -> tuple[str, str, list[tuple[str, int, int]]] | None:
        """(normalization id, text, [(segment id, start, end)]) of the source at `path`."""
        if path in self._cache:
            return self._cache[path]
        nid = self.sources.get(path)
        value = None
        if nid is not None:
            blob = ledger_sources.text_blobs(self.conn, [nid]).get(nid)
            if blob:
                segs = ledger_sources.segment_spans(self.conn, nid)
                value = (nid, self.blobs.get(blob).decode("utf-8"), segs)
        self._cache[path] = value
        return value

    def symbol_span(self, path: str, symbol: str) -> tuple[int, int] | None:
        """The span in the normalized text of a symbol the source at `path` defines (a code
        adapter records them in its normalization's meta), or None."""
        if path not in self._symbols:
            nid = self.sources.get(path)
            raw = ledger_sources.normalization_metas(self.conn, [nid]).get(nid) if nid else None
            self._symbols[path] = {
                entry["name"]: (int(entry["span"][0]), int(entry["span"][1]))
                for entry in (json.loads(raw).get("symbols", ()) if raw else ())
            }
        return self._symbols[path].get(symbol)


def quote_pattern(quote: str) -> re.Pattern[str]:
    return re.compile(r"\s+".join(re.escape(word) for word in quote.split()))


def locate(
    texts: Texts, path: str, quote: str, symbol: str | None = None
) -> tuple[str, tuple[str, int, int, str] | None]:
    """('found', (segment, start, end, sha)) or (problem code, None). With `symbol`, the quote
    must lie inside that symbol's current span: found elsewhere or not at all, it drifted."""
    target = texts.get(path)
    if target is None:
        return "citation_source_missing", None
    _nid, text, segments = target
    if not quote.split():
        return "citation_malformed", None
    within = (0, len(text))
    if symbol is not None:
        span = texts.symbol_span(path, symbol)
        if span is None:
            return "citation_drifted", None
        within = span
    pattern = quote_pattern(quote)
    hits = []
    for seg_id, start, end in segments:
        start, end = max(start, within[0]), min(end, within[1])
        for m in pattern.finditer(text, start, end) if start < end else ():
            hits.append((seg_id, m.start(), m.end()))
            if len(hits) > 1:
                return "citation_ambiguous", None
    if not hits:
        return ("citation_drifted" if symbol is not None else "citation_not_found"), None
    seg_id, start, end = hits[0]
    return "found", (seg_id, start, end, sha256_hex(text[start:end]))


MESSAGES = {
    "citation_source_missing": "cites {path}, which is not an active source",
    "citation_ambiguous": 'the quote "{quote}" occurs more than once in {path}',
    "citation_not_found": 'the quote "{quote}" is not in the current revision of {path}',
    "citation_malformed": "the citation of {path} has an empty quote",
    "citation_drifted": 'the quote "{quote}" is no longer inside {symbol} in {path}: the code '
    "changed (or the symbol is gone)",
}


def link_exists(link: str, notes: dict[str, Note], sources: dict[str, Any]) -> bool:
    """Whether `[[link]]` names an entity of a note's registry or the path of a source (with
    or without `.md`, under `knowledge/manual/` or not)."""
    target = link.strip()
    names = {e["name"].casefold() for n in notes.values() for e in n.meta.get("entities", [])}
    if target.casefold() in names:
        return True
    candidates = {
        target,
        f"{target}.md",
        f"knowledge/manual/{target}",
        f"knowledge/manual/{target}.md",
    }
    return bool(candidates & set(sources))
