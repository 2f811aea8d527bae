"""The content-addressed raw store (`_raw/`).

A blob is exact bytes stored once under its BLAKE3 address:
`_raw/blake3/<first 2 hex>/<64 hex>`. Blobs are write-once: `put` writes a temp file in the
destination directory, fsyncs it, makes it read-only, publishes it with `os.link` (which never
replaces an existing file), removes the temp name and fsyncs the directory. A crash leaves either
no blob or a complete one; at worst a stray `.tmp-*` file that `verify` reports.

Ingest's workers write the new blobs of a chunk of files as one read-only *pack* instead
(storage/packs.py, ADR 0025), collected by `PackWriter` (storage/pack_writer.py) and staged
unsynced in `_raw/.staging/`; the parent `publish`es each batch: one filesystem sync (Linux
`syncfs`; one fsync per file elsewhere), a link per pack, one more sync for the names. The guarantee is `put`'s (nothing can be found before its bytes are on
disk) for two syncs per batch. A blob is found loose first, then in the packs; the packs'
tables are read once per store.

`get` always re-hashes what it read and raises `ChecksumMismatch` when the bytes no longer match
their address, so no caller can use altered bytes by accident. An address is checked for form
before it becomes a path, so a crafted ID can never name a file outside the store.

`DiskBlobStore` and `MemoryBlobStore` share one contract (tests/test_blobs.py runs the same
suite against both).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final, Protocol

from ..errors import BlobMissing, ChecksumMismatch, NotFound, UsageError
from ..syscalls import syncfs
from .addresses import ADDRESS_RE, ALGORITHM, address_of, check_address, hash_file, hasher
from .packs import PACK_NAME, PACKS, Location, PackTables, pack_entries, read_at, stage_pack

# `address_of` and `check_address` (addresses.py) are part of the store's interface too.
__all__ = [
    "STAGING",
    "BlobStore",
    "DiskBlobStore",
    "MemoryBlobStore",
    "address_of",
    "check_address",
]

STAGING: Final = ".staging"  # under the store's root, beside `blake3/`: same filesystem


class BlobStore(Protocol):
    def put(self, data: bytes) -> str: ...
    def get(self, address: str) -> bytes: ...
    def has(self, address: str) -> bool: ...
    def rehash(self, address: str) -> str: ...
    def addresses(self) -> Iterator[str]: ...


class MemoryBlobStore:
    """A blob store in a dict: the reference implementation of the contract, for tests."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}

    def put(self, data: bytes) -> str:
        address = address_of(data)
        self._blobs.setdefault(address, bytes(data))
        return address

    def get(self, address: str) -> bytes:
        check_address(address)
        try:
            data = self._blobs[address]
        except KeyError:
            raise BlobMissing(address) from None
        got = address_of(data)
        if got != address:
            raise ChecksumMismatch(address, address, got)
        return data

    def has(self, address: str) -> bool:
        return check_address(address) in self._blobs

    def rehash(self, address: str) -> str:
        check_address(address)
        if address not in self._blobs:
            raise BlobMissing(address)
        return address_of(self._blobs[address])

    def addresses(self) -> Iterator[str]:
        yield from sorted(self._blobs)

    def corrupt(self, address: str, data: bytes) -> None:
        """Test helper: replace a blob's bytes in place, as disk rot would."""
        self._blobs[address] = data


class DiskBlobStore:
    """Blobs as read-only files under `root/blake3/<2 hex>/<64 hex>` (loose) or in read-only
    packs under `root/blake3/packs/` (ADR 0025)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._base = root / ALGORITHM
        self._packs = self._base / PACKS
        self._tables: PackTables | None = None  # read on the first lookup in the packs
        self._published: set[tuple[str, str]] = set()  # staged packs this store linked

    def path(self, address: str) -> Path:
        """Where the blob is, or would be, loose."""
        check_address(address)
        return self._base / address[:2] / address

    def put(self, data: bytes) -> str:
        """Store `data` durably, on its own: fsync the file, publish it, fsync the directory."""
        address = address_of(data)
        final = self.path(address)
        if final.exists():
            return address
        directory = final.parent
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".tmp-{address[:16]}-{os.getpid()}-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        try:
            with os.fdopen(fd, "wb", closefd=True) as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            # link() refuses to replace: a concurrent writer of the same bytes simply wins.
            with contextlib.suppress(FileExistsError):
                os.link(tmp, final)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        _fsync(directory)
        return address

    # --- many blobs at once: packs staged by the workers, published by the ingest parent ------

    @contextlib.contextmanager
    def staging_area(self) -> Iterator[str]:
        """A folder for `PackWriter`, removed afterwards, whatever happens. The caller holds the
        workspace writer lock: what an earlier, killed run left there is removed first."""
        area = self.root / STAGING
        if area.exists():
            # A killed run may have linked packs without reaching its second sync: make their
            # names durable before anything can find them there and point a row at them.
            _sync(self._folders(), self.root)
            shutil.rmtree(area, ignore_errors=True)
        area.mkdir(parents=True)
        # Workspaces made before this folder existed do not git-ignore it.
        (area / ".gitignore").write_text("*\n", encoding="utf-8")
        try:
            yield str(area)
        finally:
            shutil.rmtree(area, ignore_errors=True)

    def publish(self, staged: Iterable[tuple[str, str]]) -> None:
        """Make staged packs, (pack name, temp file) from `PackWriter.seal`, durable, then
        visible, then their names durable; a pack published before is skipped.

        One filesystem sync covers every temp file (Linux `syncfs`; elsewhere one fsync per
        file), so a batch costs two syncs, however many blobs its packs hold."""
        pending = sorted(set(staged) - self._published)
        if not pending:
            return
        _sync([tmp for _, tmp in pending], self.root)
        if not self._packs.is_dir():
            self._packs.mkdir(parents=True, exist_ok=True)
        for name, tmp in pending:
            with contextlib.suppress(FileExistsError):  # the same pack staged twice
                os.link(tmp, self._packs / name)
            os.unlink(tmp)
            self._published.add((name, tmp))
            if self._tables is not None:
                self._tables.read(str(self._packs / name))
        # The names: the packs folder, and the base in case the packs folder is new.
        _sync([self._base, self._packs], self.root)

    def unpack(self, name: str) -> tuple[list[str], list[str]]:
        """Store each blob of pack `name` whose bytes still hash to its address on its own,
        then remove the pack: the repair of a damaged pack, whose good blobs would otherwise
        go with it. Returns (the addresses kept, those found damaged). The caller holds the
        workspace writer lock; a reader meanwhile finds the loose copy first."""
        if not PACK_NAME.fullmatch(name):
            raise UsageError(f"not a pack's name: {name!r}", code="invalid_pack")
        path = self._packs / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no pack {name} in {self._packs}", code="pack_not_found") from None
        try:
            entries = pack_entries(lambda offset, n: data[offset : offset + n], len(data))
        except ValueError:
            entries = []  # no table to trust: nothing in it can be told apart
        kept, damaged = [], []
        for address, offset, length in entries:
            blob = data[offset : offset + length]
            if address_of(blob) == address:
                self.put(blob)
                kept.append(address)
            else:
                damaged.append(address)
        path.unlink()
        _fsync(self._packs)
        self._forget(str(path))
        return kept, damaged

    # --- purging (ADR 0040) ------------------------------------------------------------------

    def purge(self, addresses: Iterable[str]) -> list[str]:
        """Remove the bytes of `addresses` from the store: a loose file is overwritten with
        zeros and unlinked; a pack holding any is written again without them (under the name
        its new bytes make, the other blobs' bytes as they were) and the old pack is zeroed
        where they were and unlinked. Returns the files it removed or rewrote. The caller
        holds the workspace writer lock; a reader meanwhile finds the other blobs in the new
        pack (a vanished pack is looked up again, as after `unpack`).

        Best effort below the file system: a copy-on-write file system, an SSD's remapping
        or a backup may keep the old blocks (the README says so)."""
        wanted = {check_address(a) for a in addresses}
        touched: list[str] = []
        for address in sorted(wanted):
            loose = self.path(address)
            if loose.is_file():
                _zero_and_unlink(loose, [(0, loose.stat().st_size)])
                touched.append(str(loose))
        packs = sorted({where[0] for a in wanted if (where := self._packed_at(a, look_again=True))})
        if not packs:
            return touched
        with self.staging_area() as staging_dir:
            for pack in packs:
                data = Path(pack).read_bytes()
                entries = pack_entries(
                    lambda offset, n, data=data: data[offset : offset + n],  # type: ignore[misc]
                    len(data),
                )
                kept = {a: data[o : o + n] for a, o, n in entries if a not in wanted}
                if kept:
                    self.publish([stage_pack(kept, staging_dir)])
                gone = [(o, n) for a, o, n in entries if a in wanted]
                _zero_and_unlink(Path(pack), gone)
                self._forget(pack)
                touched.append(pack)
        _fsync(self._packs)
        return touched

    # --- reading ---------------------------------------------------------------------------

    def pack_names(self) -> list[str]:
        try:
            return sorted(
                e.name
                for e in os.scandir(self._packs)
                if PACK_NAME.fullmatch(e.name) and e.is_file()  # never open a FIFO or a folder
            )
        except FileNotFoundError:
            return []

    def _look(self) -> PackTables:
        """Read the tables of the packs not read yet (published since, by any process)."""
        if self._tables is None:
            self._tables = PackTables()
        for name in self.pack_names():
            if name not in self._tables.names:
                self._tables.read(str(self._packs / name))
        return self._tables

    def _packed_at(self, address: str, *, look_again: bool) -> Location | None:
        """Where `address` is packed, from the tables read so far; with `look_again`, a miss
        first reads the tables of packs published since."""
        tables = self._tables or self._look()
        where = tables.find(address)
        if where is None and look_again:
            known = len(tables.names)
            if len(self._look().names) != known:
                where = tables.find(address)
        return where

    def location(self, address: str) -> tuple[Path, int, int] | None:
        """(file, offset, length) of the blob's bytes: its own file, else the pack that holds
        it; None when it is in neither."""
        loose = self.path(address)
        with contextlib.suppress(FileNotFoundError):
            return loose, 0, loose.stat().st_size
        where = self._packed_at(address, look_again=True)
        return None if where is None else (Path(where[0]), where[1], where[2])

    def _read(self, address: str) -> bytes:
        try:
            return self.path(address).read_bytes()
        except FileNotFoundError:
            pass
        where = self._packed_at(address, look_again=True)
        if where is None:
            raise BlobMissing(address)
        pack, offset, length = where
        try:
            fd = os.open(pack, os.O_RDONLY)
        except FileNotFoundError:
            # The pack is gone (a repair removed it, the blob stored again elsewhere): forget
            # what its table said and look once more.
            self._forget(pack)
            if (where := self._packed_at(address, look_again=True)) is None:
                raise BlobMissing(address) from None
            pack, offset, length = where
            fd = os.open(pack, os.O_RDONLY)
        try:
            return read_at(fd, length, offset)
        finally:
            os.close(fd)

    def _forget(self, pack: str) -> None:
        if self._tables is not None:
            self._tables.forget(pack)

    def get(self, address: str) -> bytes:
        data = self._read(address)
        got = address_of(data)
        if got != address:
            raise ChecksumMismatch(address, address, got)
        return data

    def has(self, address: str) -> bool:
        """Whether the blob is stored, as far as this store has looked: a pack published by
        another process after this store first read the tables is not seen (whoever acts on a
        False then stores the blob again, which is harmless)."""
        return self.path(address).is_file() or (
            self._packed_at(address, look_again=False) is not None
        )

    def rehash(self, address: str) -> str:
        """Hash the blob's bytes as they are now and return the address they make."""
        try:
            return hash_file(self.path(address))[0]
        except FileNotFoundError:
            pass
        return address_of(self._read(address))

    # --- the whole store: verify ------------------------------------------------------------

    def _folders(self) -> list[Path]:
        shards = [self._base / name for name in self.shards()]
        return [self._base, *shards, *([self._packs] if self._packs.is_dir() else [])]

    def shards(self) -> list[str]:
        if not self._base.is_dir():
            return []
        return sorted(e.name for e in os.scandir(self._base) if e.is_dir() and e.name != PACKS)

    def hash_units(self) -> list[str]:
        """What `rehash_unit` takes: each shard folder, then each pack as `packs/<name>`."""
        return [*self.shards(), *(f"{PACKS}/{name}" for name in self.pack_names())]

    def rehash_unit(self, unit: str) -> tuple[list[tuple[str, str, int]], str | None]:
        """(address, what its bytes hash to now or "" if unreadable, size) for each blob of a
        shard or a pack, and what is wrong with the pack as a whole, if anything."""
        if unit.startswith(f"{PACKS}/"):
            return self.rehash_pack(unit.removeprefix(f"{PACKS}/"))
        return self.rehash_shard(unit), None

    def rehash_shard(self, shard: str) -> list[tuple[str, str, int]]:
        """(address, what its bytes hash to now or "" if unreadable, size) for a shard's blobs.

        The fast path of `verify`: one directory scan and one read per blob, no per-blob
        path objects; large blobs are streamed through BLAKE3's own threads.
        """
        out = []
        for entry in sorted(os.scandir(self._base / shard), key=lambda e: e.name):
            if not ADDRESS_RE.fullmatch(entry.name):
                continue
            try:
                out.append((entry.name, *hash_file(entry.path)))
            except OSError:
                out.append((entry.name, "", 0))
        return out

    def rehash_pack(self, name: str) -> tuple[list[tuple[str, str, int]], str | None]:
        """A pack's blobs as `rehash_shard` gives a shard's, read in one go, and what is wrong
        with the pack: its bytes no longer hash to its name, or its table is not a pack's."""
        try:
            data = (self._packs / name).read_bytes()
        except OSError as exc:
            return [], f"cannot be read: {exc.strerror}"
        view = memoryview(data)
        try:
            entries = pack_entries(lambda offset, n: bytes(view[offset : offset + n]), len(data))
        except ValueError as exc:
            return [], f"is not a readable pack: {exc}"
        rows = [(a, address_of(view[o : o + n]), n) for a, o, n in entries]
        whole = hasher(len(data))
        whole.update(data)
        got = whole.hexdigest()
        problem = None if f"{got}.pack" == name else f"hashes to {got}, not to its name"
        return rows, problem

    def addresses(self) -> Iterator[str]:
        loose: set[str] = set()
        if self._base.is_dir():
            for shard in self.shards():
                loose.update(
                    e.name for e in os.scandir(self._base / shard) if ADDRESS_RE.fullmatch(e.name)
                )
        yield from sorted(loose | self._look().addresses())

    def stray_files(self) -> list[Path]:
        """Leftover temp files and names that are not addresses or packs (reported by verify)."""
        if not self._base.is_dir():
            return []
        strays = []
        for shard in sorted(self._base.iterdir()):
            if not shard.is_dir():
                strays.append(shard)
            elif shard.name == PACKS:
                strays.extend(
                    p
                    for p in sorted(shard.iterdir())
                    if not (PACK_NAME.fullmatch(p.name) and p.is_file())
                )
            else:
                strays.extend(
                    entry
                    for entry in sorted(shard.iterdir())
                    if not ADDRESS_RE.fullmatch(entry.name) or entry.name[:2] != shard.name
                )
        return strays


def _zero_and_unlink(path: Path, spans: list[tuple[int, int]]) -> None:
    """Overwrite `spans` (offset, length) of the file with zeros, durably, then unlink it."""
    path.chmod(0o600)
    fd = os.open(path, os.O_WRONLY)
    try:
        for offset, length in spans:
            os.pwrite(fd, bytes(length), offset)
        os.fsync(fd)
    finally:
        os.close(fd)
    path.unlink()


def _fsync(path: Path | str) -> None:
    """fsync a file or a directory."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync(paths: Iterable[Path | str], root: Path) -> None:
    """Make these files or folders durable: one `syncfs` of the filesystem holding `root`
    where there is one, else one fsync each."""
    if not syncfs(root):
        for path in paths:
            _fsync(path)
