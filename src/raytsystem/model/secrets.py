"""Secrets in a file's text, found before its bytes are stored (ADR 0040).

The detectors are detect-secrets' own plugins (cloud keys, tokens, private keys, JWTs,
basic-auth URLs, keyword and high-entropy assignments) and its own false-positive filters
(the inline `pragma: allowlist secret` comment among them), run line by line over the text
raytsystem already decoded: the bytes that would be stored are the bytes that are scanned,
never a second read of the file, and nothing touches the network (no plugin's `verify`).

A finding names the path, the line and the kind of secret, never the value: the value (and
detect-secrets' SHA-1 of it, which a short password would not survive) stays inside this
module, where it is compared with the accepted entries of a detect-secrets baseline file.

Which plugins can find anything in a text, and the gate table that clears most files without
detect-secrets, are `model.secret_gates`'.
"""

from __future__ import annotations

import functools
import io
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from .regex_factors import Probe, lines_holding
from .secret_gates import (
    NOT_INI,
    GateKey,
    detector,
    is_keyword,
    keyword_factors,
    keywords,
    line_gates,
    plugins_for,
)

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
    probe = Probe(text)
    active = plugins_for(probe, opened)  # once: searching the gates costs most
    keyword_active = any(is_keyword(p) for p in active)
    # The plain lines that may hold a keyword: the keyword patterns are searched in those only.
    keyword_lines = lines_holding(keyword_factors(), probe.folded) if keyword_active else set()
    for eager in (False, True):
        lines = _transformed(path, text, eager)
        if lines is None:
            if eager:
                break
            lines = plain
        if lines is plain:
            found = _scan_lines(path, lines, plain, accepted, active, keyword_lines=keyword_lines)
        else:
            joined = "\n".join(lines)
            found = _scan_lines(path, lines, plain, accepted, plugins_for(Probe(joined)))
        if found:
            return found
    if not keyword_active:
        return []  # an assignment needs one of the keyword plugin's keywords
    # The values are quoted only once found: the high-entropy plugins' gates do not apply.
    return _scan_lines(
        path, plain, plain, accepted, detector()[0], assignments=True, keyword_lines=keyword_lines
    )


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

    if determine_file_type(path) != FileType.YAML and NOT_INI.search(text):
        return None  # what is left, the INI transformers, would fail on this line
    handle = _NamedText(text)
    handle.name = path
    try:
        lines = get_transformed_file(cast(Any, handle), use_eager_transformers=eager)
    except Exception:  # a transformer that fails on odd text: the plain lines are scanned
        return None
    return [line.rstrip("\n") for line in lines] if lines else None


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
    keyword_lines: set[int] | None = None,
) -> list[SecretFinding]:
    """Findings of the plugins on these lines, through detect-secrets' filters; with
    `assignments`, only of the unquoted `key = value` assignments (`_assignments`). A line a
    transformer made is also judged as the file has it (`plain`): its allowlist comment is
    on that line, and the transformer does not keep it. `keyword_lines`: the numbers of the
    lines of `plain` that may hold one of the keyword plugin's keywords (`lines_holding`),
    given only when `lines` is `plain`; None: any line may."""
    from detect_secrets.core.potential_secret import PotentialSecret

    _, line_filters, secret_filters, context_filters = detector()
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
        candidates = find(
            plugins, path, line, number, keyword_lines is None or number in keyword_lines
        )
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


def _candidates(
    plugins: list[Any], path: str, line: str, number: int, may_hold_keyword: bool
) -> list[Any]:
    """What the plugins find on the line; `may_hold_keyword`: False when the line cannot
    hold a keyword, and so the keyword plugin, whose gate is the keywords, finds nothing."""
    gates = line_gates()
    return [
        (plugin, secret)
        for plugin in plugins
        if (gate := gates.get(id(plugin))) is None
        or ((may_hold_keyword or not is_keyword(plugin)) and gate.search(line) is not None)
        for secret in plugin.analyze_line(filename=path, line=line, line_number=number)
    ]


def _assignments(
    plugins: list[Any], path: str, line: str, number: int, may_hold_keyword: bool
) -> list[Any]:
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
    if not may_hold_keyword or keywords().search(line) is None:
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
    return sorted(str(p.secret_type) for p in detector()[0])


@functools.cache
def _filename_filters() -> list[Any]:
    from detect_secrets.core.scan import get_filters_with_parameter

    detector()
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
