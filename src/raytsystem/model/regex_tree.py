"""The standard library's regex engine, as the shortcut analyses read it: its parser, which
turns a pattern into the syntax tree they walk (`regex_factors`, `regex_runs`), its compiler
and its constants. Each is None where the engine has none of that name (then no shortcut: the
patterns are searched as they are)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Final


def _stdlib(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover
        return None


PARSER: Any = _stdlib("re._parser")
CONSTANTS: Any = _stdlib("re._constants")
COMPILER: Any = _stdlib("re._compiler")
# The engine's case equivalences beyond `str.lower` (ſ and s, the Kelvin sign and k, ...).
EXTRA_CASES: Final[dict[int, tuple[int, ...]]] = dict(getattr(COMPILER, "_EXTRA_CASES", {}))

REPEATS: Final = tuple(
    getattr(CONSTANTS, name)
    for name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
    if CONSTANTS is not None and hasattr(CONSTANTS, name)
)
ATOMIC: Final = getattr(CONSTANTS, "ATOMIC_GROUP", object())
