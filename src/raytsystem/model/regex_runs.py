"""Many characters in a row, each of a few kinds, that every match of a pattern holds: a cheap
test before searching a pattern that has no literal to test (`regex_factors`).

A token of 35 characters of a class, an IP address: such a pattern is searched through the
whole text, tried at every position. `required_runs(pattern)` finds the run its matches hold
instead (`Run`), widened to one of a few kinds of characters (`RUN_KINDS`). A text's UTF-8
bytes, mapped by `bytes.translate` onto "of that kind or not" (`run_table`), answer whether it
holds the run in one C pass (`regex_factors.Probe.has_run`); prose, made of short words between
spaces, seldom does.

Each node's characters are found by asking the regex engine itself: the node compiled alone
is tried on every ASCII character. A character outside ASCII counts as a member of a run
whenever the node could match one (a class of Unicode's, a negation, a letter under
IGNORECASE), and then as each byte of its UTF-8 form; so the test, like the literals', can
only err towards searching.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, NamedTuple

from .regex_tree import ATOMIC, COMPILER, CONSTANTS, PARSER, REPEATS

# A run shorter than this is in too many texts to be worth testing.
RUN_SHORTEST: Final = 6
MEMBER: Final = b"\x01"
_DIGITS: Final = "0123456789"
_ALNUM: Final = _DIGITS + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
# The kinds of characters a run is tested in, narrowest first, each with how long a run of it
# prose commonly has (a guess that only orders the candidates: any run a match holds is a
# sound test). A run's members are widened to the narrowest kind that holds them: the text is
# mapped once per kind, not once per pattern. No kind holds a space: prose is words between
# spaces, and a run that may hold one is in every text.
RUN_KINDS: Final = tuple(
    (frozenset(members), typical)
    for members, typical in (
        (_DIGITS + ".", 4),  # numbers, addresses
        (_DIGITS + "abcdefABCDEF", 4),  # hexadecimal
        (_ALNUM, 10),  # words and numbers
        (_ALNUM + "_-", 12),  # identifiers, tokens
        (_ALNUM + "_-.:/+=%~@", 16),  # addresses, base64
        ("".join(map(chr, range(33, 127))), 20),  # anything but spaces and controls
    )
)
_TYPICAL: Final = dict(RUN_KINDS)


class Run(NamedTuple):
    """`shortest` characters in a row, each an ASCII character of `members` or, when `wide`,
    possibly a character outside ASCII. What a node of a pattern consumes is one too, its
    members any set; `required_runs` widens a run's members to one of `RUN_KINDS`."""

    members: frozenset[str]
    shortest: int
    wide: bool


_ZERO_WIDTH: Final = Run(frozenset(), 0, False)
_ASCII: Final = tuple(map(chr, range(128)))


def required_runs(pattern: re.Pattern[str]) -> tuple[Run, ...]:
    """The best run every match of `pattern` holds (none: none worth testing was found), of
    one of `RUN_KINDS`: a text is mapped once per kind, whatever the patterns asked about it."""
    if PARSER is None or COMPILER is None:
        return ()
    try:
        tree = PARSER.parse(pattern.pattern, pattern.flags)
    except Exception:  # a pattern this parser reads otherwise: no shortcut
        return ()
    spans = _Spans(tree.state, pattern.flags | tree.state.flags)
    best: tuple[tuple[bool, float], Run] | None = None
    for stretch in spans.stretches(list(tree)):
        kind = next((k for k, _ in RUN_KINDS if stretch.members <= k), None)
        if kind is None or stretch.shortest < RUN_SHORTEST:
            continue
        rank = (not stretch.wide, stretch.shortest / _TYPICAL[kind])
        if best is None or rank > best[0]:
            best = rank, stretch._replace(members=kind)
    return () if best is None else (best[1],)


@functools.cache
def run_table(members: frozenset[str], wide: bool) -> bytes:
    """A `bytes.translate` table: a member's byte, and when `wide` every byte of a character
    outside ASCII, to `MEMBER`; any other byte to 0."""
    inside = MEMBER if wide else b"\x00"
    return bytes(MEMBER[0] if chr(b) in members else 0 for b in range(128)) + inside * 128


def _joined(spans: Iterable[Run]) -> Run:
    """What nodes one after the other consume."""
    members: set[str] = set()
    shortest, wide = 0, False
    for span in spans:
        members |= span.members
        shortest, wide = shortest + span.shortest, wide or span.wide
    return Run(frozenset(members), shortest, wide)


class _Spans:
    """What the nodes of one parsed pattern consume, as `Run`s (None: a node whose characters
    are not known, such as a back reference or a group with flags of its own), each found
    once."""

    def __init__(self, state: Any, flags: int) -> None:
        self.state = state
        self.flags = flags
        self._found: dict[int, Run | None] = {}  # by the node's id: the tree outlives this

    def stretches(self, items: list[tuple[Any, Any]]) -> Iterator[Run]:
        """The span of each stretch of nodes of the sequence `items` whose spans are known,
        and of those within the nodes every match of it goes through."""
        spans = [self.span(node) for node in items]
        for i in range(len(spans)):
            for j in range(i, len(spans)):
                if spans[j] is None:
                    break
                yield _joined(s for s in spans[i : j + 1] if s is not None)
        for op, av in items:
            if op is CONSTANTS.SUBPATTERN and not (av[1] or av[2]):
                yield from self.stretches(list(av[-1]))
            elif op is ATOMIC:
                yield from self.stretches(list(av))
            elif op in REPEATS and av[0] >= 1:
                yield from self.stretches(list(av[2]))

    def span(self, node: tuple[Any, Any]) -> Run | None:
        """What every match of the node `(op, av)` consumes."""
        key = id(node)
        if key not in self._found:
            self._found[key] = self._span(*node)
        return self._found[key]

    def _span(self, op: Any, av: Any) -> Run | None:
        if op in (CONSTANTS.LITERAL, CONSTANTS.NOT_LITERAL, CONSTANTS.IN, CONSTANTS.ANY):
            return self._character(op, av)
        if op in (CONSTANTS.AT, CONSTANTS.ASSERT, CONSTANTS.ASSERT_NOT):
            return _ZERO_WIDTH
        if op is CONSTANTS.SUBPATTERN:
            return None if av[1] or av[2] else self._sequence(list(av[-1]))
        if op is ATOMIC:
            return self._sequence(list(av))
        if op in REPEATS:
            body = self._sequence(list(av[2]))
            return body and body._replace(shortest=av[0] * body.shortest)
        if op is CONSTANTS.BRANCH:
            alternatives = [self._sequence(list(a)) for a in av[1]]
            known = [a for a in alternatives if a is not None]
            if not alternatives or len(known) < len(alternatives):
                return None
            return Run(
                frozenset().union(*(a.members for a in known)),
                min(a.shortest for a in known),
                any(a.wide for a in known),
            )
        return None  # a back reference, a conditional group: not known here

    def _sequence(self, items: Sequence[tuple[Any, Any]]) -> Run | None:
        spans = [self.span(node) for node in items]
        known = [s for s in spans if s is not None]
        return _joined(known) if len(known) == len(spans) else None

    def _character(self, op: Any, av: Any) -> Run | None:
        """A node that consumes one character: its ASCII members as the regex engine itself
        matches them (the node compiled alone), and whether it may match outside ASCII."""
        try:
            alone = COMPILER.compile(PARSER.SubPattern(self.state, [(op, av)]), self.flags)
        except Exception:  # pragma: no cover - a node the compiler takes only in context
            return None
        members = frozenset(c for c in _ASCII if alone.fullmatch(c))
        return Run(members, 1, self._wide(op, av, members))

    def _wide(self, op: Any, av: Any, members: frozenset[str]) -> bool:
        """Whether the node may match a character outside ASCII: any negation, any class of
        Unicode's (digits, word characters, spaces), a member beyond ASCII, or an ASCII letter
        under IGNORECASE (the engine takes ſ as s and the Kelvin sign as k)."""
        caseless = self.flags & re.IGNORECASE and not self.flags & re.ASCII
        if caseless and any(c.isalpha() for c in members):
            return True
        if op is CONSTANTS.LITERAL:
            return bool(av >= 128)
        if op is not CONSTANTS.IN:
            return True  # NOT_LITERAL, ANY
        for item, value in av:
            if item is CONSTANTS.NEGATE:
                return True
            if item is CONSTANTS.CATEGORY and not self.flags & re.ASCII:
                return True
            if item is CONSTANTS.LITERAL and value >= 128:
                return True
            if item is CONSTANTS.RANGE and value[1] >= 128:
                return True
        return False
