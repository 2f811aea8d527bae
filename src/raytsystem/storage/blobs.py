"""The content-addressed raw store (`_raw/`).

A blob is exact bytes stored once under its BLAKE3 address:
`_raw/blake3/<first 2 hex>/<64 hex>`. Blobs are write-once: `put` writes a temp file in the
destination directory, fsyncs it, makes it read-only, publishes it with `os.link` (which never
replaces an existing file), removes the temp name and fsyncs the directory. A crash leaves either
no blob or a complete one; at worst a stray `.tmp-*` file that `verify` reports.

Ingest writes thousands of blobs: its workers `stage` them unsynced in `_raw/.staging/`, and the
parent `publish`es each batch: one filesystem sync (Linux `syncfs`; one fsync per file elsewhere),
a link per blob to its address, one more sync for the names. The guarantee is the same (nothing
is at an address before its bytes are on disk) for two syncs per batch instead of two per blob.

`get` always re-hashes what it read and raises `ChecksumMismatch` when the bytes no longer match
their address, so no caller can use altered bytes by accident. An address is checked for form
before it becomes a path, so a crafted ID can never name a file outside the store.

`DiskBlobStore` and `MemoryBlobStore` share one contract (tests/test_blobs.py runs the same
suite against both).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final, Protocol

import blake3

from ..errors import BlobMissing, ChecksumMismatch, UsageError
from ..syscalls import syncfs

ALGORITHM: Final = "blake3"
_ADDRESS_RE: Final = re.compile(r"[0-9a-f]{64}")
_CHUNK: Final = 1 << 20
STAGING: Final = ".staging"  # under the store's root, beside `blake3/`: same filesystem


def check_address(address: str) -> str:
    """Return `address` if it is 64 lowercase hex digits, else raise."""
    if not isinstance(address, str) or not _ADDRESS_RE.fullmatch(address):
        raise UsageError(f"malformed blob address: {address!r}", code="invalid_address")
    return address


def address_of(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


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
    """Blobs as read-only files under `root/blake3/<2 hex>/<64 hex>`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._base = root / ALGORITHM
        self._made: set[Path] = set()  # shard folders known to exist

    def path(self, address: str) -> Path:
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

    # --- many blobs at once: stage (workers), then publish (the ingest parent) ----------------

    @contextlib.contextmanager
    def staging_area(self) -> Iterator[str]:
        """A folder for `stage`, removed afterwards, whatever happens. The caller holds the
        workspace writer lock: what an earlier, killed run left there is removed first."""
        area = self.root / STAGING
        if area.exists():
            # A killed run may have linked blobs without reaching its second sync: make their
            # names durable before anything can find them there and point a row at them.
            _sync(self._shard_dirs(), self.root)
            shutil.rmtree(area, ignore_errors=True)
        area.mkdir(parents=True)
        # Workspaces made before this folder existed do not git-ignore it.
        (area / ".gitignore").write_text("*\n", encoding="utf-8")
        try:
            yield str(area)
        finally:
            shutil.rmtree(area, ignore_errors=True)

    def stage(
        self, data: bytes, staging_dir: str, address: str | None = None
    ) -> tuple[str, str | None]:
        """(address, temp file) for `data`, written unsynced under a name of its own in
        `staging_dir`; the temp file is None when the blob is already in the store. `address`
        is `address_of(data)` when the caller has just computed it (a large file is not
        hashed twice).

        Nothing is visible at the address until `publish`, so a crash can never leave a
        published blob whose bytes did not reach the disk."""
        address = address or address_of(data)
        if os.path.exists(self.path(address)):
            return address, None
        tmp = f"{staging_dir}/{address}-{os.getpid()}-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        return address, tmp

    def publish(self, staged: Iterable[tuple[str, str]]) -> None:
        """Make staged blobs durable, then visible at their addresses, then their names durable.

        One filesystem sync covers every temp file (Linux `syncfs`; elsewhere one fsync per
        file), so a batch of blobs costs two syncs instead of two fsyncs per blob."""
        pending = sorted(set(staged))
        if not pending:
            return
        _sync([tmp for _, tmp in pending], self.root)
        finals = [self.path(address) for address, _ in pending]
        for final, (_, tmp) in zip(finals, pending, strict=True):
            if final.parent not in self._made:
                final.parent.mkdir(parents=True, exist_ok=True)
                self._made.add(final.parent)
            with contextlib.suppress(FileExistsError):  # the same bytes staged twice
                os.link(tmp, final)
            os.unlink(tmp)
        # The names: the shard folders, and the base for shard folders made just now.
        _sync([self._base, *sorted({f.parent for f in finals})], self.root)

    def get(self, address: str) -> bytes:
        path = self.path(address)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BlobMissing(address) from None
        got = address_of(data)
        if got != address:
            raise ChecksumMismatch(address, address, got)
        return data

    def has(self, address: str) -> bool:
        return self.path(address).is_file()

    def rehash(self, address: str) -> str:
        """Stream the blob through BLAKE3 and return what it hashes to now."""
        try:
            return _hash_file(self.path(address))[0]
        except FileNotFoundError:
            raise BlobMissing(address) from None

    def _shard_dirs(self) -> list[Path]:
        return [self._base, *(self._base / name for name in self.shards())]

    def shards(self) -> list[str]:
        if not self._base.is_dir():
            return []
        return sorted(e.name for e in os.scandir(self._base) if e.is_dir())

    def rehash_shard(self, shard: str) -> list[tuple[str, str, int]]:
        """(address, what its bytes hash to now or "" if unreadable, size) for a shard's blobs.

        The fast path of `verify`: one directory scan and one read per blob, no per-blob
        path objects; large blobs are streamed through BLAKE3's own threads.
        """
        out = []
        for entry in sorted(os.scandir(self._base / shard), key=lambda e: e.name):
            if not _ADDRESS_RE.fullmatch(entry.name):
                continue
            try:
                out.append((entry.name, *_hash_file(entry.path)))
            except OSError:
                out.append((entry.name, "", 0))
        return out

    def addresses(self) -> Iterator[str]:
        if not self._base.is_dir():
            return
        for shard in sorted(self._base.iterdir()):
            if not shard.is_dir():
                continue
            for entry in sorted(shard.iterdir()):
                if _ADDRESS_RE.fullmatch(entry.name):
                    yield entry.name

    def stray_files(self) -> list[Path]:
        """Leftover temp files and names that are not addresses (reported by verify)."""
        if not self._base.is_dir():
            return []
        strays = []
        for shard in sorted(self._base.iterdir()):
            if not shard.is_dir():
                strays.append(shard)
                continue
            for entry in sorted(shard.iterdir()):
                if not _ADDRESS_RE.fullmatch(entry.name) or entry.name[:2] != shard.name:
                    strays.append(entry)
        return strays


def _hash_file(path: Path | str) -> tuple[str, int]:
    """BLAKE3 of a file's bytes, and how many there were.

    Each read asks for what is left by the file's size and one byte more, never more than a
    MiB, so a small blob is read in one call of its own size: a regular file reads short only
    at its end. (A fixed 1 MiB read allocated and unmapped a MiB per blob, which cost more than
    hashing a few kilobytes: blobs hash twice as fast without it.) Only large files use
    BLAKE3's own threads, whose start-up would cost more than hashing a small one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        hasher = blake3.blake3(max_threads=blake3.blake3.AUTO if size >= _CHUNK else 1)
        total = 0
        while True:
            want = min(size + 1 - total, _CHUNK) if total <= size else _CHUNK
            chunk = os.read(fd, want)
            hasher.update(chunk)
            total += len(chunk)
            if len(chunk) < want:
                return hasher.hexdigest(), total
    finally:
        os.close(fd)


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
