"""Which of detect-secrets' plugins can find anything in a text, known cheaply (ADR 0040).

A plugin runs on a file's lines only when one of its own patterns (with `re.MULTILINE`) matches
within a line of the text: the gates. Each gate pattern is searched only in a text that holds
the run of characters, and in the lines that hold the literals, every match of it holds
(`model.regex_runs`, `model.regex_factors`). The gates are also committed as data
(`model/gate_table.py`) for the installed detect-secrets, so that a file none of them opens is
cleared without importing detect-secrets at all (`table_gates`).

detect-secrets keeps its settings in process-wide state; they are set once per process here
(`detector`), to the same plugins and filters every time, so every process that scans agrees.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import re
from typing import Any, Final, cast

from .adapters.base import MEDIA_TYPES
from .regex_factors import Factor, Needs, Probe, matches_a_line, needs, required_literals
from .regex_runs import RUN_KINDS, Run

# detect-secrets logs a skipped candidate's value at INFO; nothing it says may reach a log.
_DS_LOGGER = "detect-secrets"
# A line no INI parser takes (configparser, which detect-secrets' INI transformers use, raises
# on it, whatever the section headers): not indented (no continuation), no comment, no
# section header, and neither of its key-value delimiters. Prose has such lines; a file of
# `KEY=value` assignments does not.
NOT_INI: Final = re.compile(r"^(?![\s#;\[])[^=:\n]*$", re.MULTILINE)

GateKey = tuple[str, int]  # a gate pattern's source and flags
Gate = list[tuple[re.Pattern[str], Needs]]


@functools.cache
def detector() -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """detect-secrets' plugins (all of them) and its default filters, by what they read."""
    logging.getLogger(_DS_LOGGER).setLevel(logging.CRITICAL + 1)
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.core.scan import get_filters_with_parameter
    from detect_secrets.settings import configure_settings_from_baseline, get_plugins, get_settings

    classes: list[type] = list(get_mapping_from_secret_type_to_class().values())
    configure_settings_from_baseline({"plugins_used": [{"name": cls.__name__} for cls in classes]})
    # Never ask a service whether a key is live: a scan stays on this machine.
    get_settings().disable_filters(
        "detect_secrets.filters.common.is_ignored_due_to_verification_policies"
    )
    secret_filters = get_filters_with_parameter("secret")
    context_filters = [
        f for f in get_filters_with_parameter("context") if "secret" in f.injectable_variables
    ]
    line_filters = [
        f for f in get_filters_with_parameter("line") if "secret" not in f.injectable_variables
    ]
    return list(get_plugins()), line_filters, secret_filters, context_filters


def is_keyword(plugin: Any) -> bool:
    from detect_secrets.plugins.keyword import KeywordDetector

    return isinstance(plugin, KeywordDetector)


def plugins_for(probe: Probe, opened: frozenset[GateKey] | None = None) -> list[Any]:
    """The plugins that can find anything in `text`: each plugin's own patterns, searched
    once over the whole text (`gates`), leave out those that cannot match any of its lines.
    The per-line work, Python calls for every plugin and line, is what costs (ADR 0040). A
    pattern is searched only in a text that holds the runs and in the lines that hold the
    literals every match of it holds (`model.regex_factors`): most patterns then cost a few
    substring searches. `probe`: the text; `opened`: the table's patterns known to match
    (`table_gates`), the others of the table known not to."""
    known, found = (_table_keys(), opened) if opened is not None else (frozenset(), frozenset())

    def opens(pattern: re.Pattern[str], needed: Needs) -> bool:
        key = (pattern.pattern, pattern.flags)
        if key in known:
            return key in found
        return matches_a_line(pattern, needed, probe)

    return [
        plugin
        for plugin, gate in gates()
        if gate is None or any(opens(pattern, needed) for pattern, needed in gate)
    ]


def table_gates(path: str, text: str, detectors: str | None) -> frozenset[GateKey] | None:
    """The gate table's patterns that match within a line of `text`, known without
    importing detect-secrets (`detectors`: its installed version, None when unknown); None
    when the table does not apply. No pattern at all: `scan_text(path, text)` finds nothing.

    The gates as data (`model/gate_table.py`, made by `gate_table_source` for one version of
    detect-secrets): when no pattern of any plugin's gate matches a line, no plugin runs; a
    file of a suffix detect-secrets does not read as YAML, holding a line no INI parser takes,
    gets no transformed lines either; so the scan finds nothing. Anything else (another
    version, a notebook, another suffix) is left to `scan_text`, which is told the patterns
    found here so as not to search them again."""
    from . import gate_table

    if detectors is None or detectors != gate_table.DETECTORS or NOT_INI.search(text) is None:
        return None  # a version unknown, or a table that clears nothing (DETECTORS None)
    if os.path.splitext(path)[1] not in gate_table.PLAIN_SUFFIXES:
        return None
    probe = Probe(text)
    return frozenset(
        (p.pattern, p.flags) for p, n in _compiled_table() if matches_a_line(p, n, probe)
    )


@functools.cache
def _compiled_table() -> list[tuple[re.Pattern[str], Needs]]:
    """The table's patterns with what their matches need, as the table has it."""
    from . import gate_table

    return [
        (
            re.compile(source, flags),
            Needs(
                tuple(frozenset(f) for f in factors),
                tuple(Run(RUN_KINDS[k][0], shortest, wide) for k, shortest, wide in runs),
            ),
        )
        for source, flags, factors, runs in gate_table.PATTERNS
    ]


@functools.cache
def _table_keys() -> frozenset[GateKey]:
    return frozenset((p.pattern, p.flags) for p, _ in _compiled_table())


# The suffixes of files a knowledge base holds as text, probed for the table: the adapters'
# formats and common plain-text ones; those that detect-secrets does not read as YAML go in it
# (a notebook's text is changed before its scan: never cleared by the table).
_PROBED_SUFFIXES: Final = (
    *sorted(
        (set(MEDIA_TYPES) - {".ipynb"})
        | {".txt", ".text", ".adoc", ".org", ".csv", ".tsv", ".json", ".jsonl", ".toml", ".ini"}
        | {".cfg", ".conf", ".java", ".kt", ".c", ".h", ".cpp", ".hpp", ".cs", ".rb", ".php"}
        | {".sh", ".sql", ".tex", ".xml", ".svg", ".log"}
    ),
    "",
)


def gate_table_source() -> str:
    """The source of `model/gate_table.py` for the installed detect-secrets (a test keeps the
    committed file's values equal to its; `uv run python tests/test_secret_gates.py --write`
    writes it)."""
    from importlib import metadata

    from detect_secrets.util.filetype import FileType, determine_file_type

    kinds = {members: i for i, (members, _) in enumerate(RUN_KINDS)}
    patterns: list[tuple[str, int, list[list[str]], list[tuple[int, int, bool]]]] = []
    for _, gate in gates():
        if gate is None:  # a plugin that always runs: nothing is ever cleared
            patterns = []
            break
        patterns += [
            (
                p.pattern,
                int(p.flags),
                [sorted(f) for f in n.factors],
                [(kinds[r.members], r.shortest, r.wide) for r in n.runs],
            )
            for p, n in gate
        ]
    plain = [s for s in _PROBED_SUFFIXES if determine_file_type(f"file{s}") != FileType.YAML]
    return (
        '"""The secrets screen\'s gates as data, for `model.secret_gates.table_gates`: generated by\n'
        '`model.secret_gates.gate_table_source`; do not edit."""\n\n'
        f"DETECTORS: str | None = {metadata.version('detect-secrets') if patterns else None!r}\n"
        f"PLAIN_SUFFIXES: frozenset[str] = frozenset({plain!r})\n"
        "# (pattern, flags, its literal factors, its runs as (kind in RUN_KINDS, shortest, wide))\n"
        "PATTERNS: list[tuple[str, int, list[list[str]], list[tuple[int, int, bool]]]] = [\n"
        + "".join(f"    {entry!r},\n" for entry in patterns)
        + "]\n"
    )


@functools.cache
def gates() -> list[tuple[Any, Gate | None]]:
    """Each plugin with a pattern that matches somewhere in a text whenever the plugin would
    find something on one of its lines (None: no such pattern is known; always run it).

    A regex plugin's patterns, with `re.MULTILINE` so that `^` and `$` match at each line's
    ends as they do on a line alone; a match within a line is a match within the text. The
    keyword plugin's patterns all contain one of its keywords: their alternation, without
    the costly rest. The high-entropy plugins', likewise: their quoted-string pattern, for
    strings long enough to pass their entropy limit (`_long_quoted`). Each pattern with the
    literals and the run its matches hold (`regex_factors.needs`)."""
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
    from detect_secrets.plugins.keyword import KeywordDetector

    gates: list[tuple[Any, Gate | None]] = []
    for plugin in detector()[0]:
        patterns: list[re.Pattern[str]] | None = None
        if isinstance(plugin, KeywordDetector):
            patterns = [keywords()]
        elif isinstance(plugin, RegexBasedDetector):
            patterns = list(plugin.denylist)
        elif isinstance(plugin, HighEntropyStringsPlugin):
            patterns = [_long_quoted(plugin)]
        compiled = [re.compile(p.pattern, p.flags | re.MULTILINE) for p in patterns or ()]
        gates.append((plugin, [(p, needs(p)) for p in compiled] or None))
    return gates


def _long_quoted(plugin: Any) -> re.Pattern[str]:
    """The quoted strings a high-entropy plugin can report: its own pattern, for strings at
    least as long as its entropy limit needs.

    The plugin reports a string whose Shannon entropy over its characters is above the
    limit; a string of n characters has at most log2(n) bits, so one shorter than 2**limit
    characters never passes (one less still, for rounding). Its pattern as detect-secrets
    builds it (quote, charset+, same quote) is tightened to that length; a pattern built
    otherwise is taken as it is."""
    shortest = max(1, math.floor(2**plugin.entropy_limit) - 1)
    built = r"""([\'"])([{}]+)(\1)"""  # how detect-secrets builds it from the charset
    charset = re.escape(plugin.charset)
    if plugin.regex.pattern != built.format(charset):
        return cast(re.Pattern[str], plugin.regex)
    return re.compile(built.format(charset).replace("]+)", f"]{{{shortest},}})", 1))


@functools.cache
def line_gates() -> dict[int, re.Pattern[str]]:
    """Per plugin (by id), a pattern a line must match for the plugin to find anything on
    it: the keyword plugin's keywords (its patterns cost a millisecond a line), the
    high-entropy plugins' long enough quoted strings (`_long_quoted`; entropy costs)."""
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin

    gates: dict[int, re.Pattern[str]] = {}
    for plugin in detector()[0]:
        if is_keyword(plugin):
            gates[id(plugin)] = keywords()
        elif isinstance(plugin, HighEntropyStringsPlugin):
            gates[id(plugin)] = _long_quoted(plugin)
    return gates


@functools.cache
def keywords() -> re.Pattern[str]:
    """The alternation of the keyword plugin's keywords, which each of its patterns holds."""
    from detect_secrets.plugins.keyword import DENYLIST

    return re.compile("|".join(DENYLIST), re.IGNORECASE)


@functools.cache
def keyword_factors() -> tuple[Factor, ...]:
    """The literals a line holding one of the keywords holds (`required_literals`)."""
    return required_literals(keywords())
