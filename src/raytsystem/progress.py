"""Progress bars for long work, on a terminal only; silent with --json or when piped."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

Progress = Callable[[str, int, int, int], None]


@contextlib.contextmanager
def progress_for(label: str, *, enabled: bool) -> Iterator[Progress | None]:
    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TaskID,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.progress import (
        Progress as RichProgress,
    )

    bar = RichProgress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("files"),
        TextColumn("{task.fields[mb]:.1f} MB"),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    tasks: dict[str, TaskID] = {}

    def update(phase: str, done: int, total: int, nbytes: int) -> None:
        if phase not in tasks:
            tasks[phase] = bar.add_task(f"{label}: {phase}", total=total, mb=0.0)
        bar.update(tasks[phase], completed=done, total=total, mb=nbytes / 1e6)

    with bar:
        yield update
