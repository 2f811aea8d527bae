"""Whether a note supports a confirmed manual claim, from its normalization's `meta` (what the
note parser recorded: its status, its claims and their citations). Light on purpose: the query
checks it on its hot path, `verify` for every confirmed manual claim."""

from __future__ import annotations

import json
from typing import Any


def supporting_entry(meta: str | None, claim_id: str) -> dict[str, Any] | str:
    """The note's entry for `claim_id` when the note makes it a current claim without
    problems; otherwise why not."""
    parsed = json.loads(meta) if meta else {}
    entry = next((e for e in parsed.get("claims", ()) if e.get("id") == claim_id), None)
    note = parsed.get("note") or {}
    if entry is None or parsed.get("note_error") or note.get("status") != "current":
        return "its note does not make it a current claim"
    if entry.get("problems"):
        return "its note's citations have problems, yet it is confirmed"
    return dict(entry)
