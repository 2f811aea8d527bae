"""The one error hierarchy of raytsystem.

Every error a user can cause or meet is a `RaytError` subclass with a stable `code` (a short
snake_case string that never changes once released) and an `exit_status`. The CLI maps them to
one line of text, or to `{"error": {"code": ..., "message": ...}}` with `--json`. Subclasses are
named for what the caller can do about them, not for where they were raised; structured fields
carry the data (expected and actual hashes, paths) so callers need not parse messages.

Exit statuses (documented in the README):
  0 ok · 1 internal error · 2 usage · 3 integrity (fail closed) · 4 not found
  5 workspace/config · 6 database · 7 locked · 8 out of disk space or memory · 130 interrupted
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from typing import Any, ClassVar


class RaytError(Exception):
    """Base class: a user-facing failure with a stable code and exit status."""

    code: ClassVar[str] = "error"
    exit_status: ClassVar[int] = 1

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code  # type: ignore[misc]  # instance-level refinement of the class code
        self.details = details

    def __reduce__(self) -> tuple[Any, ...]:
        # An error raised in a helper process comes back pickled, and pickle would call the
        # class with `args` (the message alone), which a subclass taking other arguments
        # refuses: the pool's result thread then dies and its caller waits forever. Rebuilt
        # from its fields instead, without calling `__init__`.
        return (_rebuild, (type(self), self.message, self.__dict__))

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = {k: v for k, v in sorted(self.details.items())}
        return {"error": body}


def _rebuild(cls: type[RaytError], message: str, fields: dict[str, Any]) -> RaytError:
    error = Exception.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(fields)
    return error


class UsageError(RaytError):
    """The request itself is malformed (bad option, query too long, bad ID syntax)."""

    code = "usage_error"
    exit_status = 2


class IntegrityError(RaytError):
    """A hash in the evidence chain does not match: the operation fails closed."""

    code = "integrity_error"
    exit_status = 3


class ChecksumMismatch(IntegrityError):
    """Bytes on disk no longer hash to their address."""

    code = "blob_corrupt"

    def __init__(self, address: str, expected: str, got: str, *, code: str | None = None) -> None:
        super().__init__(
            f"blob {address} is corrupt: expected {expected}, got {got}",
            code=code,
            address=address,
            expected=expected,
            got=got,
        )
        self.expected = expected
        self.got = got


class BlobMissing(IntegrityError):
    code = "blob_missing"

    def __init__(self, address: str) -> None:
        super().__init__(f"blob {address} is missing from the raw store", address=address)


class NotFound(RaytError):
    code = "not_found"
    exit_status = 4


class WorkspaceError(RaytError):
    """The workspace, its configuration or a path inside it cannot be used."""

    code = "workspace_error"
    exit_status = 5


class PathRefused(WorkspaceError):
    code = "path_refused"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"path {path!r} refused: {reason}", path=path, reason=reason)
        self.path = path
        self.reason = reason


class DatabaseError(RaytError):
    code = "database_error"
    exit_status = 6


class SchemaTooNew(DatabaseError):
    code = "schema_too_new"


class DatabaseCorrupt(DatabaseError):
    """A database file is damaged: the database itself said so while reading it (a page that
    is not what its B-tree expects, a file that is not a database at all)."""

    code = "database_corrupt"


class Locked(RaytError):
    """Another writer holds the workspace lock."""

    code = "locked"
    exit_status = 7


class Interrupted(RaytError):
    code = "interrupted"
    exit_status = 130


class OutOfResources(RaytError):
    """The machine ran out of disk space (`disk_full`) or memory (`out_of_memory`): not a bug.
    The command stopped, and what it had not committed is not kept."""

    code = "disk_full"
    exit_status = 8


_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
_SQLITE_FULL = 13  # SQLite's result code for "database or disk is full"
_RETRY = (
    "the command stopped, and what it had not committed is not kept (an ingest leaves the "
    "previous generation current)"
)


def chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what caused it, nearest first: its `__cause__`, or else its `__context__`, and
    so on (an error of a helper process comes back as the cause of the pool's)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def out_of_resources(exc: BaseException) -> OutOfResources | None:
    """The error to report if `exc` came from the disk or the memory running out (an `OSError`
    or SQLite saying so, or a `MemoryError`, anywhere in its chain), else None."""
    for e in chain(exc):
        if isinstance(e, MemoryError) or (isinstance(e, OSError) and e.errno == errno.ENOMEM):
            return OutOfResources(
                f"out of memory: {_RETRY}; run it again with more memory free, or with fewer "
                "processes (`ingest --jobs`)",
                code="out_of_memory",
            )
        full_disk = isinstance(e, OSError) and e.errno in _DISK_FULL
        if full_disk or getattr(e, "sqlite_errorcode", None) == _SQLITE_FULL:
            where = f" (writing {e.filename})" if isinstance(e, OSError) and e.filename else ""
            return OutOfResources(
                f"no space left on the disk{where}: {_RETRY}; free some and run it again",
                code="disk_full",
            )
    return None


# SQLite's primary result codes for a damaged file (an extended code keeps them in its low
# byte: SQLITE_CORRUPT_INDEX is 779): "database disk image is malformed", "file is not a
# database".
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
_SQLITE_DAMAGE_WORDS = ("malformed", "not a database")
# PostgreSQL's SQLSTATEs for damaged data: data_corrupted, index_corrupted.
_PG_DAMAGE_STATES = frozenset({"XX001", "XX002"})


def _damage(e: BaseException) -> str | None:
    """What the database said, if `e` is its report of a damaged file."""
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return str(e)
    if isinstance(e, sqlite3.DatabaseError) and any(w in str(e) for w in _SQLITE_DAMAGE_WORDS):
        return str(e)
    if getattr(e, "sqlstate", None) in _PG_DAMAGE_STATES:
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    return None


def database_corrupt(exc: BaseException, *, ledger: bool = False) -> DatabaseCorrupt | None:
    """The error to report if `exc` came from a damaged database file, anywhere in its chain:
    SQLite's SQLITE_CORRUPT or SQLITE_NOTADB (or their messages), PostgreSQL's XX001 and XX002,
    and SQLAlchemy's wrappers of them. The message is the database's own words, never the
    statement that met the damage (SQLAlchemy's message of a wrapper holds its SQL).
    `ledger`: the caller knows the file is the ledger."""
    for e in chain(exc):
        said = _damage(e)
        if said is None:
            continue
        # SQLAlchemy reaches only the ledger; a bare driver error may be an index file's.
        ledger = (
            ledger
            or isinstance(exc, DatabaseError)
            or any(type(x).__module__.startswith("sqlalchemy") for x in chain(exc))
        )
        if ledger:
            message = (
                f"the ledger database is damaged ({said}): nothing read from it can be trusted; "
                "restore it from a backup (`raytsystem verify` reports what it can still read)"
            )
        else:
            message = (
                f"a database file is damaged ({said}): `raytsystem verify` names it; an index "
                "file is made again by `raytsystem index rebuild`, the ledger is restored from "
                "a backup"
            )
        return DatabaseCorrupt(message, said=said)
    return None


def reportable(exc: BaseException) -> RaytError | None:
    """The error to report for `exc`: the disk or the memory running out, anywhere in its chain,
    whatever it surfaced as (`out_of_resources`); a damaged database, anywhere in the chain of
    an error that is not already ours, or of the generic database error (`database_corrupt`);
    else `exc` itself if it is a RaytError; else None, a bug. The CLI, the MCP server and the
    Universe server all report through this."""
    if (resource := out_of_resources(exc)) is not None:
        return resource
    # Our other errors say more (an index file found unreadable is `index_corrupt`).
    generic = not isinstance(exc, RaytError) or type(exc) is DatabaseError
    if generic and (damaged := database_corrupt(exc)) is not None:
        return damaged
    return exc if isinstance(exc, RaytError) else None
