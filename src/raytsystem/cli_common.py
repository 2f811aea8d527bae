"""What every command of the command line shares: the global options' `App` (and the session
it opens on first use), printing JSON or text, and the options many commands take."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from .api import Session

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class App:
    """The global options, and the session they open on first use."""

    workspace_arg: Path | None
    database_url: str | None
    cwd: Path = field(default_factory=Path.cwd)
    # One answer per process: a walk per answer, in a child process beside it ("fork"); the
    # servers set "track".
    freshness: str = "fork"
    _session: Session | None = None

    @property
    def session(self) -> Session:
        if self._session is None:
            from .api import Session

            self._session = Session.open(
                self.workspace_arg,
                database_url=self.database_url,
                cwd=self.cwd,
                freshness=self.freshness,
            )
        return self._session


def emit(data: Any, as_json: bool, human: Callable[[], None]) -> None:
    """Print `data` as JSON with `--json`, else call `human` to show it as text."""
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=False))
    else:
        human()


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")(f)


def lock_timeout_option(f: F) -> F:
    return click.option(
        "--lock-timeout",
        type=float,
        default=30.0,
        show_default=True,
        help="Seconds to wait for another writer.",
    )(f)
