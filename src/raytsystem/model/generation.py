"""Generations: which objects are active, summed up in hashes that chain to the parent.

A generation's manifest is the sorted list of (source ID, source digest) of its active sources.
A source digest covers the source's revision, its normalization and every active claim with its
hash (which covers statement, authority, status and evidence IDs, and through the evidence IDs
the segment, normalization, revision and raw blob). A one-file change therefore recomputes one
source digest and re-hashes a list of short strings, never the corpus.

    generation hash = H({"number", "parent", "manifest"})
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..ids import object_hash


class ClaimState(NamedTuple):
    """A claim's state in a generation (a tuple: ingest makes one per claim per file)."""

    claim_id: str
    source_id: str
    status: str
    claim_hash: str
    evidence_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)  # ingest holds one per changed source until its end
class SourceState:
    source_id: str
    path: str
    revision_id: str
    normalization_id: str | None
    digest: str
    claims: tuple[ClaimState, ...]
    index_digest: str | None = None  # its rows digest in the generation's index, once known


def source_digest(
    source_id: str,
    revision_id: str,
    normalization_id: str | None,
    claims: Sequence[tuple[Any, ...]],
) -> str:
    """`claims`: `ClaimState`s, or plain tuples of the same fields (from workers)."""
    return object_hash(
        "source_state",
        {
            "source": source_id,
            "revision": revision_id,
            "normalization": normalization_id,
            "claims": sorted([c[0], c[3]] for c in claims),  # (claim ID, claim hash)
        },
    )


def manifest_digest(digests: Mapping[str, str]) -> str:
    return object_hash("manifest", {"sources": sorted([k, v] for k, v in digests.items())})


def generation_hash(number: int, parent_hash: str | None, manifest: str) -> str:
    return object_hash(
        "generation", {"number": number, "parent": parent_hash, "manifest": manifest}
    )


def read_state_evidence(recorded: str) -> list[str] | None:
    """The evidence IDs a `claim_states.evidence_ids` text lists; None if it is not a JSON
    array of strings (a damaged or edited row: its claim hash no longer matches then)."""
    try:
        value = json.loads(recorded)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value
