"""The JSON API behind the Universe page: read-only, one ledger snapshot per call."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..pipeline.graph import DEFAULT_MAX_NODES, graph
from ..pipeline.search import search
from ..pipeline.show import show
from ..storage import generations
from ..storage.blobs import DiskBlobStore
from ..storage.db import Ledger
from ..storage.reader import open_reader


@dataclass
class UniverseApi:
    ledger: Ledger
    blobs: DiskBlobStore
    index_dir: Path
    database_url: str

    def graph(
        self, generation: str | None = None, max_nodes: int = DEFAULT_MAX_NODES
    ) -> dict[str, Any]:
        with self.ledger.reading() as conn:
            gen = generations.generation_or_head(conn, generation)
            return graph(conn, gen, max_nodes=max_nodes)

    def node(self, object_id: str) -> dict[str, Any]:
        """Any object with its chain (as `raytsystem show`)."""
        with self.ledger.reading() as conn:
            return show(conn, self.blobs, object_id)

    def search(self, text: str, generation: str | None = None, limit: int = 20) -> dict[str, Any]:
        reader = open_reader(self.database_url)
        try:
            return search(
                reader,
                self.blobs,
                self.index_dir,
                text,
                limit=limit,
                kind="claim",
                generation=generation,
            )
        finally:
            reader.close()
