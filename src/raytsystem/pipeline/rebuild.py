"""INDEX REBUILD: a generation's index made again from the ledger alone (`indexing.rebuild`),
and, for the current generation, the ledger's index digests brought to this index format.

The ledger records the rows digest of each generation's index and of each source state's rows
(ADR 0037), which a query compares with the index it reads. Those are digests of the rows of
the index format that wrote them: after an upgrade that changes the rows (ADR 0041), a rebuilt
index of the current generation holds other rows than the ledger records, and a query would
take it for a tampered one. The digests of another format read as not recorded (the weaker
check of ledgers before migration 0004), and rebuilding the current generation's index records
its digests as the ledger's, in one transaction, with the format they are of.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..progress import Progress
from ..storage import generations, index_file, writes
from ..storage.blobs import BlobStore
from ..storage.db import Ledger
from .indexing import rebuild


def rebuild_index(
    ledger: Ledger,
    index_dir: Path,
    blobs: BlobStore,
    generation: str | None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Rebuild the index of `generation` (None: the current one); see the module docstring."""
    with ledger.reading() as conn:
        gen = generations.generation_or_head(conn, generation)
        current = generations.head(conn)
        report = rebuild(index_dir, conn, blobs, gen, progress)
        adopt = current is not None and current.hash == gen.hash
        adopt = adopt and not writes.digests_of_this_format(conn)
    if adopt:
        path = Path(str(report["path"]))
        with index_file.open_index(path, gen.hash) as index:
            per_source = index_file.recorded_digests(index)
        with ledger.transaction() as conn:
            writes.rerecord_index_digests(conn, gen.number, str(report["rows_digest"]), per_source)
    report["digests_recorded"] = adopt
    return report
