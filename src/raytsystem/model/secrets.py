"""Secrets in a file's text, found before its bytes are stored (ADR 0040).

The detectors are detect-secrets' own plugins (cloud keys, tokens, private keys, JWTs,
basic-auth URLs, keyword and high-entropy assignments) and its own false-positive filters
(the inline `pragma: allowlist secret` comment among them), run line by line over the text
raytsystem already decoded: the bytes that would be stored are the bytes that are scanned,
never a second read of the file, and nothing touches the network (no plugin's `verify`).

A finding names the path, the line and the kind of secret, never the value: the value (and
detect-secrets' SHA-1 of it, which a short password would not survive) stays inside this
module, where it is compared with the accepted entries of a detect-secrets baseline file.

detect-secrets keeps its settings in process-wide state; they are set once per process here,
to the same plugins and filters every time, so every process that scans agrees.
"""

from __future__ import annotations

import functools
import io
import json
import logging
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from .adapters.base import MEDIA_TYPES
from .regex_factors import Factor, fold, lines_holding, matches_a_line, required_literals

# detect-secrets logs a skipped candidate's value at INFO; nothing it says may reach a log.
_DS_LOGGER = "detect-secrets"
# Filters that judge the file rather than the text scanned here: one reads the file from the
# disk by name (relative to the process's working directory: another file), the other skips
# names of binary formats; the text given here is always text (decoded, or what an adapter
# extracted from a PDF), so neither applies.
_DISK_FILTERS = frozenset(
    {
        "detect_secrets.filters.common.is_invalid_file",
        "detect_secrets.filters.heuristic.is_non_text_file",
    }
)


@dataclass(frozen=True, order=True)
class SecretFinding:
    """A secret in a file: where and what kind, never the value."""

    path: str
    line: int  # 1-based, counted as `model.text` counts raw lines
    kind: str  # detect-secrets' secret type, e.g. "AWS Access Key"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "kind": self.kind}


class BaselineError(ValueError):
    """The baseline file cannot be read as a detect-secrets baseline."""


@dataclass(frozen=True)
class Accepted:
    """What a detect-secrets baseline accepts: (path, kind, SHA-1 of the value) of each
    result that an audit did not mark as a real secret (`is_secret: true`)."""

    entries: frozenset[tuple[str, str, str]] = frozenset()

    def __contains__(self, key: object) -> bool:
        return key in self.entries


def load_baseline(path: Path) -> Accepted:
    """The accepted entries of the baseline file at `path` (none when it does not exist)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Accepted()
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"cannot read {path.name}: {exc}") from None
    return parse_baseline(raw, path.name)


def parse_baseline(raw: str, name: str = "baseline") -> Accepted:
    from detect_secrets.core.secrets_collection import SecretsCollection

    try:
        data = json.loads(raw)
        collection = SecretsCollection.load_from_baseline(data)
        entries = frozenset(
            (secret.filename, secret.type, secret.secret_hash)
            for _, secret in collection
            if secret.is_secret is not True
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BaselineError(
            f"{name} is not a detect-secrets baseline ({type(exc).__name__})"
        ) from None
    return Accepted(entries)


def scan_text(
    path: str,
    text: str,
    accepted: Accepted = Accepted(),
    opened: frozenset[GateKey] | None = None,
) -> list[SecretFinding]:
    """The secrets in `text` (a file's decoded text, at workspace-relative `path`), one
    finding per line and kind, those the baseline accepts left out. `opened`: the gate
    table's patterns that match in `text` (`table_gates`), when the table applies.

    As detect-secrets scans a file: its lines as they are (or as its YAML and INI
    transformers read them), and when they hold nothing, once more as its eager transformer
    reads them (`key = value` lines with the value quoted, which its high-entropy plugins
    need: this is how an unquoted `API_KEY=...` in a text file is found)."""
    if _filtered(_filename_filters(), filename=path):
        return []
    if path.lower().endswith(".ipynb"):
        text = _NOTEBOOK_MACHINERY.sub(_blanked, text)
        opened = None  # of another text
    plain = text.split("\n")
    folded = fold(text)
    active = _plugins_for(text, folded, opened)  # once: searching the gates costs most
    # The plain lines that may hold a keyword: the keyword patterns are searched in those only.
    keyed = lines_holding(_keyword_factors(), folded)
    for eager in (False, True):
        lines = _transformed(path, text, eager)
        if lines is None:
            if eager:
                break
            lines = plain
        if lines is plain:
            found = _scan_lines(path, lines, plain, accepted, active, keyed=keyed)
        else:
            joined = "\n".join(lines)
            found = _scan_lines(path, lines, plain, accepted, _plugins_for(joined, fold(joined)))
        if found:
            return found
    if not any(_is_keyword(p) for p in active):
        return []  # an assignment needs one of the keyword plugin's keywords
    # The values are quoted only once found: the high-entropy plugins' gates do not apply.
    return _scan_lines(path, plain, plain, accepted, _detector()[0], assignments=True, keyed=keyed)


# What Jupyter writes into every notebook and no person does: a cell's random `id` (hex) and
# image outputs (base64). Random by nature, they are what the high-entropy plugins flag; their
# values are blanked before the scan (same lines, same length), the rest of the file is not.
_NOTEBOOK_MACHINERY: Final = re.compile(
    r'^(\s*"(?:id|image/[\w.+-]+)":\s*\[?\s*")([^"\n]*)', re.MULTILINE
)


def _blanked(m: re.Match[str]) -> str:
    return m.group(1) + "x" * len(m.group(2))


def _transformed(path: str, text: str, eager: bool) -> list[str] | None:
    """The lines one of detect-secrets' transformers makes of the text (None: none applies)."""
    from detect_secrets.transformers import get_transformed_file
    from detect_secrets.util.filetype import FileType, determine_file_type

    if determine_file_type(path) != FileType.YAML and _NOT_INI.search(text):
        return None  # what is left, the INI transformers, would fail on this line
    handle = _NamedText(text)
    handle.name = path
    try:
        lines = get_transformed_file(cast(Any, handle), use_eager_transformers=eager)
    except Exception:  # a transformer that fails on odd text: the plain lines are scanned
        return None
    return [line.rstrip("\n") for line in lines] if lines else None


# A line no INI parser takes (configparser, which detect-secrets' INI transformers use, raises
# on it, whatever the section headers): not indented (no continuation), no comment, no
# section header, and neither of its key-value delimiters. Prose has such lines; a file of
# `KEY=value` assignments does not.
_NOT_INI: Final = re.compile(r"^(?![\s#;\[])[^=:\n]*$", re.MULTILINE)


class _NamedText(io.StringIO):
    """The text as the file object with a name that detect-secrets' transformers read."""

    name: str = ""


def _scan_lines(
    path: str,
    lines: list[str],
    plain: list[str],
    accepted: Accepted,
    plugins: list[Any],
    *,
    assignments: bool = False,
    keyed: set[int] | None = None,
) -> list[SecretFinding]:
    """Findings of the plugins on these lines, through detect-secrets' filters; with
    `assignments`, only of the unquoted `key = value` assignments (`_assignments`). A line a
    transformer made is also judged as the file has it (`plain`): its allowlist comment is
    on that line, and the transformer does not keep it. `keyed`: the numbers of the lines
    that may hold one of the keyword plugin's keywords (`lines_holding`); None: any."""
    from detect_secrets.core.potential_secret import PotentialSecret

    _, line_filters, secret_filters, context_filters = _detector()
    if not plugins:
        return []
    find = _assignments if assignments else _candidates
    found: set[SecretFinding] = set()
    for number, raw_line in enumerate(lines, 1):
        line = raw_line.rstrip()
        if not line:
            continue
        # The plugins run first and the line's filters only where they found something:
        # the same result as upstream's order (filters are predicates), at a fraction of the
        # cost (`is_indirect_reference` alone took 3 ms a line of prose).
        candidates = find(plugins, path, line, number, keyed is None or number in keyed)
        if not candidates:
            continue
        context = _snippet(lines, number)
        if _filtered(line_filters, filename=path, line=line, context=context):
            continue
        if lines is not plain and number <= len(plain):
            original = plain[number - 1].rstrip()
            if _filtered(
                line_filters, filename=path, line=original, context=_snippet(plain, number)
            ):
                continue
        for plugin, secret in candidates:
            value = secret.secret_value
            if value is None:
                continue
            common = {"filename": path, "secret": value, "plugin": plugin, "line": line}
            if _filtered(secret_filters, **common) or _filtered(
                context_filters, **common, context=context
            ):
                continue
            kind = str(secret.type)
            if (path, kind, PotentialSecret.hash_secret(value)) in accepted:
                continue
            found.add(SecretFinding(path, number, kind))
    return sorted(found)


def _is_keyword(plugin: Any) -> bool:
    from detect_secrets.plugins.keyword import KeywordDetector

    return isinstance(plugin, KeywordDetector)


def _plugins_for(text: str, folded: str, opened: frozenset[GateKey] | None = None) -> list[Any]:
    """The plugins that can find anything in `text`: each plugin's own patterns, searched
    once over the whole text (`_gates`), leave out those that cannot match any of its lines.
    The per-line work, Python calls for every plugin and line, is what costs (ADR 0040). A
    pattern is searched only in the lines that hold the literals every match of it holds
    (`model.regex_factors`): most patterns then cost a few substring searches. `folded`:
    the text's `fold`; `opened`: the table's patterns known to match (`table_gates`), the
    others of the table known not to."""
    known = _table_keys() if opened is not None else frozenset()

    def opens(pattern: re.Pattern[str], factors: tuple[Factor, ...]) -> bool:
        key = (pattern.pattern, pattern.flags)
        if opened is not None and key in known:
            return key in opened
        return matches_a_line(pattern, factors, text, folded)

    return [
        plugin
        for plugin, gate in _gates()
        if gate is None or any(opens(pattern, factors) for pattern, factors in gate)
    ]


Gate = list[tuple[re.Pattern[str], tuple[Factor, ...]]]


GateKey = tuple[str, int]  # a gate pattern's source and flags


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

    if detectors is None or detectors != gate_table.DETECTORS or _NOT_INI.search(text) is None:
        return None  # a version unknown, or a table that clears nothing (DETECTORS None)
    if os.path.splitext(path)[1] not in gate_table.PLAIN_SUFFIXES:
        return None
    folded = fold(text)
    return frozenset(
        (p.pattern, p.flags) for p, f in _table_gates() if matches_a_line(p, f, text, folded)
    )


def cleared(path: str, text: str, detectors: str | None) -> bool:
    """True only when `scan_text(path, text)` finds nothing, known from the gate table
    (`table_gates`) without importing detect-secrets."""
    return table_gates(path, text, detectors) == frozenset()


@functools.cache
def _table_gates() -> list[tuple[re.Pattern[str], tuple[Factor, ...]]]:
    from . import gate_table

    return [
        (re.compile(source, flags), tuple(frozenset(f) for f in factors))
        for source, flags, factors in gate_table.PATTERNS
    ]


@functools.cache
def _table_keys() -> frozenset[GateKey]:
    return frozenset((p.pattern, p.flags) for p, _ in _table_gates())


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

    patterns: list[tuple[str, int, list[list[str]]]] = []
    for _, gate in _gates():
        if gate is None:  # a plugin that always runs: nothing is ever cleared
            patterns = []
            break
        patterns += [(p.pattern, int(p.flags), [sorted(f) for f in factors]) for p, factors in gate]
    plain = [s for s in _PROBED_SUFFIXES if determine_file_type(f"file{s}") != FileType.YAML]
    return (
        '"""The secrets screen\'s gates as data, for `model.secrets.cleared`: generated by\n'
        '`model.secrets.gate_table_source`; do not edit."""\n\n'
        f"DETECTORS: str | None = {metadata.version('detect-secrets') if patterns else None!r}\n"
        f"PLAIN_SUFFIXES: frozenset[str] = frozenset({plain!r})\n"
        "PATTERNS: list[tuple[str, int, list[list[str]]]] = [\n"
        + "".join(f"    {entry!r},\n" for entry in patterns)
        + "]\n"
    )


@functools.cache
def _gates() -> list[tuple[Any, Gate | None]]:
    """Each plugin with a pattern that matches somewhere in a text whenever the plugin would
    find something on one of its lines (None: no such pattern is known; always run it).

    A regex plugin's patterns, with `re.MULTILINE` so that `^` and `$` match at each line's
    ends as they do on a line alone; a match within a line is a match within the text. The
    keyword plugin's patterns all contain one of its keywords: their alternation, without
    the costly rest. The high-entropy plugins', likewise: their quoted-string pattern, for
    strings long enough to pass their entropy limit (`_long_quoted`). Each pattern with the
    literals its matches hold."""
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
    from detect_secrets.plugins.keyword import KeywordDetector

    gates: list[tuple[Any, Gate | None]] = []
    for plugin in _detector()[0]:
        patterns: list[re.Pattern[str]] | None = None
        if isinstance(plugin, KeywordDetector):
            patterns = [_keywords()]
        elif isinstance(plugin, RegexBasedDetector):
            patterns = list(plugin.denylist)
        elif isinstance(plugin, HighEntropyStringsPlugin):
            patterns = [_long_quoted(plugin)]
        compiled = [re.compile(p.pattern, p.flags | re.MULTILINE) for p in patterns or ()]
        gates.append((plugin, [(p, required_literals(p)) for p in compiled] or None))
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
def _line_gates() -> dict[int, re.Pattern[str]]:
    """Per plugin (by id), a pattern a line must match for the plugin to find anything on
    it: the keyword plugin's keywords (its patterns cost a millisecond a line), the
    high-entropy plugins' long enough quoted strings (`_long_quoted`; entropy costs)."""
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin

    gates: dict[int, re.Pattern[str]] = {}
    for plugin in _detector()[0]:
        if _is_keyword(plugin):
            gates[id(plugin)] = _keywords()
        elif isinstance(plugin, HighEntropyStringsPlugin):
            gates[id(plugin)] = _long_quoted(plugin)
    return gates


def _candidates(plugins: list[Any], path: str, line: str, number: int, keyed: bool) -> list[Any]:
    """What the plugins find on the line; `keyed`: whether it may hold a keyword (when it
    cannot, the keyword plugin, whose gate is the keywords, finds nothing)."""
    gates = _line_gates()
    return [
        (plugin, secret)
        for plugin in plugins
        if (gate := gates.get(id(plugin))) is None
        or ((keyed or gate is not _keywords()) and gate.search(line) is not None)
        for secret in plugin.analyze_line(filename=path, line=line, line_number=number)
    ]


@functools.cache
def _keywords() -> re.Pattern[str]:
    """The alternation of the keyword plugin's keywords, which each of its patterns holds."""
    from detect_secrets.plugins.keyword import DENYLIST

    return re.compile("|".join(DENYLIST), re.IGNORECASE)


@functools.cache
def _keyword_factors() -> tuple[Factor, ...]:
    """The literals a line holding one of the keywords holds (`required_literals`)."""
    return required_literals(_keywords())


def _assignments(plugins: list[Any], path: str, line: str, number: int, keyed: bool) -> list[Any]:
    """The high-entropy values assigned to a secret-sounding key on this line, quoted or not
    (`API_KEY=...` in a Markdown or text file).

    detect-secrets' eager transformer does this for a whole file it can parse as INI: it
    quotes each value so that the high-entropy plugins, which look only at quoted strings,
    see it. A document of prose is no INI file, so here it is done a line at a time: the
    keyword plugin, with its patterns for config files (no quotes required), finds the value
    and the high-entropy plugins judge it quoted, as they would in the transformed file."""
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
    from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP, KeywordDetector

    out: list[Any] = []
    if not keyed or _keywords().search(line) is None:
        return out
    for keyword in (p for p in plugins if isinstance(p, KeywordDetector)):
        for value in keyword.analyze_string(line, CONFIG_DENYLIST_REGEX_TO_GROUP):
            quoted = '"{}"'.format(value.strip("'\"").replace('"', '\\"'))
            out.extend(
                (plugin, secret)
                for plugin in plugins
                if isinstance(plugin, HighEntropyStringsPlugin)
                for secret in plugin.analyze_line(filename=path, line=quoted, line_number=number)
            )
    return out


def kinds() -> list[str]:
    """The kinds of secret the detectors know (their detect-secrets type names)."""
    return sorted(str(p.secret_type) for p in _detector()[0])


@functools.cache
def _detector() -> tuple[list[Any], list[Any], list[Any], list[Any]]:
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


@functools.cache
def _filename_filters() -> list[Any]:
    from detect_secrets.core.scan import get_filters_with_parameter

    _detector()
    return [
        f
        for f in get_filters_with_parameter("filename")
        if f.injectable_variables == {"filename"} and f.path not in _DISK_FILTERS
    ]


def _filtered(filters: Iterable[Any], **kwargs: Any) -> bool:
    from detect_secrets.util.inject import call_function_with_arguments

    for fn in filters:
        try:
            if call_function_with_arguments(fn, **kwargs):
                return True
        except TypeError:  # a filter that wants what this call does not give (as upstream)
            continue
    return False


def _snippet(lines: list[str], number: int) -> Any:
    from detect_secrets.util.code_snippet import get_code_snippet

    return get_code_snippet(lines, number)
