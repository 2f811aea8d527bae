"""`raytsystem.toml`: the workspace configuration, validated at the boundary."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .errors import WorkspaceError
from .ids import NEWEST_SCHEME, SCHEMES

CONFIG_NAME: Final = "raytsystem.toml"  # at the workspace's root
DEFAULT_INCLUDE: Final = ("**",)
# What is never knowledge, whatever the folder: review reports (written by `raytsystem review`:
# ingesting them would feed audits back in), hidden files (`.env`, `.gitignore`), dependencies,
# virtual environments, caches and build outputs. Files a `.gitignore` ignores are passed over
# too.
DEFAULT_EXCLUDE: Final = (
    "ops/reviews/**",
    CONFIG_NAME,
    "**/.*",
    "**/node_modules/**",
    "**/.venv/**",
    "**/venv/**",
    "**/__pycache__/**",
    "**/.tox/**",
    "**/.nox/**",
    "**/.mypy_cache/**",
    "**/.pytest_cache/**",
    "**/.ruff_cache/**",
    "**/*.egg-info/**",
    "**/dist/**",
    "**/build/**",
    "**/target/**",
    "**/.idea/**",
    "**/.vscode/**",
)
DEFAULT_MAX_FILE_BYTES: Final = 10 * 1024 * 1024
# The largest max_file_bytes taken: a file is read whole into memory and split by a worker, and
# the ingest is held to 1 GiB (ADR 0017); larger made Python's reads overflow (issue 34).
MOST_FILE_BYTES: Final = 1024 * 1024 * 1024
DEFAULT_KEEP_INDEXES: Final = 2
# A detect-secrets baseline (`detect-secrets scan > .secrets.baseline`): the findings it lists,
# unless audited as real, are accepted false positives (ADR 0040).
DEFAULT_SECRETS_BASELINE: Final = ".secrets.baseline"
PERSONAL_DATA_POLICIES: Final = ("report", "quarantine", "allow")
# A workspace whose raytsystem.toml names no ID scheme was made before scheme 2 existed: its
# ledgers, and every clone's, keep scheme 1. `raytsystem init` writes the newest (ADR 0030).
UNNAMED_ID_SCHEME: Final = 1
# The meaning gap's bar (ADR 0043; measured: bench/retrieval.md, "Meaning").
DEFAULT_MIN_SIMILARITY: Final = 0.38

DEFAULT_CONFIG_TEXT: Final = f"""\
# raytsystem workspace configuration. Paths are workspace-relative POSIX globs:
# `*` stays inside one folder, `**` crosses folders. _raw/, .raytsystem/ and .git/
# are never ingested, whatever these say, nor what a .gitignore ignores, nor formats
# raytsystem cannot read (images, archives, binaries).
[ingest]
# Every file raytsystem can read: Markdown, text, HTML, reStructuredText, PDF, notebooks,
# source code...
include = {json.dumps(DEFAULT_INCLUDE)}
# Review reports (written by `raytsystem review`: ingesting them would feed audits back in),
# this file, hidden files (.env, .gitignore...), dependencies, virtual environments, caches,
# build outputs.
exclude = {json.dumps(DEFAULT_EXCLUDE)}
# Files larger than this are skipped with a `file_too_large` finding.
max_file_bytes = {DEFAULT_MAX_FILE_BYTES}
# A file with a secret in it (a key, a token, a password) is never stored (ADR 0040). A
# false positive is accepted by a `pragma: allowlist secret` comment on its line, or by
# this detect-secrets baseline file (workspace-relative; absent is fine).
secrets_baseline = "{DEFAULT_SECRETS_BASELINE}"
# E-mail addresses and phone numbers: "report" (`raytsystem review` lists where), "quarantine"
# (a file with any is not stored, as a secret is not) or "allow".
personal_data = "report"

[index]
# How many generations keep their search index under .raytsystem/indexes (the newest ones).
# `query --generation N` needs N's index; `raytsystem index rebuild N` makes a pruned one again.
# A new generation's index is made by patching an index about to be pruned (when there is
# one: from the second change on with 2) instead of copying the parent's.
keep = {DEFAULT_KEEP_INDEXES}

[meaning]
# A sentence-embedding model, workspace-relative or absolute: a sentence-transformers BERT
# folder (config.json, model.safetensors, tokenizer.json; all-MiniLM-L6-v2 is the one
# measured). When set, a question none of whose first citations is at least min_similarity
# (cosine) alike in meaning is a gap (ADR 0043). "" is off; needs the `semantic` extra.
model = ""
min_similarity = {DEFAULT_MIN_SIMILARITY}

[ids]
# How IDs are derived (ADR 0030). A ledger records it when it first stores a file and keeps
# it: claim IDs quoted in notes (`retracts:`) hold only under the same scheme.
scheme = {NEWEST_SCHEME}
"""


@dataclass(frozen=True)
class IngestConfig:
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    secrets_baseline: str = DEFAULT_SECRETS_BASELINE
    personal_data: str = "report"


@dataclass(frozen=True)
class IndexConfig:
    keep: int = DEFAULT_KEEP_INDEXES


@dataclass(frozen=True)
class IdsConfig:
    scheme: int = UNNAMED_ID_SCHEME


@dataclass(frozen=True)
class MeaningConfig:
    model: str = ""  # a model folder, workspace-relative or absolute; "" is off
    min_similarity: float = DEFAULT_MIN_SIMILARITY


@dataclass(frozen=True)
class Config:
    ingest: IngestConfig = IngestConfig()
    index: IndexConfig = IndexConfig()
    ids: IdsConfig = IdsConfig()
    meaning: MeaningConfig = MeaningConfig()


def load_config(root: Path) -> Config:
    path = root / CONFIG_NAME
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Config()
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise WorkspaceError(
            f"{CONFIG_NAME} is not valid TOML: {exc}", code="config_invalid"
        ) from exc
    problems: list[str] = []
    config = parse_config(data, problems)
    if problems:
        raise WorkspaceError(
            f"{CONFIG_NAME} is invalid: {'; '.join(problems)}", code="config_invalid"
        )
    return config


def parse_config(data: dict[str, Any], problems: list[str]) -> Config:
    """The config a parsed TOML document describes; what is wrong with it goes to `problems`.

    Written out rather than through pydantic (the style rule for edges): importing pydantic and
    building these models costs more than the rest of a re-ingest's start (ADR 0023).
    Unknown keys are errors; numbers are TOML integers or whole floats (`1e7`), never strings
    ("5") or booleans; a table left out keeps its defaults."""
    _unknown(data, ("ingest", "index", "ids", "meaning"), "", problems)
    ingest, index = _table(data, "ingest", problems), _table(data, "index", problems)
    ids, meaning = _table(data, "ids", problems), _table(data, "meaning", problems)
    _unknown(
        ingest,
        ("include", "exclude", "max_file_bytes", "secrets_baseline", "personal_data"),
        "ingest.",
        problems,
    )
    _unknown(index, ("keep",), "index.", problems)
    _unknown(ids, ("scheme",), "ids.", problems)
    _unknown(meaning, ("model", "min_similarity"), "meaning.", problems)
    scheme = _integer(ids, "ids.scheme", UNNAMED_ID_SCHEME, 1, problems)
    if scheme not in SCHEMES:
        problems.append(f"ids.scheme: must be one of {', '.join(map(str, SCHEMES))}, not {scheme}")
    return Config(
        IngestConfig(
            _globs(ingest, "include", DEFAULT_INCLUDE, problems),
            _globs(ingest, "exclude", DEFAULT_EXCLUDE, problems),
            _integer(
                ingest,
                "ingest.max_file_bytes",
                DEFAULT_MAX_FILE_BYTES,
                1,
                problems,
                most=MOST_FILE_BYTES,
            ),
            _string(ingest, "ingest.secrets_baseline", DEFAULT_SECRETS_BASELINE, None, problems),
            _string(ingest, "ingest.personal_data", "report", PERSONAL_DATA_POLICIES, problems),
        ),
        IndexConfig(_integer(index, "index.keep", DEFAULT_KEEP_INDEXES, 1, problems)),
        IdsConfig(scheme),
        _meaning(meaning, problems),
    )


def _meaning(table: dict[str, Any], problems: list[str]) -> MeaningConfig:
    model = table.get("model", "")
    if not isinstance(model, str):
        problems.append(f"meaning.model: must be a string (a folder), not {model!r}")
        model = ""
    bar = table.get("min_similarity", DEFAULT_MIN_SIMILARITY)
    if isinstance(bar, bool) or not isinstance(bar, int | float) or not -1.0 <= bar <= 1.0:
        problems.append(f"meaning.min_similarity: must be a number from -1 to 1, not {bar!r}")
        bar = DEFAULT_MIN_SIMILARITY
    return MeaningConfig(model, float(bar))


def _unknown(table: dict[str, Any], known: tuple[str, ...], at: str, problems: list[str]) -> None:
    problems.extend(
        f"{at}{key}: not a setting (known: {', '.join(known)})" for key in table if key not in known
    )


def _table(data: dict[str, Any], name: str, problems: list[str]) -> dict[str, Any]:
    value = data.get(name, {})
    if isinstance(value, dict):
        return value
    problems.append(f"{name}: must be a table ([{name}])")
    return {}


def _globs(
    table: dict[str, Any], key: str, default: tuple[str, ...], problems: list[str]
) -> tuple[str, ...]:
    value = table.get(key, default)
    if not isinstance(value, list | tuple):
        problems.append(f"ingest.{key}: must be a list of glob strings, not {value!r}")
        return default
    for i, glob in enumerate(value):
        if not isinstance(glob, str):
            problems.append(f"ingest.{key}.{i}: must be a glob string, not {glob!r}")
            return default
    return tuple(value)


def _integer(
    table: dict[str, Any],
    name: str,
    default: int,
    least: int,
    problems: list[str],
    *,
    most: int | None = None,
) -> int:
    value = table.get(name.rpartition(".")[2], default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # `1e7` is how TOML writes a large number briefly
    # bool is an int in Python, never in a config file.
    if isinstance(value, int) and not isinstance(value, bool) and value >= least:
        if most is None or value <= most:
            return value
        problems.append(f"{name}: must be at most {most}, not {value}")
        return default
    problems.append(f"{name}: must be a whole number of at least {least}, not {value!r}")
    return default


def _string(
    table: dict[str, Any],
    name: str,
    default: str,
    choices: tuple[str, ...] | None,
    problems: list[str],
) -> str:
    value = table.get(name.rpartition(".")[2], default)
    if not isinstance(value, str) or not value:
        problems.append(f"{name}: must be a non-empty string, not {value!r}")
        return default
    if choices is not None and value not in choices:
        problems.append(f"{name}: must be one of {', '.join(map(repr, choices))}, not {value!r}")
        return default
    return value
