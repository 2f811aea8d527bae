"""A blob's address: the BLAKE3 of its bytes, written as 64 lowercase hex digits.

An address is checked for form (`check_address`) before it becomes a path, so a crafted ID
can never name a file outside the store. Only large inputs are hashed with BLAKE3's own
threads, whose start-up would cost more than hashing a small one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

import blake3

from ..errors import UsageError

ALGORITHM: Final = "blake3"
ADDRESS_RE: Final = re.compile(r"[0-9a-f]{64}")
_CHUNK: Final = 1 << 20


def check_address(address: str) -> str:
    """Return `address` if it is 64 lowercase hex digits, else raise."""
    if not isinstance(address, str) or not ADDRESS_RE.fullmatch(address):
        raise UsageError(f"malformed blob address: {address!r}", code="invalid_address")
    return address


def address_of(data: bytes | memoryview) -> str:
    return blake3.blake3(data).hexdigest()


def hasher(size: int) -> blake3.blake3:
    """A BLAKE3 hasher for `size` bytes: only large inputs use BLAKE3's own threads."""
    return blake3.blake3(max_threads=blake3.blake3.AUTO if size >= _CHUNK else 1)


def hash_file(path: Path | str) -> tuple[str, int]:
    """BLAKE3 of a file's bytes, and how many there were.

    Each read asks for what is left by the file's size and one byte more, never more than a
    MiB, so a small blob is read in one call of its own size: a regular file reads short only
    at its end. (A fixed 1 MiB read allocates and unmaps a MiB per blob, which costs more than
    hashing a few kilobytes.)"""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        whole = hasher(size)
        total = 0
        while True:
            want = min(size + 1 - total, _CHUNK) if total <= size else _CHUNK
            chunk = os.read(fd, want)
            whole.update(chunk)
            total += len(chunk)
            if len(chunk) < want:
                return whole.hexdigest(), total
    finally:
        os.close(fd)
