"""The raw-store contract, run against both `DiskBlobStore` and `MemoryBlobStore`.

One suite, two backends (the dulwich object-store pattern): whatever the memory store promises,
the disk store must keep too. Disk-only tests cover the on-disk layout, atomic publication and
stray temp files.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from raytsystem.errors import BlobMissing, ChecksumMismatch, IntegrityError, UsageError
from raytsystem.storage.blobs import DiskBlobStore, MemoryBlobStore, check_address
from raytsystem.storage.pack_writer import PackWriter
from raytsystem.storage.packs import pack_bytes, pack_entries

# --- filesystem access probe -------------------------------------------------------------------
# Audit hooks cannot be removed, so one is installed for the module and only records while a
# test holds `_watching_opens`. It proves an address is refused before the store opens anything.
_OPENS: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _OPENS is not None and event in ("open", "os.listdir", "os.scandir") and args:
        _OPENS.append(str(args[0]))


sys.addaudithook(_audit)


@contextlib.contextmanager
def _watching_opens() -> Iterator[list[str]]:
    global _OPENS
    _OPENS = []
    try:
        yield _OPENS
    finally:
        _OPENS = None


# --- the two backends --------------------------------------------------------------------------


@dataclass
class Backend:
    """A store plus the two ways a test can go behind its back, one per backend."""

    name: str
    store: DiskBlobStore | MemoryBlobStore
    corrupt: Callable[[str, bytes], None]  # replace a stored blob's bytes, as disk rot would
    plant: Callable[[str, bytes], None]  # put bytes under a name without any address check
    root: Path | None = None


def _disk(tmp: Path) -> Backend:
    root = tmp / "_raw"
    store = DiskBlobStore(root)

    def raw_path(address: str) -> Path:
        return root / "blake3" / address[:2] / address

    def corrupt(address: str, data: bytes) -> None:
        path = store.path(address)
        path.chmod(0o644)
        path.write_bytes(data)

    def plant(address: str, data: bytes) -> None:
        path = raw_path(address)
        if address and path.resolve().is_relative_to(tmp.resolve()):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    return Backend("disk", store, corrupt, plant, root)


def _memory(_tmp: Path) -> Backend:
    store = MemoryBlobStore()
    return Backend("memory", store, store.corrupt, store.corrupt)


BACKENDS = {"disk": _disk, "memory": _memory}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return BACKENDS[request.param](tmp_path)


def b3(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


ABSENT = "0" * 64
MALFORMED = [
    pytest.param("../x", id="dotdot"),
    pytest.param("../../" + "a" * 58, id="dotdot-64-chars"),
    pytest.param("A" * 64, id="uppercase-hex"),
    pytest.param("a" * 63, id="63-chars"),
    pytest.param("a" * 65, id="65-chars"),
    pytest.param("ab/" + "c" * 61, id="slash"),
    pytest.param("ab\\" + "c" * 61, id="backslash"),
    pytest.param("", id="empty"),
    pytest.param("g" * 64, id="not-hex"),
    pytest.param(" " + "a" * 63, id="leading-space"),
]


# --- the contract ------------------------------------------------------------------------------


def test_put_returns_blake3_hex_of_the_bytes(backend: Backend) -> None:
    data = b"hello, raw store\n"
    assert backend.store.put(data) == b3(data)
    assert len(b3(data)) == 64


def test_get_round_trips_the_exact_bytes(backend: Backend) -> None:
    data = bytes(range(256)) * 3
    address = backend.store.put(data)
    assert backend.store.get(address) == data


def test_empty_bytes_are_a_valid_blob(backend: Backend) -> None:
    address = backend.store.put(b"")
    assert address == b3(b"")
    assert backend.store.get(address) == b""


def test_put_twice_is_idempotent(backend: Backend) -> None:
    first = backend.store.put(b"same bytes")
    second = backend.store.put(b"same bytes")
    assert first == second
    assert list(backend.store.addresses()) == [first]
    assert backend.store.get(first) == b"same bytes"


def test_has_is_true_only_after_put(backend: Backend) -> None:
    address = b3(b"not yet")
    assert backend.store.has(address) is False
    backend.store.put(b"not yet")
    assert backend.store.has(address) is True
    assert backend.store.has(ABSENT) is False


def test_get_of_absent_address_raises_blob_missing(backend: Backend) -> None:
    with pytest.raises(BlobMissing) as info:
        backend.store.get(ABSENT)
    assert info.value.code == "blob_missing"
    assert info.value.details["address"] == ABSENT
    assert isinstance(info.value, IntegrityError)


def test_rehash_of_absent_address_raises_blob_missing(backend: Backend) -> None:
    with pytest.raises(BlobMissing):
        backend.store.rehash(ABSENT)


def test_get_of_corrupted_blob_raises_checksum_mismatch_with_both_hashes(
    backend: Backend,
) -> None:
    address = backend.store.put(b"original bytes")
    backend.corrupt(address, b"rotten bytes")
    with pytest.raises(ChecksumMismatch) as info:
        backend.store.get(address)
    assert info.value.expected == address
    assert info.value.got == b3(b"rotten bytes")
    assert info.value.code == "blob_corrupt"
    assert info.value.exit_status == 3


def test_rehash_reports_what_the_bytes_hash_to_now(backend: Backend) -> None:
    address = backend.store.put(b"original bytes")
    assert backend.store.rehash(address) == address
    backend.corrupt(address, b"rotten bytes")
    assert backend.store.rehash(address) == b3(b"rotten bytes")


MIB = 1 << 20


@pytest.mark.parametrize("size", [0, 1, 4096, MIB - 1, MIB, MIB + 1, 3 * MIB + 5])
def test_rehash_and_rehash_shard_read_every_byte(tmp_path: Path, size: int) -> None:
    """Reads are sized by the file (its size and one byte more, at most a MiB): every size
    around those edges hashes all its bytes, and a blob grown since it was stored hashes to
    what it holds now."""
    store = DiskBlobStore(tmp_path)
    data = os.urandom(size)
    address = store.put(data)
    assert store.rehash(address) == address
    assert store.rehash_shard(address[:2]) == [(address, address, size)]
    path = store.path(address)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    with open(path, "ab") as handle:
        handle.write(b"+" * (MIB + 3))
    assert store.rehash(address) == b3(data + b"+" * (MIB + 3))
    assert store.rehash_shard(address[:2])[0][2] == size + MIB + 3


def test_addresses_lists_every_put_sorted(backend: Backend) -> None:
    assert list(backend.store.addresses()) == []
    put = {backend.store.put(f"blob {i}".encode()) for i in range(20)}
    listed = list(backend.store.addresses())
    assert listed == sorted(put)


@pytest.mark.parametrize("address", MALFORMED)
@pytest.mark.parametrize("operation", ["get", "has", "rehash"])
def test_malformed_address_is_refused_before_any_lookup(
    backend: Backend, address: str, operation: str
) -> None:
    # A decoy stored under the crafted name: if the store looked it up, it would find it.
    backend.plant(address, b"decoy")
    with _watching_opens() as opens, pytest.raises(UsageError) as info:
        getattr(backend.store, operation)(address)
    assert info.value.code == "invalid_address"
    assert info.value.exit_status == 2
    assert opens == []


@pytest.mark.parametrize("address", MALFORMED)
def test_check_address_refuses_malformed(address: str) -> None:
    with pytest.raises(UsageError) as info:
        check_address(address)
    assert info.value.code == "invalid_address"


def test_check_address_refuses_trailing_newline() -> None:
    with pytest.raises(UsageError):
        check_address("a" * 64 + "\n")


def test_check_address_refuses_non_strings() -> None:
    with pytest.raises(UsageError):
        check_address(None)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        check_address(b"a" * 64)  # type: ignore[arg-type]


@given(data=st.binary(max_size=4096))
def test_property_round_trip_on_both_stores(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    tmp = tmp_path_factory.mktemp("blobs")
    for make in BACKENDS.values():
        store = make(tmp).store
        address = store.put(data)
        assert address == b3(data)
        assert store.get(address) == data
        assert store.rehash(address) == address


@given(data=st.binary(max_size=4096), other=st.binary(max_size=64))
def test_property_put_is_idempotent_on_both_stores(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, other: bytes
) -> None:
    tmp = tmp_path_factory.mktemp("blobs")
    for make in BACKENDS.values():
        store = make(tmp).store
        first = store.put(data)
        store.put(other)
        assert store.put(data) == first
        assert store.get(first) == data
        assert list(store.addresses()) == sorted({b3(data), b3(other)})


# --- disk only ---------------------------------------------------------------------------------


@pytest.fixture
def disk(tmp_path: Path) -> DiskBlobStore:
    return DiskBlobStore(tmp_path / "_raw")


def _files(root: Path) -> Iterator[Path]:
    return (p for p in sorted(root.rglob("*")) if p.is_file())


def test_disk_layout_is_blake3_shard_address(disk: DiskBlobStore, tmp_path: Path) -> None:
    address = disk.put(b"layout")
    expected = tmp_path / "_raw" / "blake3" / address[:2] / address
    assert disk.path(address) == expected
    assert list(_files(tmp_path / "_raw")) == [expected]
    assert expected.read_bytes() == b"layout"


def test_disk_blob_is_read_only(disk: DiskBlobStore) -> None:
    address = disk.put(b"read only")
    assert stat.S_IMODE(disk.path(address).stat().st_mode) == 0o444


def test_disk_put_leaves_no_temp_file(disk: DiskBlobStore, tmp_path: Path) -> None:
    for i in range(5):
        disk.put(f"blob {i}".encode())
    names = [p.name for p in (tmp_path / "_raw").rglob("*")]
    assert not [n for n in names if n.startswith(".tmp-")]
    assert disk.stray_files() == []


def test_disk_second_put_does_not_touch_the_file(disk: DiskBlobStore) -> None:
    address = disk.put(b"write once")
    path = disk.path(address)
    before = path.stat()
    os.utime(path, ns=(before.st_atime_ns, 1_000_000_000))  # a mark a rewrite would erase
    marked = path.stat()
    assert disk.put(b"write once") == address
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (marked.st_ino, marked.st_mtime_ns)
    assert stat.S_IMODE(after.st_mode) == 0o444
    assert path.read_bytes() == b"write once"


def test_disk_put_does_not_repair_a_corrupted_blob(disk: DiskBlobStore) -> None:
    # Write-once means write-once: a rotten blob is reported by get/verify, never overwritten.
    address = disk.put(b"original")
    path = disk.path(address)
    path.chmod(0o644)
    path.write_bytes(b"rotten")
    disk.put(b"original")
    with pytest.raises(ChecksumMismatch):
        disk.get(address)


def test_disk_stray_files_reports_leftover_temp_file(disk: DiskBlobStore) -> None:
    address = disk.put(b"real blob")
    shard = disk.path(address).parent
    leftover = shard / f".tmp-{address[:16]}-1234-deadbeef"
    leftover.write_bytes(b"half a blob")
    assert disk.stray_files() == [leftover]
    # A stray is never listed as a blob.
    assert list(disk.addresses()) == [address]


def test_disk_stray_files_reports_blob_in_the_wrong_shard(disk: DiskBlobStore) -> None:
    address = disk.put(b"misplaced")
    wrong_shard = disk.root / "blake3" / ("00" if address[:2] != "00" else "11")
    wrong_shard.mkdir()
    misplaced = wrong_shard / address
    misplaced.write_bytes(b"misplaced")
    assert disk.stray_files() == [misplaced]


def test_disk_store_on_missing_root_is_empty(tmp_path: Path) -> None:
    store = DiskBlobStore(tmp_path / "nowhere")
    assert list(store.addresses()) == []
    assert store.stray_files() == []
    assert store.has(ABSENT) is False


def test_disk_store_is_readable_by_a_second_instance(tmp_path: Path) -> None:
    address = DiskBlobStore(tmp_path / "_raw").put(b"persisted")
    assert DiskBlobStore(tmp_path / "_raw").get(address) == b"persisted"


# --- packs: how ingest writes many blobs, one file per chunk of files and two syncs a batch --


def _staged(area: str) -> list[str]:
    """The staging area's files, but for the `.gitignore` that keeps them out of git."""
    assert Path(area, ".gitignore").read_text(encoding="utf-8") == "*\n"
    return sorted(set(os.listdir(area)) - {".gitignore"})


def test_a_staged_packs_blobs_are_not_found_until_it_is_published(
    disk: DiskBlobStore, tmp_path: Path
) -> None:
    with disk.staging_area() as area:
        pack = PackWriter(disk, area)
        first, second = pack.add(b"staged bytes"), pack.add(b"more bytes")
        assert first == b3(b"staged bytes") and second == b3(b"more bytes")
        [staged] = pack.seal()
        assert _staged(area) == [Path(staged[1]).name]
        assert not disk.has(first) and not disk.has(second)
        with pytest.raises(BlobMissing):
            disk.get(first)
        disk.publish([staged])
        assert disk.get(first) == b"staged bytes" and disk.get(second) == b"more bytes"
        assert _staged(area) == []
        packed = tmp_path / "_raw" / "blake3" / "packs" / staged[0]
        assert b3(packed.read_bytes()) + ".pack" == staged[0]  # named by its own bytes
        assert not stat.S_IMODE(packed.stat().st_mode) & 0o222
        assert not disk.path(first).exists()  # packed, not loose
    assert not (tmp_path / "_raw" / ".staging").exists()
    assert disk.stray_files() == []
    assert list(disk.addresses()) == sorted([first, second])


def test_the_same_blobs_packed_twice_publish_once(disk: DiskBlobStore) -> None:
    with disk.staging_area() as area:
        one, other = PackWriter(disk, area), PackWriter(disk, area)
        for pack in (one, other):
            pack.add(b"twice")
            pack.add(b"twice")  # added once
        [first], [second] = one.seal(), other.seal()
        assert first[0] == second[0] and first[1] != second[1]
        disk.publish([first, second])
        disk.publish([first])  # a later batch with a result of the same chunk: nothing to do
        assert disk.get(b3(b"twice")) == b"twice" and _staged(area) == []
        assert disk.pack_names() == [first[0]]


def test_a_pack_leaves_out_what_the_store_has(disk: DiskBlobStore) -> None:
    loose = disk.put(b"already here")
    with disk.staging_area() as area:
        pack = PackWriter(disk, area)
        pack.add(b"packed before")
        disk.publish(pack.seal())
        again = PackWriter(disk, area)
        assert again.add(b"already here") == loose
        again.add(b"packed before")
        assert again.seal() == [] and _staged(area) == []


def test_a_pack_published_by_another_store_is_found_on_a_miss(tmp_path: Path) -> None:
    reader, writer = DiskBlobStore(tmp_path / "_raw"), DiskBlobStore(tmp_path / "_raw")
    assert not reader.has(b3(b"later"))  # the reader has read the (no) packs' tables
    with writer.staging_area() as area:
        pack = PackWriter(writer, area)
        address = pack.add(b"later")
        writer.publish(pack.seal())
    assert not reader.has(address)  # as far as it has looked: a pack is not found by `has`...
    assert reader.get(address) == b"later"  # ...but a read that misses looks again
    assert reader.has(address) and reader.rehash(address) == address


@given(st.dictionaries(st.binary(max_size=8), st.binary(max_size=300), max_size=12))
def test_a_pack_gives_back_each_blob_it_was_made_of(items: dict[bytes, bytes]) -> None:
    blobs = {b3(data + key): data for key, data in items.items()}  # any address, any bytes
    data = pack_bytes(blobs)
    assert pack_bytes(dict(reversed(blobs.items()))) == data  # the same blobs, the same pack
    entries = pack_entries(lambda offset, n: data[offset : offset + n], len(data))
    assert [a for a, _, _ in entries] == sorted(blobs)
    assert {a: data[o : o + n] for a, o, n in entries} == blobs


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: b"RAYTPAKX" + d[8:],  # not a pack's magic
        lambda d: d[:8] + (10**6).to_bytes(4, "little") + d[12:],  # a table longer than the file
        lambda d: d[:-1],  # the last blob's entry points past the end
        lambda d: d[:4],  # shorter than the header
    ],
)
def test_a_damaged_pack_table_is_refused(damage: Callable[[bytes], bytes]) -> None:
    data = damage(pack_bytes({b3(b"a"): b"a", b3(b"bb"): b"bb"}))
    with pytest.raises(ValueError):
        pack_entries(lambda offset, n: data[offset : offset + n], len(data))


def _packed(disk: DiskBlobStore, *blobs: bytes) -> Path:
    with disk.staging_area() as area:
        pack = PackWriter(disk, area)
        for data in blobs:
            pack.add(data)
        [staged] = pack.seal()
        disk.publish([staged])
    return disk.root / "blake3" / "packs" / staged[0]


def test_an_altered_packed_blob_is_found(disk: DiskBlobStore) -> None:
    path = _packed(disk, b"first blob", b"second blob")
    path.chmod(0o644)
    path.write_bytes(path.read_bytes().replace(b"second blob", b"second blub"))
    address = b3(b"second blob")
    with pytest.raises(ChecksumMismatch):
        disk.get(address)
    assert disk.rehash(address) == b3(b"second blub")
    assert disk.get(b3(b"first blob")) == b"first blob"  # the pack's other blob is intact
    rows, problem = disk.rehash_unit(f"packs/{path.name}")
    assert sorted(rows) == sorted(
        [(b3(b"first blob"), b3(b"first blob"), 10), (address, b3(b"second blub"), 11)]
    )
    assert problem and "not to its name" in problem


def test_a_pack_that_is_not_one_hides_its_blobs_and_is_reported(disk: DiskBlobStore) -> None:
    path = _packed(disk, b"lost with its pack")
    path.chmod(0o644)
    path.write_bytes(b"garbage!" + path.read_bytes()[8:])
    fresh = DiskBlobStore(disk.root)
    with pytest.raises(BlobMissing):
        fresh.get(b3(b"lost with its pack"))
    assert list(fresh.addresses()) == []
    rows, problem = fresh.rehash_unit(f"packs/{path.name}")
    assert rows == [] and problem and "not a readable pack" in problem
    assert fresh.hash_units() == [f"packs/{path.name}"]


def test_a_foreign_file_among_the_packs_is_a_stray(disk: DiskBlobStore) -> None:
    path = _packed(disk, b"kept")
    foreign = path.parent / "notes.txt"
    foreign.write_bytes(b"not a pack")
    assert disk.stray_files() == [foreign]
    assert disk.hash_units() == [f"packs/{path.name}"]  # strays are not hashed as packs


def test_a_pack_is_written_once_its_blobs_pass_the_size_cap(
    disk: DiskBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import raytsystem.storage.pack_writer as pack_writer_module

    monkeypatch.setattr(pack_writer_module, "PACK_BYTES", 100)
    blobs = [bytes([i]) * 60 for i in range(3)]
    with disk.staging_area() as area:
        pack = PackWriter(disk, area)
        for data in blobs:
            pack.add(data)
        pack.add(blobs[0])  # in a pack written already: not packed again
        sealed = pack.seal()
        assert len(sealed) == 2 and len(_staged(area)) == 2  # 60 + 60 passed 100; then 60
        disk.publish(sealed)
    assert [disk.get(b3(data)) for data in blobs] == blobs
    assert len(disk.pack_names()) == 2


def test_a_blob_whose_pack_went_is_found_where_it_is_now(disk: DiskBlobStore) -> None:
    """A long-lived store (the MCP server's) read a pack's table; the pack is removed and
    the blob stored on its own: the store looks again instead of failing."""
    path = _packed(disk, b"moved")
    address = b3(b"moved")
    assert disk.get(address) == b"moved"
    path.unlink()
    disk.put(b"moved")
    assert disk.get(address) == b"moved" and disk.rehash(address) == address
    path2 = _packed(disk, b"gone for good")
    path2.unlink()
    with pytest.raises(BlobMissing):
        disk.get(b3(b"gone for good"))


def test_a_table_read_short_is_refused() -> None:
    data = pack_bytes({b3(b"a"): b"a", b3(b"bb"): b"bb"})
    with pytest.raises(ValueError, match="cut short"):  # the file shrank after its size was read
        pack_entries(lambda offset, n: data[offset : offset + n - (offset > 0)], len(data))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_pipe_named_like_a_pack_is_a_stray_and_never_opened(disk: DiskBlobStore) -> None:
    path = _packed(disk, b"real")
    fifo = path.parent / ("f" * 64 + ".pack")
    os.mkfifo(fifo)
    fresh = DiskBlobStore(disk.root)
    assert fresh.get(b3(b"real")) == b"real"  # reading the tables did not block on the pipe
    assert fresh.stray_files() == [fifo]
    assert fresh.hash_units() == [f"packs/{path.name}"]


def test_a_lookup_by_search_and_by_dictionary_agree(disk: DiskBlobStore) -> None:
    """A store searches the tables as read for its first lookups and then builds a
    dictionary (PackTables.SEARCHES): both find every blob where it is, the first pack
    (by name) holding it when several do, and nothing for a blob no pack has."""
    from raytsystem.storage.packs import PackTables

    blobs = [f"blob {i}".encode() for i in range(2 * PackTables.SEARCHES)]
    for part in range(4):  # four packs; each shares one blob with the next
        _packed(disk, *blobs[part * 32 : part * 32 + 33])
    searched, built = DiskBlobStore(disk.root), DiskBlobStore(disk.root)
    for data in blobs * 2:  # `built` passes SEARCHES lookups in the first round
        assert built.get(b3(data)) == data
    by_search = [searched.location(b3(data)) for data in blobs[:10]]
    assert by_search == [built.location(b3(data)) for data in blobs[:10]]
    shared = b3(blobs[32])
    assert searched.location(shared) == built.location(shared)
    assert searched.location(b3(b"in no pack")) is None and not built.has(b3(b"in no pack"))


def test_staging_area_removes_what_a_killed_run_left(disk: DiskBlobStore, tmp_path: Path) -> None:
    leftover = tmp_path / "_raw" / ".staging" / ("0" * 64 + "-1-abcd")
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"half written")
    with disk.staging_area() as area:
        assert _staged(area) == []
    assert not leftover.parent.exists()
