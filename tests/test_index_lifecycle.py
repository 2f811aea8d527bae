"""Index files over many generations: old ones are pruned to `[index] keep`, a new one is
patched from a spare (an older index about to be pruned) when it can be, and copied from the
parent when it cannot (a reader still in the spare, another format, `keep = 1`); whatever the
path, the result is the index a rebuild from the ledger gives."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write

from raytsystem.errors import IntegrityError, NotFound
from raytsystem.storage import index_file, index_folder, index_writer

SQLITE = {"RAYTSYSTEM_DATABASE_URL": ""}


def ingest(ws: Path) -> dict[str, Any]:
    result = run_cli("ingest", "--json", cwd=ws, env=SQLITE)
    assert result.code == 0, result.stderr
    return result.json()


def files(ws: Path) -> list[str]:
    return [p.name for p in index_folder.index_files(ws / ".raytsystem" / "indexes")]


def edit(ws: Path, n: int) -> None:
    write(
        ws, f"docs/note-{n % 3}.md", f"# Note {n}\n\nThe ledger keeps revision {n} of this note.\n"
    )


@pytest.fixture
def ws(tmp_path: Path, _workspace_template: Path) -> Path:
    import shutil

    root = tmp_path / "ws"
    shutil.copytree(_workspace_template, root, symlinks=True)
    for n in range(3):
        edit(root, n)
    write(root, "docs/stable.md", "# Stable\n\nThis file never changes between generations.\n")
    assert ingest(root)["index"] == {"built_from": "ledger", "pruned": 0, "spare_made": True}
    assert (root / ".raytsystem" / "indexes" / index_folder.SPARE_NAME).is_file()
    return root


def rebuild_is_same(ws: Path) -> None:
    result = run_cli("index", "rebuild", "--json", cwd=ws, env=SQLITE)
    assert result.code == 0, result.stderr
    assert result.json()["same_as_previous"] is True


def test_generations_recycle_a_spare_and_keep_two_indexes(ws: Path) -> None:
    for n in range(3, 9):  # the first change takes the copy the first ingest left
        edit(ws, n)
        report = ingest(ws)
        assert report["index"] == {"built_from": "spare", "pruned": 0, "spare_made": False}
        assert not (ws / ".raytsystem" / "indexes" / index_folder.SPARE_NAME).exists()
        assert files(ws) == [
            f"{report['generation']['number']:06d}-{report['generation']['hash'][:16]}.sqlite3",
            f"{report['parent']['number']:06d}-{report['parent']['hash'][:16]}.sqlite3",
        ]
    path = sorted((ws / ".raytsystem" / "indexes").glob("*.sqlite3"))[-1]
    with sqlite3.connect(path) as conn:
        assert index_file.check_rows(conn) == []
        assert index_file.read_meta(conn)["built_from"] == "spare"
    rebuild_is_same(ws)
    answer = run_cli("query", "revision 8 of this note", "--json", cwd=ws, env=SQLITE).json()
    assert answer["status"] == "answered"
    assert "revision 8" in answer["answer"]


def test_keep_one_copies_the_parent_and_keeps_one_file(ws: Path) -> None:
    config = ws / "raytsystem.toml"
    config.write_text(config.read_text().replace("keep = 2", "keep = 1"))
    for n in range(3, 6):
        edit(ws, n)
        report = ingest(ws)
        assert report["index"]["built_from"] == "parent"
        assert report["index"]["spare_made"] is False
        assert len(files(ws)) == 1
    assert not (ws / ".raytsystem" / "indexes" / index_folder.SPARE_NAME).exists()
    rebuild_is_same(ws)


def test_an_invalid_keep_is_a_config_error(ws: Path) -> None:
    config = ws / "raytsystem.toml"
    config.write_text(config.read_text().replace("keep = 2", "keep = 0"))
    result = run_cli("ingest", "--json", cwd=ws, env=SQLITE)
    assert result.code != 0
    assert result.json()["error"]["code"] == "config_invalid"


def test_a_reader_in_the_spare_makes_the_writer_copy(ws: Path) -> None:
    edit(ws, 3)
    ingest(ws)
    spare = ws / ".raytsystem" / "indexes" / files(ws)[1]
    reader = sqlite3.connect(f"file:{spare}?mode=ro", uri=True)
    try:
        reader.execute("BEGIN")
        before = index_file.read_meta(reader)  # holds a shared lock until the end
        edit(ws, 4)
        assert ingest(ws)["index"]["built_from"] == "parent"
        # The reader still reads the generation it opened, whole.
        assert index_file.read_meta(reader) == before
        assert index_file.check_rows(reader) == []
    finally:
        reader.close()
    assert len(files(ws)) == 2
    rebuild_is_same(ws)


def test_a_spare_of_another_format_is_not_recycled(ws: Path) -> None:
    edit(ws, 3)
    ingest(ws)
    spare = ws / ".raytsystem" / "indexes" / files(ws)[1]
    with sqlite3.connect(spare) as conn:
        conn.execute("UPDATE meta SET value = 'old' WHERE key = 'format'")
    edit(ws, 4)
    assert ingest(ws)["index"]["built_from"] == "parent"
    rebuild_is_same(ws)


def test_a_leftover_build_file_is_removed(ws: Path) -> None:
    leftover = ws / ".raytsystem" / "indexes" / ".building-999999.sqlite3"
    leftover.write_bytes(b"half a file from a killed ingest")
    edit(ws, 3)
    ingest(ws)
    assert not leftover.exists()


def test_a_pruned_generation_is_missing_until_rebuilt(ws: Path) -> None:
    for n in range(3, 6):
        edit(ws, n)
        ingest(ws)
    result = run_cli("query", "revision", "--generation", "1", "--json", cwd=ws, env=SQLITE)
    assert result.code == 4
    error = result.json()["error"]
    assert error["code"] == "index_missing"
    assert "raytsystem index rebuild 1" in error["message"]
    assert run_cli("index", "rebuild", "1", "--json", cwd=ws, env=SQLITE).code == 0
    answer = run_cli("query", "revision", "--generation", "1", "--json", cwd=ws, env=SQLITE)
    assert answer.code == 0 and answer.json()["generation"]["number"] == 1


def test_files_come_and_go_between_spare_and_parent(ws: Path) -> None:
    for n in range(3, 8):
        edit(ws, n)
        write(ws, f"docs/extra-{n}.md", f"# Extra {n}\n\nA file that lives for two generations.\n")
        gone = ws / "docs" / f"extra-{n - 2}.md"
        if gone.exists():
            gone.unlink()
        ingest(ws)
    assert ingest(ws)["created"] is False
    edit(ws, 8)
    assert ingest(ws)["index"]["built_from"] == "spare"
    rebuild_is_same(ws)


def test_a_stale_higher_numbered_file_never_displaces_the_new_index(ws: Path) -> None:
    indexes = ws / ".raytsystem" / "indexes"
    stale = indexes / "000120-0123456789abcdef.sqlite3"  # e.g. left by another ledger
    stale.write_bytes(b"not ours")
    edit(ws, 3)
    report = ingest(ws)
    number, digest = report["generation"]["number"], report["generation"]["hash"]
    assert (indexes / f"{number:06d}-{digest[:16]}.sqlite3").exists()
    assert not stale.exists()
    answer = run_cli("query", "revision 3 of this note", "--json", cwd=ws, env=SQLITE)
    assert answer.code == 0 and answer.json()["status"] == "answered"


def _an_index(ws: Path) -> tuple[Path, str]:
    path = ws / ".raytsystem" / "indexes" / files(ws)[0]
    with sqlite3.connect(path) as conn:
        return path, index_file.read_meta(conn)["generation_hash"]


def test_a_file_taken_by_an_ingest_between_open_and_lock_is_never_read(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, generation = _an_index(ws)
    real = index_file.read_meta

    def taken_meanwhile(conn: sqlite3.Connection) -> dict[str, str]:
        meta = real(conn)
        path.rename(path.with_name(".building-1.sqlite3"))  # what a recycling ingest does
        return meta

    monkeypatch.setattr(index_file, "read_meta", taken_meanwhile)
    with pytest.raises(NotFound) as caught, index_file.open_index(path, generation):
        pass
    assert caught.value.code == "index_missing"


def test_a_file_locked_by_an_ingest_is_missing_at_once(ws: Path) -> None:
    path, generation = _an_index(ws)
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN EXCLUSIVE")
        with pytest.raises(NotFound) as caught, index_file.open_index(path, generation):
            pass
        assert caught.value.code == "index_missing"
    finally:
        writer.close()
    with index_file.open_index(path, generation) as conn:  # free again: reads as before
        assert index_file.check_rows(conn) == []


# --- blocks: how a writer finds the rows of the sources it replaces --------------------------


def _row(kind: str, n: int, source: str) -> tuple[str, ...]:
    """An index row (the fields of IndexRow) of `kind`, the n-th of `source`."""
    return (kind, f"{kind}-{source}-{n}", "0" * 64, source, f"{source}.md", "[]", "paragraph",
            "", "", "", "", "", "", f"word{n} common", "", source)  # fmt: skip


def _writer(tmp_path: Path, rows: dict[str, list[tuple[str, ...]]]) -> index_writer.IndexWriter:
    writer = index_writer.IndexWriter(tmp_path / "indexes")
    writer.replace(rows)
    return writer


def test_a_source_without_a_row_of_its_own_has_a_block(tmp_path: Path) -> None:
    # A source whose rows are segments only (no normalization to stand for it as a whole).
    rows = {
        "a": [_row("segment", 0, "a"), _row("source", 1, "a")],
        "b": [_row("segment", 0, "b"), _row("segment", 1, "b")],
    }
    writer = _writer(tmp_path, rows)
    path = tmp_path / "indexes" / "000001-0000000000000000.sqlite3"
    writer.finish(path, "0" * 64, 1)
    with sqlite3.connect(path) as conn:
        assert index_file.check_rows(conn) == []
        blocks = conn.execute("SELECT source_id, source_rowid, low, high FROM blocks").fetchall()
        assert sorted(blocks) == [("a", 2, 1, 2), ("b", None, 3, 4)]
        meta = index_file.read_meta(conn)
        assert meta["source_count"] == "1"  # the sources QUERY weighs claims by
        got = index_file.read_source_rows(conn, ["b", "a", "gone"])
    assert got == {"b": rows["b"], "a": rows["a"], "gone": []}


def test_a_replaced_source_leaves_no_row_and_others_keep_theirs(tmp_path: Path) -> None:
    writer = _writer(tmp_path, {s: [_row("segment", 0, s), _row("source", 1, s)] for s in "abc"})
    writer.replace({"b": [_row("segment", 5, "b")]})
    writer.delete(["c"])
    docs = writer.conn.execute("SELECT object_id FROM docs ORDER BY rowid").fetchall()
    assert [d for (d,) in docs] == ["segment-a-0", "source-a-1", "segment-b-5"]
    assert index_file._check_blocks(writer.conn) == []  # digests are recorded by finish()
    fts = sum(writer.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in index_file.FTS_TABLES.values())  # fmt: skip
    assert fts == 3
    writer.abandon()


def test_a_block_over_another_sources_row_is_refused(tmp_path: Path) -> None:
    writer = _writer(tmp_path, {s: [_row("segment", 0, s), _row("source", 1, s)] for s in "ab"})
    writer.conn.execute("UPDATE blocks SET high = high + 1 WHERE source_id = 'a'")
    with pytest.raises(IntegrityError) as caught:
        writer.delete(["a"])
    assert caught.value.code == "index_corrupt"
    (left,) = writer.conn.execute("SELECT count(*) FROM docs WHERE source_id = 'b'").fetchone()
    assert left == 2  # b's rows are still there
    writer.abandon()


def test_a_sources_block_holds_only_its_rows(tmp_path: Path) -> None:
    writer = index_writer.IndexWriter(tmp_path / "indexes")
    with pytest.raises(ValueError, match="a row of source b is among the rows of a"):
        writer.replace({"a": [_row("segment", 0, "a"), _row("segment", 0, "b")]})
    writer.abandon()


def test_a_damaged_block_in_the_parent_fails_closed_until_rebuilt(ws: Path) -> None:
    (ws / ".raytsystem" / "indexes" / index_folder.SPARE_NAME).unlink()  # the parent is copied
    (parent,) = index_folder.index_files(ws / ".raytsystem" / "indexes")
    with sqlite3.connect(parent) as conn:
        # The first source's block swallows the first row after it: another source's.
        source, path = conn.execute(
            "SELECT b.source_id, d.source_path FROM blocks b "
            "JOIN docs d ON d.rowid = b.source_rowid ORDER BY b.low LIMIT 1"
        ).fetchone()
        conn.execute("UPDATE blocks SET high = high + 1 WHERE source_id = ?", (source,))
    write(ws, path, "# Changed\n\nThis source changes, and its block is wrong.\n")
    failed = run_cli("ingest", "--json", cwd=ws, env=SQLITE)
    assert failed.code == 3, failed.stdout
    assert failed.json()["error"]["code"] == "index_corrupt"
    assert "index rebuild" in failed.json()["error"]["message"]
    assert run_cli("index", "rebuild", cwd=ws, env=SQLITE).code == 0
    assert ingest(ws)["generation"]["number"] == 2


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, (8 << 20) + 5, 20_000_001])
def test_a_direct_copy_is_the_file_byte_for_byte(tmp_path: Path, size: int) -> None:
    source, target = tmp_path / "index", tmp_path / "copy"
    source.write_bytes(random.Random(size).randbytes(size))
    if not index_folder._copy_direct(source, target):
        pytest.skip("this filesystem does not take direct writes")
    assert target.read_bytes() == source.read_bytes()
    assert not index_folder._copy_direct(source, target)  # never over an existing file
    assert target.read_bytes() == source.read_bytes()


def test_without_direct_writes_the_spare_is_copied_through_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    current = tmp_path / f"000001-{'ab' * 8}.sqlite3"
    current.write_bytes(random.Random(1).randbytes(100_000))
    monkeypatch.delattr(index_file.os, "O_DIRECT", raising=False)
    assert index_folder.wants_spare(tmp_path, keep=2)
    assert index_folder.make_spare(tmp_path, current)
    assert (tmp_path / index_folder.SPARE_NAME).read_bytes() == current.read_bytes()
    assert not index_folder.wants_spare(tmp_path, keep=2)  # one spare at most
    (tmp_path / index_folder.SPARE_NAME).unlink()
    assert index_folder.wants_spare(tmp_path, keep=2)  # one index file, room for another
    (tmp_path / f"000002-{'cd' * 8}.sqlite3").write_bytes(b"")
    assert not index_folder.wants_spare(tmp_path, keep=2)  # two: pruning keeps no more
    assert index_folder.wants_spare(tmp_path, keep=3)
    assert not index_folder.wants_spare(tmp_path, keep=1)  # no spare at all
