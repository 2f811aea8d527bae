"""INGEST end to end: revisions, idempotency, deletions, generations chained by hash,
determinism across workspaces, and the parallel path giving the serial path's results."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
import shutil
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import Backend, process_one, run_cli, write

from raytsystem.discovery import stat_key
from raytsystem.errors import RaytError
from raytsystem.model.objects import source_id_for
from raytsystem.pipeline import ingest_run, parallel
from raytsystem.storage.statcache import RACY_NS, StatCache


def ingest(ws: Path, *args: str) -> dict:
    result = run_cli("ingest", *args, "--json", cwd=ws)
    assert result.code == 0, result.stdout + result.stderr
    return result.json()


def test_second_ingest_of_unchanged_files_makes_nothing_new(workspace: Path) -> None:
    write(workspace, "docs/a.md", "Alpha is first.\n")
    write(workspace, "knowledge/b.md", "Beta is second.\n")
    first = ingest(workspace)
    assert first["created"] and first["counts"]["new_revisions"] == 2
    second = ingest(workspace)
    assert not second["created"]
    assert second["generation"] == first["generation"]
    assert second["counts"]["new_revisions"] == 0 and second["counts"]["unchanged"] == 2


def test_unchanged_detection_survives_a_lost_stat_cache(workspace: Path) -> None:
    write(workspace, "docs/a.md", "Alpha is first.\n")
    first = ingest(workspace)
    (workspace / ".raytsystem/statcache.sqlite3").unlink()
    second = ingest(workspace)
    assert not second["created"] and second["generation"] == first["generation"]


def test_a_lost_pack_is_restored_from_unchanged_files(workspace: Path) -> None:
    """The README's repair: with a pack deleted (every raw and normalized blob in it lost) and
    the stat cache too, an ingest stores the raw bytes again from the files and makes the
    normalized texts again with the same adapter; nothing new is made and verify passes."""
    write(workspace, "docs/a.md", "# A\n\nAlpha is *first*.\n")
    write(workspace, "docs/b.md", "Beta is second.\n")
    first = ingest(workspace)
    [pack] = (workspace / "_raw" / "blake3" / "packs").iterdir()
    pack.unlink()
    assert run_cli("verify", cwd=workspace).code == 3
    (workspace / ".raytsystem/statcache.sqlite3").unlink()
    second = ingest(workspace)
    assert not second["created"] and second["generation"] == first["generation"]
    assert run_cli("verify", cwd=workspace).code == 0


def _age(*paths: Path) -> None:
    """Make files old enough to be trusted by stat alone (not "racily clean"): modified ten
    seconds before now, or earlier."""
    for path in paths:
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, min(st.st_mtime_ns, time.time_ns()) - 10**10))


def _racy(*paths: Path) -> None:
    """Make files "racily clean" whatever the machine's speed: modified, as far as their
    mtime says, after any ingest looked at them (an hour from now)."""
    for path in paths:
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, time.time_ns() + 3600 * 10**9))


def _cached(workspace: Path) -> dict[str, tuple[int, int, str]]:
    cache = sqlite3.connect(workspace / ".raytsystem/statcache.sqlite3")
    try:
        return {
            p: (size, mtime, rev)
            for p, size, mtime, rev in cache.execute(
                "SELECT path, size, mtime_ns, revision_id FROM entries"
            )
        }
    finally:
        cache.close()


def test_stat_cache_is_written_only_when_a_file_was_read(workspace: Path) -> None:
    paths = [write(workspace, "docs/a.md", "Alpha.\n"), write(workspace, "docs/b.md", "Beta.\n")]
    _age(*paths)
    cache = workspace / ".raytsystem/statcache.sqlite3"
    ingest(workspace)
    written = cache.stat()
    again = ingest(workspace)
    assert again["counts"]["unchanged"] == 2 and again["counts"]["bytes_read"] == 0
    assert (cache.stat().st_ino, cache.stat().st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    paths[0].write_text("Alpha.\n", encoding="utf-8")  # a new mtime: read, found unchanged
    _age(paths[0])
    assert not ingest(workspace)["created"]
    assert _cached(workspace)["docs/a.md"][1] == paths[0].stat().st_mtime_ns  # its new stat
    assert ingest(workspace)["counts"]["bytes_read"] == 0


def test_a_racily_clean_file_is_read_again(workspace: Path) -> None:
    """A file written just before the ingest looked at it is not recorded: written again in
    the same clock tick (same size, same mtime), its change is still found."""
    path = write(workspace, "docs/a.md", "Alpha is first.\n")
    _racy(path)
    first = ingest(workspace)
    assert "docs/a.md" not in _cached(workspace)
    mtime = path.stat().st_mtime_ns
    path.write_text("Alpha is fast.\n", encoding="utf-8")  # same size
    os.utime(path, ns=(mtime, mtime))  # and the same mtime: a write within the same tick
    second = ingest(workspace)
    assert second["created"] and second["counts"]["new_revisions"] == 1
    assert second["generation"] != first["generation"]


def test_stat_cache_trusts_a_file_by_when_it_was_looked_at(tmp_path: Path) -> None:
    """However long an ingest runs before writing its cache, a file modified less than
    RACY_NS before the ingest looked at it is not recorded."""
    path = tmp_path / "a.md"
    path.write_text("Alpha.\n", encoding="utf-8")
    st = stat_key(path.stat())
    mtime_ns = st[1]
    where = tmp_path / "statcache.sqlite3"
    cache = StatCache(where, None)
    cache.save("g1", [("a.md", st, "rev_1")], mtime_ns + RACY_NS - 1)
    assert not StatCache(where, "g1").fresh("a.md", st, "rev_1")
    cache.save("g1", [("a.md", st, "rev_1")], mtime_ns + RACY_NS + 1)
    assert StatCache(where, "g1").fresh("a.md", st, "rev_1")
    assert not StatCache(where, "g1").fresh("a.md", st, "rev_2")
    assert not StatCache(where, "g2").fresh("a.md", st, "rev_1")  # another generation's


def test_a_new_generation_updates_the_stat_cache_in_place(workspace: Path) -> None:
    paths = [write(workspace, f"docs/{n}.md", f"Note {n}.\n") for n in "abc"]
    _age(*paths)
    ingest(workspace)
    cache = workspace / ".raytsystem/statcache.sqlite3"
    inode = cache.stat().st_ino
    before = _cached(workspace)
    paths[0].write_text("Note a, changed.\n", encoding="utf-8")
    _age(paths[0])
    paths[1].unlink()
    _racy(write(workspace, "docs/d.md", "Note d.\n"))  # new, racily clean: not recorded yet
    report = ingest(workspace)
    assert report["created"] and cache.stat().st_ino == inode  # updated, not rewritten
    after = _cached(workspace)
    assert set(after) == {"docs/a.md", "docs/c.md"}
    assert after["docs/c.md"] == before["docs/c.md"]
    assert after["docs/a.md"] != before["docs/a.md"]
    _age(workspace / "docs/d.md")
    assert ingest(workspace)["counts"]["bytes_read"] == len("Note d.\n")  # d only
    assert ingest(workspace)["counts"]["bytes_read"] == 0


def test_a_stat_cache_of_the_earlier_format_is_not_trusted(workspace: Path) -> None:
    """Its entries were trusted by the time the whole cache was written: one may be racy."""
    _age(write(workspace, "docs/a.md", "Alpha.\n"))
    ingest(workspace)
    cache = sqlite3.connect(workspace / ".raytsystem/statcache.sqlite3")
    with cache:
        cache.execute("DELETE FROM meta WHERE key = 'format'")
        cache.execute("INSERT INTO meta VALUES ('written_ns', '99999999999999999999')")
    cache.close()
    assert ingest(workspace)["counts"]["bytes_read"] == len("Alpha.\n")
    assert ingest(workspace)["counts"]["bytes_read"] == 0  # written again, in this format


def test_an_ingest_of_paths_keeps_the_stat_cache_of_the_others(workspace: Path) -> None:
    paths = [write(workspace, f"docs/{n}.md", f"Note {n}.\n") for n in "abc"]
    _age(*paths)
    ingest(workspace)
    _age(write(workspace, "docs/a.md", "Note a, changed.\n"))
    assert ingest(workspace, "docs/a.md")["created"]
    assert set(_cached(workspace)) == {"docs/a.md", "docs/b.md", "docs/c.md"}
    assert ingest(workspace)["counts"]["bytes_read"] == 0


def test_changed_file_makes_a_new_revision_of_the_same_source(workspace: Path) -> None:
    write(workspace, "docs/a.md", "Alpha is first.\n")
    ingest(workspace)
    write(workspace, "docs/a.md", "Alpha is first.\n\nGamma is third.\n")
    report = ingest(workspace)
    assert report["created"] and report["counts"]["new_revisions"] == 1
    assert report["counts"]["new_sources"] == 0
    history = run_cli("history", "docs/a.md", "--json", cwd=workspace).json()
    assert len(history["revisions"]) == 2
    assert history["current_revision"] == history["revisions"][-1]["id"]
    assert history["revisions"][0]["active_in_generations"] == [{"from": 1, "to": 2}]


def test_same_content_in_a_touched_file_is_not_a_change(workspace: Path) -> None:
    path = write(workspace, "docs/a.md", "Alpha is first.\n")
    _racy(path)
    first = ingest(workspace)
    path.write_text("Alpha is first.\n", encoding="utf-8")  # new mtime, same bytes
    second = ingest(workspace)
    assert not second["created"] and second["generation"] == first["generation"]


def test_deleted_file_is_recorded_as_gone_and_its_revisions_kept(workspace: Path) -> None:
    write(workspace, "docs/a.md", "Alpha is first.\n")
    write(workspace, "docs/b.md", "Beta is second.\n")
    ingest(workspace)
    (workspace / "docs/a.md").unlink()
    report = ingest(workspace)
    assert report["created"] and report["counts"]["removed_sources"] == 1
    history = run_cli("history", "docs/a.md", "--json", cwd=workspace).json()
    assert history["current_revision"] is None
    assert history["removed_in_generation"] == 2
    assert len(history["revisions"]) == 1
    gap = run_cli("query", "alpha first", "--json", cwd=workspace).json()
    assert gap["status"] == "gap"
    old = run_cli("query", "alpha first", "--generation", "1", "--json", cwd=workspace).json()
    assert old["status"] == "answered"


def test_ingest_of_a_scope_leaves_other_sources_alone(workspace: Path) -> None:
    write(workspace, "docs/a.md", "Alpha is first.\n")
    write(workspace, "knowledge/b.md", "Beta is second.\n")
    ingest(workspace)
    (workspace / "knowledge/b.md").unlink()
    write(workspace, "docs/a.md", "Alpha is changed.\n")
    report = ingest(workspace, "docs")
    assert report["counts"]["removed_sources"] == 0  # knowledge/ was not in scope
    assert run_cli("query", "beta second", "--json", cwd=workspace).json()["status"] == "answered"


def test_generations_chain_by_hash(workspace: Path) -> None:
    write(workspace, "docs/a.md", "Alpha is first.\n")
    ingest(workspace)
    write(workspace, "docs/a.md", "Alpha is second.\n")
    ingest(workspace)
    gens = run_cli("generations", "--json", cwd=workspace).json()
    assert [g["number"] for g in gens] == [1, 2]
    assert gens[0]["parent_hash"] is None
    assert gens[1]["parent_hash"] == gens[0]["hash"]
    assert gens[1]["current"] and not gens[0]["current"]
    diff = run_cli("diff", "1", "2", "--json", cwd=workspace).json()
    assert [c["statement"] for c in diff["added"]] == ["Alpha is second."]
    assert [c["statement"] for c in diff["removed"]] == ["Alpha is first."]


def _corpus(root: Path, n: int) -> None:
    for i in range(n):
        write(
            root,
            f"docs/part{i % 7}/note{i:03d}.md",
            f"# Note {i}\n\nItem {i} weighs {i * 3} grams. It ships in box {i % 11}.\n\n"
            f"- Colour: {'red' if i % 2 else 'blue'}.\n",
        )


def test_same_files_in_two_workspaces_give_the_same_generation_hash(tmp_path: Path) -> None:
    hashes = []
    for name in ("one", "two"):
        root = tmp_path / name
        root.mkdir()
        env = {"RAYTSYSTEM_DATABASE_URL": ""}
        assert run_cli("init", cwd=root, env=env).code == 0
        _corpus(root, 12)
        result = run_cli("ingest", "--json", cwd=root, env=env)
        hashes.append(result.json()["generation"]["hash"])
    assert hashes[0] == hashes[1]


def test_sqlite_and_postgresql_ledgers_give_the_same_generation_hash(
    workspace: Path, tmp_path: Path
) -> None:
    _corpus(workspace, 12)
    here = ingest(workspace)["generation"]["hash"]
    other = tmp_path / "sqlite"
    other.mkdir()
    env = {"RAYTSYSTEM_DATABASE_URL": ""}
    assert run_cli("init", cwd=other, env=env).code == 0
    _corpus(other, 12)
    assert run_cli("ingest", "--json", cwd=other, env=env).json()["generation"]["hash"] == here


def test_parallel_ingest_gives_the_serial_ids_and_generation_hash(tmp_path: Path) -> None:
    # With two or three jobs the writer takes some chunks of files itself (the first one past
    # what the workers hold, at once: they are still starting), the workers the others.
    results = {}
    for jobs in ("1", "2", "3"):
        root = tmp_path / f"jobs{jobs}"
        root.mkdir()
        assert run_cli("init", cwd=root).code == 0
        _corpus(root, 250)  # over the parallel threshold, and several batches
        report = ingest(root, "--jobs", jobs)
        db = sqlite3.connect(root / ".raytsystem/ledger.sqlite3")
        ids = {
            table: sorted(r[0] for r in db.execute(f"SELECT id FROM {table}"))
            for table in (
                "sources",
                "revisions",
                "normalizations",
                "segments",
                "claims",
                "evidence",
            )
        }
        db.close()
        (index,) = (root / ".raytsystem/indexes").glob("000001-*.sqlite3")
        with contextlib.closing(sqlite3.connect(index)) as conn:
            digests = conn.execute("SELECT * FROM source_digests ORDER BY source_id").fetchall()
            meta = conn.execute("SELECT value FROM meta WHERE key = 'rows_digest'").fetchone()
        results[jobs] = (report["generation"]["hash"], ids, digests, meta)
    assert results["1"] == results["2"] == results["3"]
    assert len(results["1"][2]) == 250


def test_an_index_that_was_deleted_is_rebuilt_from_the_ledger(workspace: Path) -> None:
    write(workspace, "docs/a.md", "Alpha is first.\n")
    ingest(workspace)
    shutil.rmtree(workspace / ".raytsystem/indexes")
    write(workspace, "docs/b.md", "Beta is second.\n")
    ingest(workspace)
    body = run_cli("query", "alpha first", "--json", cwd=workspace).json()
    assert body["status"] == "answered"


def test_human_output_names_the_generation_and_findings(workspace: Path, backend: Backend) -> None:
    write(workspace, "docs/a.md", "Alpha is first.\n")
    (workspace / "docs/bin.md").write_bytes(b"\x00\x01binary")
    result = run_cli("ingest", cwd=workspace)
    assert result.code == 0
    assert "generation 1" in result.stdout
    assert "binary_file" in result.stdout and "docs/bin.md" in result.stdout
    with backend.db(workspace) as db:
        runs = db.execute("SELECT summary FROM ingest_runs ORDER BY id")
    assert json.loads(runs[-1][0])["findings"][0]["code"] == "binary_file"


def _niceness_after_start(parent: int) -> int:
    parallel._start_worker(parent)
    return os.nice(0)


def test_workers_run_nicer_than_the_writer() -> None:
    # The writer must get a whole core whenever it has work (see WORKER_NICENESS).
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply(_niceness_after_start, (os.getpid(),))
    assert got == min(19, os.nice(0) + parallel.WORKER_NICENESS)
    assert parallel.WORKER_NICENESS > 0


def _with(
    rows: list[tuple[object, ...]], i: int, field: int, value: str
) -> list[tuple[object, ...]]:
    row = list(rows[i])
    row[field] = value
    return [*rows[:i], tuple(row), *rows[i + 1 :]]


def test_rows_that_refer_outside_their_result_are_refused(tmp_path: Path) -> None:
    # The writer writes a result's rows without SQLite's foreign-key checks: this is the check.
    disk = write(tmp_path, "docs/a.md", "# Title\n\nAlpha is first. Beta is second.\n\n- Gamma.\n")
    result = process_one("docs/a.md", disk, tmp_path / "_raw", 10**6)
    assert len(result.claims) == 3 and len(result.segments) == 3
    ingest_run.check_references(
        result, source_id_for("docs/a.md")
    )  # as made: every reference is among its rows
    other = "x_" + "0" * 32
    broken = {
        "segment's normalization": {"segments": _with(result.segments, 1, 1, other)},
        "claim's source": {"claims": _with(result.claims, 0, 1, other)},
        "evidence's claim": {"evidence": _with(result.evidence, 2, 1, other)},
        "evidence's segment": {"evidence": _with(result.evidence, 0, 2, other)},
        "state's claim": {"claim_states": _with(result.claim_states, 1, 0, other)},
        "state's source": {"claim_states": _with(result.claim_states, 1, 1, other)},
        "normalization's revision": {
            "normalization": {**result.normalization, "revision_id": other}
        },
    }
    for name, change in broken.items():
        with pytest.raises(RaytError) as raised:
            ingest_run.check_references(
                dataclasses.replace(result, **change), source_id_for("docs/a.md")
            )
        assert raised.value.code == "internal_error", name
        assert "docs/a.md" in str(raised.value), name


def test_waiting_out_a_thread_drops_its_error_and_waits_until_it_is_done() -> None:
    # When the ledger's commit fails, the index's settle is waited out before the index is
    # abandoned; the commit's error is the one raised, not the settle's.
    started, release = threading.Event(), threading.Event()

    def settle() -> None:
        started.set()
        release.wait(10)
        raise RuntimeError("the settle failed too")

    with ThreadPoolExecutor(1) as pool:
        settling = pool.submit(settle)
        started.wait(10)
        threading.Timer(0.2, release.set).start()
        parallel.wait_out(settling)
        assert settling.done()


def test_workers_results_arrive_whole_when_their_boxes_are_reused(tmp_path: Path) -> None:
    """900 files on two jobs make 17 chunks (of 56 files, the last of 4) for 14 boxes (`results`' window), and the
    writer, slowed down as each chunk is taken, lets the worker get as far ahead as it may:
    boxes carry a second chunk, each only after the writer took the first. The generation is
    the serial path's."""
    size, _, window = parallel._plan(900, 2)
    assert (size, window) == (56, 14) and -(-900 // size) == 17 > window
    hashes = []
    for jobs, env in (("1", {}), ("2", {"RAYTSYSTEM_PAUSE_AT": "ingest.take_chunk:0.05"})):
        root = tmp_path / f"jobs{jobs}"
        root.mkdir()
        assert run_cli("init", cwd=root).code == 0
        for i in range(900):
            write(root, f"docs/{i:04d}.md", f"# Note {i}\n\nFact {i} holds. It is number {i}.\n")
        result = run_cli("ingest", "--jobs", jobs, "--json", cwd=root, env=env)
        assert result.code == 0, result.stderr
        body = result.json()
        assert body["counts"]["new_revisions"] == 900
        hashes.append(body["generation"]["hash"])
    assert hashes[0] == hashes[1]


def test_a_box_read_short_is_an_internal_error_and_a_read_box_is_emptied() -> None:
    boxes = parallel.ResultBoxes(2)
    try:
        assert boxes.box(0) == boxes.box(2) != boxes.box(1)
        os.pwrite(boxes.box(3), b"results", 0)
        assert boxes.take(boxes.box(3), 7) == b"results"
        assert os.fstat(boxes.box(1)).st_size == 0  # its memory given back
        with pytest.raises(RaytError) as err:
            boxes.take(boxes.box(1), 7)
        assert err.value.code == "internal_error"
    finally:
        boxes.close()


def test_boxes_are_unlinked_temporary_files_where_there_is_no_memfd(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(os, "memfd_create", raising=False)
    with parallel.ResultBoxes(2) as boxes:
        assert os.fstat(boxes.box(0)).st_nlink == 0  # no name: nothing left behind
        os.pwrite(boxes.box(1), b"results", 0)
        assert boxes.take(boxes.box(1), 7) == b"results"
    assert boxes.fds == []
