"""The new blobs of a few files, collected into packs (ADR 0025) in a store's staging area.

`PackWriter` decides what goes in a pack and when one is written (storage/packs.py writes
it); `DiskBlobStore.staging_area` gives the folder and `DiskBlobStore.publish` makes the
packs durable and visible (storage/blobs.py).
"""

from __future__ import annotations

from typing import Final

from .addresses import address_of
from .blobs import DiskBlobStore
from .packs import stage_pack

# A pack is written once the blobs waiting for it pass this: what a worker holds, and what
# `verify` reads at once, stays near it (a larger blob makes a pack of its own size).
PACK_BYTES: Final = 16 << 20


class PackWriter:
    """The new blobs of a few files, staged as packs (ADR 0025): `add` each, then `seal`.

    A blob already in the store, or already added, is not added again. The blobs wait in
    memory until they pass PACK_BYTES (then they are written as one pack and the next pack
    begins) or until `seal`. A pack is written unsynced in the staging area;
    `DiskBlobStore.publish` then makes it durable and visible."""

    def __init__(self, store: DiskBlobStore, staging_dir: str) -> None:
        self.store = store
        self.staging_dir = staging_dir
        self._blobs: dict[str, bytes] = {}
        self._size = 0
        self._seen: set[str] = set()  # everything added, in any pack of this writer
        self._written: list[tuple[str, str]] = []

    def add(self, data: bytes, address: str | None = None) -> str:
        """The address of `data` (`address` when the caller has just computed it), which
        will be in a pack unless the store has it already."""
        address = address or address_of(data)
        if address not in self._seen and not self.store.has(address):
            self._seen.add(address)
            self._blobs[address] = data
            self._size += len(data)
            if self._size >= PACK_BYTES:
                self._write()
        return address

    def seal(self) -> list[tuple[str, str]]:
        """(pack name, temp file) of each pack written; empty when nothing was new."""
        self._write()
        written, self._written = self._written, []
        return written

    def _write(self) -> None:
        if self._blobs:
            blobs, self._blobs, self._size = self._blobs, {}, 0
            self._written.append(stage_pack(blobs, self.staging_dir))
