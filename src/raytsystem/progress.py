"""Progress bars for long work, on a terminal only; silent with --json or when piped."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

Progress = Callable[[str, int, int, int], None]  # (phase, done, total, bytes)


@contextlib.contextmanager
def progress_for(label: str, *, enabled: bool) -> Iterator[Progress | None]:
    """A `Progress` callback drawing one bar per phase on stderr (done of total, megabytes,
    rates, time left), or None when disabled or stderr is not a terminal."""
    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        Task,
        TaskID,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.progress import (
        Progress as RichProgress,
    )
    from rich.text import Text

    class Rates(ProgressColumn):
        """Megabytes so far and per second (when the phase counts bytes), items per second."""

        def render(self, task: Task) -> Text:
            parts = []
            mb = task.fields.get("mb") or 0.0
            if mb:
                parts.append(f"{mb:,.1f} MB")
                if task.elapsed:
                    parts.append(f"{mb / task.elapsed:,.1f} MB/s")
            if task.speed:
                parts.append(f"{task.speed:,.0f}/s")
            return Text("  ".join(parts), style="progress.data.speed")

    bar = RichProgress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        Rates(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    tasks: dict[str, TaskID] = {}
    started = False

    def update(phase: str, done: int, total: int, nbytes: int) -> None:
        nonlocal started
        if not started:
            # The bar (and its refresh thread) starts with the first news: a command that
            # forks a child before it has any (`forked.in_child`) does so with one thread.
            bar.start()
            started = True
        if phase not in tasks:
            tasks[phase] = bar.add_task(f"{label}: {phase}", total=total, mb=0.0)
        bar.update(tasks[phase], completed=done, total=total, mb=nbytes / 1e6)

    try:
        yield update
    finally:
        if started:
            bar.stop()
