"""What any text a regular expression matches must contain: a cheap test before the search.

`required_literals(pattern)` reads the pattern's syntax tree (the standard library's own
parser) and returns sets of literal strings such that every text the pattern matches somewhere
holds a member of each set (none: no set worth testing was found). Searching a text for a few
literals runs in C at memory speed; searching it with a pattern full of optional groups and
lookbehinds tries every alternative at every position. The secrets screen asks the first
before the second (`model/secret_gates.py`, `model/secrets.py`).

The literals are folded (`fold`) and are to be looked for in the folded text (`may_match`): a
match under `re.IGNORECASE`, or of an inline `(?i:...)`, has its literals in some letter case,
and folding both sides as the regex engine compares letters (each character's simple lower
case, and the engine's own extra equivalences such as ſ and s) makes the test hold for every
case at once. The test is one-sided by construction: when it says no, the pattern cannot
match; when it says yes, the pattern is searched as before.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from types import ModuleType
from typing import Any, Final


def _stdlib(name: str) -> ModuleType | None:
    """A module of the standard library's regex engine; None where it is not (then no
    shortcut: the patterns are searched as they are)."""
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover
        return None


_sre_parse: Any = _stdlib("re._parser")  # its parser (`sre_parse` before Python 3.11)
_sre: Any = _stdlib("re._constants")
_EXTRA_CASES: dict[int, tuple[int, ...]] = dict(
    getattr(_stdlib("re._compiler"), "_EXTRA_CASES", {})
)

# A set of literals is worth testing when its shortest is at least this long and it is not
# too large to test quickly.
SHORTEST: Final = 2
MOST: Final = 64

Factor = frozenset[str]

_REPEATS: Final = tuple(
    getattr(_sre, name)
    for name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
    if _sre is not None and hasattr(_sre, name)
)
_ATOMIC: Final = getattr(_sre, "ATOMIC_GROUP", object())


def _fold_tables() -> tuple[dict[int, str], dict[int, str]]:
    """(before, after) `str.lower()`: U+0130 is the one letter whose full lower case (what
    `str.lower` gives) is two characters where the engine's simple one is `i`; the engine's
    extra equivalences are mapped to one member of each class."""
    classes: dict[int, set[int]] = {}
    for code, extras in _EXTRA_CASES.items():
        merged = {code, *extras}
        for member in list(merged):
            merged |= classes.get(member, set())
        for member in merged:
            classes[member] = merged
    after = {code: chr(min(members)) for code, members in classes.items() if min(members) != code}
    return {0x130: "i"}, after


_BEFORE, _AFTER = _fold_tables()
# The characters the tables change: most texts hold none, and then `str.lower` is the fold.
_BEFORE_CHARS: Final = re.compile("[" + re.escape("".join(map(chr, _BEFORE))) + "]")
_AFTER_CHARS: Final = re.compile("[" + re.escape("".join(map(chr, _AFTER))) + "]")


def fold(text: str) -> str:
    """`text` with every letter in the form `re.IGNORECASE` treats as equal to its cases."""
    if _BEFORE_CHARS.search(text):
        text = text.translate(_BEFORE)
    text = text.lower()
    return text.translate(_AFTER) if _AFTER_CHARS.search(text) else text


def required_literals(pattern: re.Pattern[str]) -> tuple[Factor, ...]:
    """Sets of folded literals; every match of `pattern` contains a member of each."""
    if _sre_parse is None or not _EXTRA_CASES:
        return ()
    try:
        tree = _sre_parse.parse(pattern.pattern, pattern.flags)
    except Exception:  # a pattern this parser reads otherwise: no shortcut
        return ()
    found = {_minimal(f) for f in _factors(list(tree)) if _usable(f)}
    return tuple(sorted((f for f in found if min(map(len, f)) >= SHORTEST), key=sorted))


def may_match(factors: tuple[Factor, ...], folded_text: str) -> bool:
    """False only when the pattern whose `required_literals` these are cannot match the text
    whose `fold` is `folded_text`."""
    return all(any(lit in folded_text for lit in factor) for factor in factors)


def matches_a_line(
    pattern: re.Pattern[str], factors: tuple[Factor, ...], text: str, folded: str
) -> bool:
    """Whether `pattern` matches within one of the lines of `text` (`folded` is its `fold`,
    which has the same length and lines), searching only the lines that hold a member of
    each of its `factors` (`required_literals`); without factors, the whole text."""
    if not factors:
        return pattern.search(text) is not None
    if not may_match(factors, folded):
        return False
    return any(pattern.search(text, start, end) for start, end in _lines_with(factors, folded))


def lines_holding(factors: tuple[Factor, ...], folded: str) -> set[int] | None:
    """The numbers (from 1) of the lines of `folded` (a text's `fold`) that hold a member of
    each of `factors`: the only lines within which the pattern whose `required_literals`
    these are can match. None without factors: any line may."""
    if not factors:
        return None
    found: set[int] = set()
    number, counted = 1, 0
    for start in sorted({start for start, _ in _lines_with(factors, folded)}):
        number += folded.count("\n", counted, start)  # each newline counted once
        counted = start
        found.add(number)
    return found


def _lines_with(factors: tuple[Factor, ...], folded: str) -> Iterator[tuple[int, int]]:
    """(start, end) of the lines of `folded` that hold a member of each of `factors` (a line
    once for each literal of the first factor that it holds)."""
    first, rest = factors[0], factors[1:]
    for literal in first:
        at = folded.find(literal)
        while at != -1:
            start = folded.rfind("\n", 0, at) + 1
            end = folded.find("\n", at)
            end = len(folded) if end == -1 else end
            if may_match(rest, folded[start:end]):
                yield start, end
            at = folded.find(literal, end)


def _factors(items: list[tuple[Any, Any]]) -> list[Factor]:
    """Sets of literals, each of which has a member in every match of the sequence `items`."""
    factors: list[Factor] = []
    run: list[str] = []

    def close() -> None:
        if run:
            factors.append(frozenset({fold("".join(run))}))
            run.clear()

    for op, av in items:
        if op is _sre.LITERAL:
            run.append(chr(av))
            continue
        close()
        if op is _sre.SUBPATTERN:
            factors.extend(_factors(list(av[-1])))
        elif op is _ATOMIC:
            factors.extend(_factors(list(av)))
        elif op in _REPEATS:
            low, _high, body = av
            if low >= 1:
                factors.extend(_factors(list(body)))
        elif op is _sre.BRANCH:
            union: set[str] = set()
            for alternative in av[1]:
                best = _best(_factors(list(alternative)))
                if best is None:  # an alternative that needs nothing: the branch needs nothing
                    break
                union |= best
            else:
                factors.append(frozenset(union))
        # Anything else (a class, any character, an anchor, a lookaround, a back reference)
        # requires no literal and ends the literal run.
    close()
    return factors


def _usable(factor: Factor) -> bool:
    return bool(factor) and len(factor) <= MOST


def _best(factors: list[Factor]) -> Factor | None:
    """The factor that says most of a branch's alternative: its shortest literal longest."""
    usable = [f for f in factors if _usable(f)]
    if not usable:
        return None
    return max(usable, key=lambda f: (min(map(len, f)), -len(f)))


def _minimal(factor: Factor) -> Factor:
    """The same test with fewer literals: one that holds another is found when that one is."""
    return frozenset(a for a in factor if not any(b != a and b in a for b in factor))
