"""What `verify` checks of a confirmed manual claim beyond its hashes: that its note makes it
a current claim without problems and that its state lists one citation evidence per
citation the note gives it. The hashes prove a state was not changed since it was hashed,
not that an ingest confirmed it: a forger who re-hashes the whole chain passes them all. A
query makes the same check before it answers (`chain.Checker`, ADR 0037)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from ..model.generation import read_state_evidence
from ..model.note_support import supporting_entry
from ..storage import integrity
from .verify_report import VerifyReport

if TYPE_CHECKING:
    from sqlalchemy import Connection


def check_manual_claims(conn: Connection, report: VerifyReport) -> None:
    """`claim_unsupported` for each confirmed state of a manual claim that its note does not
    support (reported once per claim and evidence list)."""
    states: dict[tuple[str, str], list[integrity.ManualEvidence]] = defaultdict(list)
    for row in integrity.confirmed_manual_evidence(conn):
        states[(row.claim_id, row.evidence_ids)].append(row)
    for (claim_id, listed), rows in sorted(states.items()):
        why = _unsupported(claim_id, read_state_evidence(listed) or [], rows)
        if why:
            report.add("error", "claim_unsupported", claim_id, f"claim {claim_id}: {why}")


def _unsupported(
    claim_id: str, listed: list[str], rows: list[integrity.ManualEvidence]
) -> str | None:
    role = {r.evidence_id: r.role for r in rows if r.evidence_id is not None}
    metas = {r.evidence_id: r.note_meta for r in rows if r.evidence_id is not None}
    statement = [e for e in listed if role.get(e) == "statement"]
    if not statement:
        return "confirmed, but its state lists no statement evidence"
    entry = supporting_entry(metas.get(statement[0]), claim_id)
    if isinstance(entry, str):
        return entry
    cited = [e for e in listed if role.get(e) == "citation"]
    if len(cited) != len(entry.get("citations", ())):
        return (
            f"confirmed with {len(cited)} citation evidence, but its note gives it "
            f"{len(entry.get('citations', ()))} citations"
        )
    return None
