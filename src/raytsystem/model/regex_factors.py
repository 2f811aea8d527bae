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

Before that, a pattern is tested for the run of characters its matches hold
(`model.regex_runs`): the only cheap test of a pattern with no literal, such as an IP
address. `Probe` prepares a text once for both tests, whatever the patterns asked about it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, AnyStr, Final, NamedTuple

from .regex_runs import MEMBER, Run, required_runs, run_table
from .regex_tree import ATOMIC, CONSTANTS, EXTRA_CASES, PARSER, REPEATS

# A set of literals is worth testing when its shortest is at least this long and it is not
# too large to test quickly.
SHORTEST: Final = 2
MOST: Final = 64

Factor = frozenset[str]


def _fold_tables() -> tuple[dict[int, str], dict[int, str]]:
    """(before, after) `str.lower()`: U+0130 is the one letter whose full lower case (what
    `str.lower` gives) is two characters where the engine's simple one is `i`; the engine's
    extra equivalences are mapped to one member of each class."""
    classes: dict[int, set[int]] = {}
    for code, extras in EXTRA_CASES.items():
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
    if PARSER is None or not EXTRA_CASES:
        return ()
    try:
        tree = PARSER.parse(pattern.pattern, pattern.flags)
    except Exception:  # a pattern this parser reads otherwise: no shortcut
        return ()
    found = {_minimal(f) for f in _factors(list(tree)) if _usable(f)}
    return tuple(sorted((f for f in found if min(map(len, f)) >= SHORTEST), key=sorted))


def may_match(factors: tuple[Factor, ...], folded_text: str) -> bool:
    """False only when the pattern whose `required_literals` these are cannot match the text
    whose `fold` is `folded_text`."""
    return all(any(lit in folded_text for lit in factor) for factor in factors)


class Needs(NamedTuple):
    """What every match of a pattern holds: a member of each factor, and each run (at most
    one: `required_runs`)."""

    factors: tuple[Factor, ...]
    runs: tuple[Run, ...]


def needs(pattern: re.Pattern[str]) -> Needs:
    """The literals and the run every match of `pattern` holds."""
    return Needs(required_literals(pattern), required_runs(pattern))


class Probe:
    """One text as the cheap tests read it, each part prepared once for all the patterns
    asked about it: its `fold`, its UTF-8 bytes mapped for each kind of run, and which
    literals it holds."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.folded = fold(text)
        self._holds: dict[str, bool] = {}
        self._mapped: dict[tuple[frozenset[str], bool], bytes] = {}
        self._utf8: bytes | None = None

    def may_match(self, factors: tuple[Factor, ...]) -> bool:
        """`may_match(factors, self.folded)`, each literal searched for once per text."""
        holds = self._holds
        for factor in factors:
            for literal in factor:
                found = holds.get(literal)
                if found is None:
                    found = holds[literal] = literal in self.folded
                if found:
                    break
            else:
                return False
        return True

    def has_run(self, run: Run) -> bool:
        """False only when no match of a pattern of which `run` is a required run can be in
        the text."""
        return MEMBER * run.shortest in self._mapped_for(run)[1]

    def lines_with(self, run: Run) -> Iterator[tuple[int, int]]:
        """(start, end) of the lines of the text that hold `run`. Found in the mapped UTF-8
        bytes, where lines end at the same newlines; offsets are turned into the text's by
        decoding the bytes between them (never in ASCII)."""
        utf8, mapped = self._mapped_for(run)
        needle = MEMBER * run.shortest
        ascii_only = len(utf8) == len(self.text)
        char, byte = 0, 0  # a character's offset and its first byte's
        at = mapped.find(needle)
        while at != -1:
            start, end = _line_around(utf8, at, b"\n")
            if ascii_only:
                yield start, end
            else:
                char += len(utf8[byte:start].decode("utf-8", "surrogatepass"))
                length = len(utf8[start:end].decode("utf-8", "surrogatepass"))
                yield char, char + length
                char, byte = char + length, end
            at = mapped.find(needle, end)

    def _mapped_for(self, run: Run) -> tuple[bytes, bytes]:
        """The text's UTF-8 bytes, and those bytes mapped onto members of `run`'s kind or not
        (each made once per text)."""
        if self._utf8 is None:
            self._utf8 = self.text.encode("utf-8", "surrogatepass")
        key = (run.members, run.wide)
        mapped = self._mapped.get(key)
        if mapped is None:
            mapped = self._mapped[key] = self._utf8.translate(run_table(*key))
        return self._utf8, mapped


def matches_a_line(pattern: re.Pattern[str], needed: Needs, probe: Probe) -> bool:
    """Whether `pattern` matches within one of the lines of `probe`'s text: never when the
    text lacks one of the runs it `needed`; else searched only in the lines that hold a member
    of each of its factors (`required_literals`); without factors, in the lines that hold its
    run, or the whole text."""
    if not all(probe.has_run(run) for run in needed.runs):
        return False
    if not needed.factors:
        if needed.runs:
            lines = probe.lines_with(needed.runs[0])
            return any(pattern.search(probe.text, start, end) for start, end in lines)
        return pattern.search(probe.text) is not None
    if not probe.may_match(needed.factors):
        return False
    return any(
        pattern.search(probe.text, start, end)
        for start, end in _lines_with(needed.factors, probe.folded)
    )


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
            start, end = _line_around(folded, at, "\n")
            if may_match(rest, folded[start:end]):
                yield start, end
            at = folded.find(literal, end)


def _line_around(text: AnyStr, at: int, newline: AnyStr) -> tuple[int, int]:
    """(start, end) of the line of `text` (characters or bytes) that holds offset `at`."""
    end = text.find(newline, at)
    return text.rfind(newline, 0, at) + 1, len(text) if end == -1 else end


def _factors(items: list[tuple[Any, Any]]) -> list[Factor]:
    """Sets of literals, each of which has a member in every match of the sequence `items`."""
    factors: list[Factor] = []
    run = [""]  # the literal run so far, in each of its spellings (`api_?key`: two)

    def close() -> None:
        spellings = {fold(spelling) for spelling in run}
        if "" not in spellings:
            factors.append(frozenset(spellings))
        run[:] = [""]

    for op, av in items:
        if op is CONSTANTS.LITERAL:
            run[:] = [spelling + chr(av) for spelling in run]
            continue
        optional = _optional_literal(op, av)
        if optional is not None and 2 * len(run) <= MOST:
            run[:] = [spelling + piece for spelling in run for piece in ("", optional)]
            continue
        close()
        if op is CONSTANTS.SUBPATTERN:
            factors.extend(_factors(list(av[-1])))
        elif op is ATOMIC:
            factors.extend(_factors(list(av)))
        elif op in REPEATS:
            low, _high, body = av
            if low >= 1:
                factors.extend(_factors(list(body)))
        elif op is CONSTANTS.BRANCH:
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


def _optional_literal(op: Any, av: Any) -> str | None:
    """The literal of an optional literal (`_?`, `(?:-v)?`), else None."""
    if op not in REPEATS or av[0] != 0 or av[1] != 1:
        return None
    body = list(av[2])
    if (
        len(body) == 1
        and body[0][0] is CONSTANTS.SUBPATTERN
        and not (body[0][1][1] or body[0][1][2])
    ):
        body = list(body[0][1][-1])
    if not body or any(node_op is not CONSTANTS.LITERAL for node_op, _ in body):
        return None
    return "".join(chr(code) for _, code in body)


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
