"""VERIFY's check of the index folder (`.raytsystem/indexes/`).

- Every generation's index file is checked against its own records (per-source row digests,
  `index_file.check_rows`) and against its generation; the current generation's is also
  compared with the rows the ledger derives.
- The spare (`.spare.sqlite3`), which the next ingest patches into a new generation's index
  and trusts for every source it does not patch, is checked against its own records too.
- A file a writer is making (`.building-*`) while no writer runs is what a stopped one left:
  an ingest's (`interrupted_ingest`, information) when the ledger holds the claim states it
  wrote ahead, else an index rebuild's (`stray_file`).
- An index file of the generation after the newest, which the ledger does not hold, is an
  ingest's that has not committed (it runs now, or was killed after publishing its index):
  `interrupted_ingest`, information, as the claim states such an ingest wrote ahead are.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BlobMissing, IntegrityError
from ..progress import Progress
from ..storage import damage, generations, index_file, index_folder, integrity, tombstones
from ..storage.blobs import DiskBlobStore
from ..storage.lock import without_writer
from .indexing import generation_digest
from .verify_report import VerifyReport

if TYPE_CHECKING:
    from sqlalchemy import Connection


def check_indexes(
    conn: Connection,
    store: DiskBlobStore,
    index_dir: Path,
    state_dir: Path,
    current: generations.GenerationRef | None,
    report: VerifyReport,
    progress: Progress | None = None,
) -> None:
    known = {g.hash: g for g in generations.generations(conn)}
    newest = max((g.number for g in known.values()), default=0)
    # Generations' index files only: a `.building-*` file is a writer's work in progress.
    files = sorted(index_folder.index_files(index_dir)) if index_dir.is_dir() else []
    seen = set()
    for path in files:
        if not path.exists():
            continue  # pruned or taken as a spare by an ingest since the listing
        report.counts["indexes"] += 1
        checked = damage.check_index_file(path)
        gen = _check_index(path, checked, index_dir, known, newest, state_dir, report)
        if gen is None:
            continue
        seen.add(gen.hash)
        if current is not None and gen.hash == current.hash:
            recorded = checked.meta.get("rows_digest")
            _compare_with_ledger(conn, store, gen, path, recorded, report, progress)
    if current is not None and current.hash not in seen:
        report.add(
            "warning",
            "index_missing",
            current.hash,
            "the current generation has no index: run `raytsystem index rebuild`",
        )
    _check_spare(index_dir, report)
    _check_building(conn, index_dir, state_dir, newest, report)


def _check_index(
    path: Path,
    checked: damage.IndexFileCheck,
    index_dir: Path,
    known: dict[str, generations.GenerationRef],
    newest: int,
    state_dir: Path,
    report: VerifyReport,
) -> generations.GenerationRef | None:
    """Check an index file against its own records; return the generation it is the index of,
    or None when it is none (unreadable, of another format, or not matching the ledger)."""
    if checked.unreadable is not None:
        report.add("error", "index_corrupt", path.name, checked.unreadable)
        return None
    meta = checked.meta
    if not checked.current_format:
        # Derived data another raytsystem wrote: queries refuse it, rebuilding replaces it.
        number = index_file.index_number(path)
        report.add(
            "warning",
            "index_format",
            path.name,
            f"written in index format {meta.get('format')}, this raytsystem reads "
            f"{index_file.FORMAT}: run `raytsystem index rebuild {number}`",
        )
        return None
    gen = known.get(meta.get("generation_hash", ""))
    if gen is None and _uncommitted(path, meta, index_dir, newest):
        running = without_writer(state_dir, lambda: True) is None
        report.add(
            "info",
            "interrupted_ingest",
            path.name,
            f"the index of generation {newest + 1}, which the ledger does not hold: "
            + (
                "an ingest is making that generation now"
                if running
                else "an ingest was stopped before it committed it; the next ingest replaces it"
            ),
        )
    elif gen is None or index_file.index_path(index_dir, gen.number, gen.hash) != path:
        report.add(
            "error",
            "index_mismatch",
            path.name,
            "records a generation that does not match its file name or the ledger",
        )
        gen = None
    for problem in checked.problems:
        report.add("error", "index_mismatch", path.name, problem)
    return gen


def _uncommitted(path: Path, meta: dict[str, str], index_dir: Path, newest: int) -> bool:
    """Whether `path` is the published index of the generation after the newest, which an
    ingest that has not committed made: its records name that number, and its name is theirs."""
    recorded = meta.get("generation_hash", "")
    return (
        meta.get("generation_number") == str(newest + 1)
        and len(recorded) == 64
        and index_file.index_path(index_dir, newest + 1, recorded) == path
    )


def _check_spare(index_dir: Path, report: VerifyReport) -> None:
    """The spare's rows against its own records: an ingest keeps every row of it whose source
    did not change, so a row injected there would live on in the next generation's index."""
    spare = index_dir / index_folder.SPARE_NAME
    if not spare.is_file():
        return
    checked = damage.check_index_file(spare)
    if not spare.exists():
        return  # an ingest took it meanwhile
    if checked.unreadable is not None:
        report.add("error", "index_corrupt", spare.name, f"the spare index is {checked.unreadable}")
    # One of another format is never patched (an ingest copies the parent instead).
    for problem in checked.problems:
        report.add(
            "error",
            "index_mismatch",
            spare.name,
            f"the spare index, which the next ingest makes the new index from: {problem}",
        )


def _check_building(
    conn: Connection, index_dir: Path, state_dir: Path, newest: int, report: VerifyReport
) -> None:
    """Files a writer was making, left by one that was stopped: looked for only while no
    writer runs (a running one's file is its work in progress). Where the ledger holds claim
    states an ingest wrote ahead for a generation it never made, such a file is that
    ingest's, and only information as they are; otherwise a killed index rebuild's."""
    left = without_writer(state_dir, lambda: index_folder.building_files(index_dir))
    if not left:
        return
    ingest = integrity.states_written_ahead(conn, newest)
    for path in left:
        if ingest:
            report.add(
                "info",
                "interrupted_ingest",
                str(path.relative_to(state_dir)),
                f"the index file of generation {newest + 1}, which an ingest was making when "
                "it was stopped: the next ingest removes it",
            )
        else:
            report.add(
                "warning",
                "stray_file",
                str(path.relative_to(state_dir)),
                "an index file a writer was making when it was stopped (an index rebuild): "
                "the next writer removes it",
            )


def _compare_with_ledger(
    conn: Connection,
    store: DiskBlobStore,
    gen: generations.GenerationRef,
    path: Path,
    recorded: str | None,
    report: VerifyReport,
    progress: Progress | None,
) -> None:
    """The rows digest the index at `path` records, against the one the ledger derives."""
    try:
        derived = generation_digest(conn, store, gen, progress)
    except IntegrityError as exc:  # a normalized text or a claim missing: reported above
        address = str(exc.details.get("address", ""))
        if isinstance(exc, BlobMissing) and tombstones.tombstones(conn, [address]):
            report.add(
                "info",
                "index_unchecked",
                path.name,
                f"its rows hold the purged text {address} and cannot be derived to compare; "
                "the next ingest makes a generation without it",
            )
            return
        report.add(
            "warning",
            "index_unchecked",
            path.name,
            f"its rows cannot be derived to compare: {exc}",
        )
        return
    if derived != recorded:
        report.add(
            "error",
            "index_mismatch",
            path.name,
            "its rows differ from the rows the ledger derives for this generation",
        )
