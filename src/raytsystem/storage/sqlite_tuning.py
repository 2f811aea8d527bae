"""SQLite's process-wide settings, changed once when the `raytsystem` process starts.

Python's sqlite3 module runs SQLite as it was compiled, which on common builds means
*serialized* threading (every API call, down to binding one parameter, takes the connection's
mutex) and *memory statistics* (every allocation takes a global mutex to count itself). A cold
ingest makes tens of millions of such calls on one thread, and the mutexes are a share of
the writer's time that shows in a profile. raytsystem needs neither:

- every connection is used by one thread at a time (stdlib connections refuse another thread,
  `check_same_thread`, except the index writer's, which a settle thread uses while the main
  thread commits the ledger and leaves it alone, ADR 0032; the ledger's SQLAlchemy engine
  opens a connection per use, `NullPool`), which is what SQLite's *multi-thread* mode asks
  for;
- nothing reads SQLite's memory statistics or sets a soft heap limit.

The settings can only change while SQLite is shut down, that is before the process opens its
first connection, so `cli.main` applies them (`api.prepare_process`) only when it is the
process's own command (no argument list given), never in a process that may already hold
connections. Where the library cannot be reached through the `_sqlite3` module (SQLite linked
in without exported symbols, another platform's build), nothing changes: the settings are
speed, not correctness (ADR 0033).
"""

from __future__ import annotations

from typing import Final

_SQLITE_OK: Final = 0
_SQLITE_CONFIG_MULTITHREAD: Final = 2
_SQLITE_CONFIG_MEMSTATUS: Final = 9


def tune_process() -> bool:
    """Switch SQLite to multi-thread mode without memory statistics; True if both took.

    Call before any SQLite connection exists in this process."""
    try:
        import _sqlite3
        import ctypes

        # The symbols through the module's own handle: the SQLite it is linked against (a
        # library of the same name loaded separately would be another copy of SQLite).
        lib = ctypes.CDLL(_sqlite3.__file__)
        shutdown, config, initialize = (
            lib.sqlite3_shutdown,
            lib.sqlite3_config,
            lib.sqlite3_initialize,
        )
    except (ImportError, OSError, AttributeError, TypeError):
        return False
    if shutdown() != _SQLITE_OK:
        return False
    try:
        took = config(_SQLITE_CONFIG_MULTITHREAD) == _SQLITE_OK
        took = config(_SQLITE_CONFIG_MEMSTATUS, ctypes.c_int(0)) == _SQLITE_OK and took
    finally:
        initialize()
    return bool(took)
