"""`raytsystem.toml`: the workspace configuration, validated at the boundary with pydantic."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import WorkspaceError
from .workspace import CONFIG_NAME

DEFAULT_INCLUDE: Final = ("knowledge/**", "ops/**", "docs/**", "*.md")
DEFAULT_EXCLUDE: Final = ("ops/reviews/**",)
DEFAULT_MAX_FILE_BYTES: Final = 10 * 1024 * 1024
DEFAULT_KEEP_INDEXES: Final = 2

DEFAULT_CONFIG_TEXT: Final = f"""\
# raytsystem workspace configuration. Paths are workspace-relative POSIX globs:
# `*` stays inside one folder, `**` crosses folders. _raw/, .raytsystem/ and .git/
# are never ingested, whatever these say.
[ingest]
include = {list(DEFAULT_INCLUDE)!r}
# Review reports are written by `raytsystem review`; ingesting them would feed audits back in.
exclude = {list(DEFAULT_EXCLUDE)!r}
# Files larger than this are skipped with a `file_too_large` finding.
max_file_bytes = {DEFAULT_MAX_FILE_BYTES}

[index]
# How many generations keep their search index under .raytsystem/indexes (the newest ones).
# `query --generation N` needs N's index; `raytsystem index rebuild N` makes a pruned one again.
# A new generation's index is made by patching an index about to be pruned (when there is
# one: from the second change on with 2) instead of copying the parent's.
keep = {DEFAULT_KEEP_INDEXES}
""".replace("'", '"')


class IngestConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    max_file_bytes: int = Field(default=DEFAULT_MAX_FILE_BYTES, gt=0)


class IndexConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    keep: int = Field(default=DEFAULT_KEEP_INDEXES, ge=1)


class Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    ingest: IngestConfig = IngestConfig()
    index: IndexConfig = IndexConfig()


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
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise WorkspaceError(
            f"{CONFIG_NAME} is invalid: {problems}", code="config_invalid"
        ) from exc
