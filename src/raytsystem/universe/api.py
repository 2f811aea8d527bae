"""The JSON API behind the Universe page: the questions the page asks, answered by a session
(read-only; each call reads one snapshot of the ledger)."""

from __future__ import annotations

from typing import Any

from ..api import DEFAULT_MAX_NODES, Session


class UniverseApi:
    def __init__(self, session: Session) -> None:
        self.session = session

    def graph(
        self, generation: str | None = None, max_nodes: int = DEFAULT_MAX_NODES
    ) -> dict[str, Any]:
        return self.session.graph(generation, max_nodes)

    def node(self, object_id: str) -> dict[str, Any]:
        """Any object with its chain (as `raytsystem show`)."""
        return self.session.show(object_id)

    def search(self, text: str, generation: str | None = None, limit: int = 20) -> dict[str, Any]:
        return self.session.search(text, limit=limit, claims=True, generation=generation)
