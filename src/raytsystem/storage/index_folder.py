"""The folder of index files (`.raytsystem/indexes/`): which files are generations' indexes,
which to prune, and the spare copy an ingest patches into the next generation's index
(ADR 0013).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import shutil
from pathlib import Path
from typing import Any, Final

from .index_file import index_number


def index_files(index_dir: Path) -> list[Path]:
    """The generations' index files, newest generation first."""
    found = [p for p in index_dir.glob("*.sqlite3") if _NAME.fullmatch(p.name)]
    return sorted(found, key=lambda p: (index_number(p), p.name), reverse=True)


_NAME: Final = re.compile(r"[0-9]{6,}-[0-9a-f]{16}\.sqlite3")
BUILDING_PREFIX: Final = ".building-"  # a writer's index file in the making (`IndexWriter`)


def building_files(index_dir: Path) -> list[Path]:
    """The files writers are making (a new generation's index, a spare copy): a writer's own
    while it runs, and what a killed one left."""
    if not index_dir.is_dir():
        return []
    return sorted(p for p in index_dir.iterdir() if p.name.startswith(BUILDING_PREFIX))


def _prunable(files: list[Path], keep: int, first: list[Path]) -> list[Path]:
    """What pruning to `keep` deletes: the files of `first` (the new index, its parent) take
    the first places, the newest of the others the rest."""
    order = [p for p in dict.fromkeys(first) if p in files] + [p for p in files if p not in first]
    return order[keep:]


SPARE_NAME: Final = ".spare.sqlite3"


def spare_for(index_dir: Path, parent: Path, keep: int) -> Path | None:
    """The file a new index is best made from: the spare copy `make_spare` left, or the newest
    index file that pruning will delete once the next generation exists (it keeps the new
    index, then the parent, then the newest others). Never the parent itself, which the new
    index is made from."""
    if keep >= 2 and (index_dir / SPARE_NAME).is_file():
        return index_dir / SPARE_NAME
    prunable = _prunable(index_files(index_dir), keep - 1, [parent])
    others = [p for p in prunable if p != parent]
    return others[0] if others else None


def wants_spare(index_dir: Path, keep: int) -> bool:
    """Whether to copy the new index as the spare the next change patches (that change then
    writes a few pages instead of copying the whole file): there is room for another index
    (fewer than `keep` files, e.g. after the first ingest) and no spare yet."""
    return (
        keep >= 2 and not (index_dir / SPARE_NAME).exists() and len(index_files(index_dir)) < keep
    )


def make_spare(index_dir: Path, current: Path) -> bool:
    """Copy `current` as the spare. The copy is fsynced before it takes the spare's name: a
    spare is trusted for every source whose rows it does not patch (`IndexWriter` checks
    which by the sources' digests, so a spare is good whatever generation it was copied for).
    True if one was made."""
    spare = index_dir / SPARE_NAME
    tmp = index_dir / f"{BUILDING_PREFIX}spare-{os.getpid()}.sqlite3"
    try:
        if not _copy_direct(current, tmp):
            copy_file(current, tmp)
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, spare)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def prune(index_dir: Path, keep: int, first: list[Path]) -> list[Path]:
    """Delete index files so that `keep` remain: those of `first` (the current generation's,
    then its parent's) before the newest others, whatever their numbers (a file left by
    another ledger may carry a higher one). Returns what was deleted; a file that cannot be
    deleted is left for the next ingest.

    An index is derived: `raytsystem index rebuild N` makes a pruned one again.
    """
    removed = _prunable(index_files(index_dir), keep, first)
    if keep < 2 and (index_dir / SPARE_NAME).exists():
        removed.append(index_dir / SPARE_NAME)  # no room for a spare any more
    for path in removed:
        with contextlib.suppress(OSError):
            path.unlink()
    return removed


def copy_file(source: Path, target: Path) -> None:
    """Copy a file; `copy_file_range` lets copy-on-write filesystems (XFS, Btrfs) share the
    blocks instead of writing them."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        size = os.fstat(src.fileno()).st_size
        done = 0
        try:
            while done < size:
                sent = os.copy_file_range(src.fileno(), dst.fileno(), size - done)
                if sent == 0:
                    break  # some filesystems stop early: finish the plain way
                done += sent
        except (AttributeError, OSError):
            done = 0
        if done < size:
            src.seek(0)
            dst.seek(0)
            dst.truncate()
            shutil.copyfileobj(src, dst, 1 << 20)
        if os.fstat(dst.fileno()).st_size != size:
            raise OSError(f"copying {source.name} gave a file of another size")


_DIRECT_CHUNK: Final = 8 << 20  # bytes per write: a multiple of any logical block size


_BLOCK: Final = 4096


def _copy_direct(source: Path, target: Path) -> bool:
    """Copy `source` to a new file `target` around the page cache (`O_DIRECT`), fsynced.

    For a copy nobody reads soon (the spare): it puts no page of the copy in memory, which
    costs a fraction of a copy through the cache where fresh memory is slow to touch (ADR
    0032). False, and no file, where the
    system or the filesystem does not do direct writes; the caller then copies as usual."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | flag, 0o644)
    except OSError:
        return False
    copied = False
    try:
        # An anonymous mapping is page-aligned, as direct writes need their buffer to be.
        with mmap.mmap(-1, _DIRECT_CHUNK) as buf, open(source, "rb", buffering=0) as src:
            size = os.fstat(src.fileno()).st_size
            _write_blocks(fd, src, buf)
        os.ftruncate(fd, size)  # the last block was padded
        os.fsync(fd)
        copied = True
    except (OSError, BufferError):  # BufferError: the buffer could not be unmapped
        pass
    finally:
        os.close(fd)
        if not copied:
            target.unlink(missing_ok=True)
    return copied


def _write_blocks(fd: int, src: Any, buf: mmap.mmap) -> None:
    """Everything `src` holds, read through `buf` and written to `fd` in whole blocks."""
    view = memoryview(buf)
    try:
        while got := _fill(src, view):
            # A buffer not filled is the end of the file: its last block is padded.
            part = view[: got if got == len(buf) else -(-got // _BLOCK) * _BLOCK]
            try:
                while part:
                    part = part[os.write(fd, part) :]
            finally:
                part.release()
    finally:
        view.release()


def _fill(src: Any, view: memoryview) -> int:
    """Read into `view` until it is full or the file ends; the bytes read."""
    got = 0
    while got < len(view) and (n := src.readinto(view[got:])):
        got += n
    return got
