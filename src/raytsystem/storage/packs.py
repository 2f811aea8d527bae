"""Packs: many blobs in one read-only file (ADR 0025).

Ingest writes thousands of blobs, and a file per blob costs the kernel more than hashing and
writing its bytes. So its workers write the new blobs of a chunk of files as one pack:
`_raw/blake3/packs/<64 hex>.pack`, named by the BLAKE3 of its own bytes, that holds a table of
(address, offset, length) and then the blobs. `PackWriter` (storage/pack_writer.py) collects
them and stages each pack unsynced (`stage_pack`); `DiskBlobStore.publish` makes packs durable
and visible.

This module owns the pack's byte format (`pack_parts`, `pack_table`, `pack_entries`), writing
one (`stage_pack`) and the lookup of a blob in the tables of the packs a store has read
(`PackTables`).
"""

from __future__ import annotations

import bisect
import os
import re
import secrets
import struct
from collections.abc import Callable, Iterator
from typing import Final

from .addresses import hasher

PACKS: Final = "packs"  # under `blake3/`, beside the shards: never a shard's two hex digits
PACK_NAME: Final = re.compile(r"[0-9a-f]{64}\.pack")
# A pack: magic and entry count, the entries sorted by address (32-byte digest, offset from the
# start of the file, length), then the blobs in that order.
_PACK_HEAD: Final = struct.Struct("<8sI")
_PACK_ENTRY: Final = struct.Struct("<32sQQ")
_PACK_MAGIC: Final = b"RAYTPAK1"

Location = tuple[str, int, int]  # (pack file, offset, length)


# --- the format ----------------------------------------------------------------------------


def pack_parts(blobs: dict[str, bytes]) -> list[bytes]:
    """The pack holding `blobs` (address -> bytes), as its table and then each blob: the same
    blobs make the same bytes."""
    items = sorted(blobs.items())
    offset = _PACK_HEAD.size + _PACK_ENTRY.size * len(items)
    table = [_PACK_HEAD.pack(_PACK_MAGIC, len(items))]
    for address, data in items:
        table.append(_PACK_ENTRY.pack(bytes.fromhex(address), offset, len(data)))
        offset += len(data)
    return [b"".join(table), *(data for _, data in items)]


def pack_bytes(blobs: dict[str, bytes]) -> bytes:
    return b"".join(pack_parts(blobs))


def pack_table(read: Callable[[int, int], bytes], size: int) -> bytes:
    """A pack's table of entries as its bytes, given `read(offset, n)` on a file of `size`
    bytes; ValueError if the file does not start as a pack or its table does not fit."""
    head = read(0, _PACK_HEAD.size)
    if len(head) < _PACK_HEAD.size or head[:8] != _PACK_MAGIC:
        raise ValueError("it does not start as a pack")
    count = _PACK_HEAD.unpack(head)[1]
    if _PACK_HEAD.size + count * _PACK_ENTRY.size > size:
        raise ValueError(f"its table of {count} entries is longer than the file")
    table = read(_PACK_HEAD.size, count * _PACK_ENTRY.size)
    if len(table) != count * _PACK_ENTRY.size:
        raise ValueError("its table was cut short")
    return table


def pack_entries(read: Callable[[int, int], bytes], size: int) -> list[tuple[str, int, int]]:
    """(address, offset, length) of each blob in a pack of `size` bytes, given
    `read(offset, n)`; ValueError if the table is not a pack's or points outside the file."""
    table = pack_table(read, size)
    entries = []
    for digest, offset, length in _PACK_ENTRY.iter_unpack(table):
        if not _fits(offset, length, table, size):
            raise ValueError(f"an entry points outside the file ({offset}+{length})")
        entries.append((digest.hex(), offset, length))
    return entries


def _fits(offset: int, length: int, table: bytes, size: int) -> bool:
    """Whether an entry points inside its pack's file, after the table."""
    return offset >= _PACK_HEAD.size + len(table) and offset + length <= size


def _entries(path: str, size: int, table: bytes) -> Iterator[tuple[bytes, Location]]:
    """(digest, location) of each entry of a pack's table that points inside its file."""
    for digest, offset, length in _PACK_ENTRY.iter_unpack(table):
        if _fits(offset, length, table, size):
            yield digest, (path, offset, length)


def read_at(fd: int, length: int, offset: int) -> bytes:
    """`length` bytes of an open file from `offset`, fewer only where the file ends."""
    parts = []
    while length:
        part = os.pread(fd, length, offset)
        if not part:
            break  # the file is shorter than its table says: the caller's hash will differ
        parts.append(part)
        length -= len(part)
        offset += len(part)
    return b"".join(parts)


# --- finding a blob in the packs ------------------------------------------------------------


class PackTables:
    """Where packed blobs are, from the packs' tables as read.

    Turning every entry into a dictionary item costs Python about a microsecond each, more
    than a query's own work on a large workspace. So the tables are kept as the bytes they
    are, and a lookup searches all of them at once (`bytes.find` over the joined entries);
    a store that looks up many blobs (a worker, `verify`) builds the dictionary, once."""

    SEARCHES: Final = 64  # lookups by search before the dictionary is built

    def __init__(self) -> None:
        self.names: set[str] = set()  # the packs read, good or not
        self._packs: list[tuple[str, int, bytes]] = []  # (path, size, its table's entries)
        self._joined: bytes | None = None  # every table's entries, in `_packs` order
        self._starts: list[int] = []  # the index in `_joined` of each pack's first entry
        self._by_digest: dict[bytes, Location] | None = None
        self._searches = 0

    def read(self, path: str) -> None:
        """Add a pack's table. A pack that cannot be read or is not a pack is left out: its
        blobs are missing here, and `verify` reports the pack."""
        self.names.add(os.path.basename(path))
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                table = pack_table(lambda offset, n: read_at(fd, n, offset), size)
            finally:
                os.close(fd)
        except (OSError, ValueError):
            return
        self._packs.append((path, size, table))
        self._joined = None
        if self._by_digest is not None:
            self._fill(path, size, table)

    def forget(self, path: str) -> None:
        self.names.discard(os.path.basename(path))
        self._packs = [p for p in self._packs if p[0] != path]
        self._joined = None
        if self._by_digest is not None:
            self._by_digest = {d: w for d, w in self._by_digest.items() if w[0] != path}

    def find(self, address: str) -> Location | None:
        digest = bytes.fromhex(address)
        if self._by_digest is None:
            self._searches += 1
            if self._searches <= self.SEARCHES:
                return self._search(digest)
            self._by_digest = {}
            for pack in self._packs:
                self._fill(*pack)
        return self._by_digest.get(digest)

    def addresses(self) -> set[str]:
        return {digest.hex() for pack in self._packs for digest, _ in _entries(*pack)}

    def _fill(self, path: str, size: int, table: bytes) -> None:
        assert self._by_digest is not None
        for digest, where in _entries(path, size, table):
            self._by_digest.setdefault(digest, where)

    def _search(self, digest: bytes) -> Location | None:
        if self._joined is None:
            self._joined = b"".join(table for _, _, table in self._packs)
            self._starts = []
            first = 0
            for _, _, table in self._packs:
                self._starts.append(first)
                first += len(table) // _PACK_ENTRY.size
        at = self._joined.find(digest)
        while at != -1:
            if at % _PACK_ENTRY.size == 0:  # a digest, not bytes across two fields
                path, size, table = self._packs[
                    bisect.bisect_right(self._starts, at // _PACK_ENTRY.size) - 1
                ]
                _, offset, length = _PACK_ENTRY.unpack_from(self._joined, at)
                if _fits(offset, length, table, size):
                    return path, offset, length
            at = self._joined.find(digest, at + 1)
        return None


# --- writing a pack -------------------------------------------------------------------------


def stage_pack(blobs: dict[str, bytes], staging_dir: str) -> tuple[str, str]:
    """Write the pack of `blobs` (address -> bytes), unsynced and read-only, under a temp name
    in `staging_dir`; returns (the pack's name, the temp file)."""
    parts = pack_parts(blobs)
    whole = hasher(sum(map(len, parts)))
    for part in parts:
        whole.update(part)
    name = f"{whole.hexdigest()}.pack"
    tmp = f"{staging_dir}/{name}-{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    try:
        for part in parts:
            view = memoryview(part)
            while view:
                view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    return name, tmp
