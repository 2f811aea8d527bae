"""The commands that keep running: `watch`, `mcp` and `serve` (until Ctrl-C or the client
leaves), the git `hooks` that run ingests, and `universe`, which draws what `serve` serves.
`cli.py` adds them to the command group."""

from __future__ import annotations

import json
from pathlib import Path

import click

from . import cli_render as render
from .cli_common import App, F, emit, json_option, lock_timeout_option
from .errors import UsageError


def debounce_options(f: F) -> F:
    f = click.option(
        "--max-wait",
        type=click.IntRange(100, 600_000),
        default=10_000,
        show_default=True,
        help="Most milliseconds to wait after a first change while changes go on.",
    )(f)
    return click.option(
        "--debounce",
        type=click.IntRange(10, 60_000),
        default=300,
        show_default=True,
        help="Milliseconds without a new change before an ingest starts.",
    )(f)


@click.command()
@debounce_options
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(1, 64),
    help="Processes that parse files, the writer included (default: cores, at most 8).",
)
@lock_timeout_option
@json_option
@click.pass_obj
def watch(
    app: App,
    debounce: int,
    max_wait: int,
    jobs: int | None,
    lock_timeout: float,
    as_json: bool,
) -> None:
    """Ingest now and whenever the workspace's files change; one line per generation made.
    Ctrl-C stops it between ingests."""
    import threading

    from .api import WatchEvent, stop_on_signals

    session = app.session
    session.ledger(create=True)
    stop = threading.Event()
    busy = threading.Event()

    def report(event: WatchEvent) -> None:
        if as_json:
            click.echo(json.dumps(event.to_json(), ensure_ascii=False, separators=(",", ":")))
        else:
            click.echo(event.line(), err=event.kind == "error")

    def said(message: str) -> None:
        click.echo(message, err=True)

    with stop_on_signals(stop, busy.is_set, said):
        if not as_json:
            said(f"watching {session.ws.root} (Ctrl-C to stop)")
        session.watch(
            report,
            stop,
            debounce_ms=debounce,
            max_wait_ms=max_wait,
            jobs=jobs,
            lock_timeout=lock_timeout,
            on_ingest=lambda running: busy.set() if running else busy.clear(),
        )
    if not as_json:
        said("stopped")


@click.group()
def hooks() -> None:
    """Git hooks that run an ingest after a commit, a merge and a checkout."""


@hooks.command("install")
@json_option
@click.pass_obj
def hooks_install(app: App, as_json: bool) -> None:
    """Add post-commit, post-merge and post-checkout hooks that run an ingest (existing hooks
    keep their lines; the ingest runs in the background and never fails the git command)."""
    result = app.session.install_hooks()
    emit({"hooks": result}, as_json, lambda: render.hooks(result))


@hooks.command("uninstall")
@json_option
@click.pass_obj
def hooks_uninstall(app: App, as_json: bool) -> None:
    """Remove the lines `hooks install` added, and only those."""
    result = app.session.uninstall_hooks()
    emit({"hooks": result}, as_json, lambda: render.hooks(result))


@click.command()
@click.option(
    "--watch",
    "watching",
    is_flag=True,
    help="Also ingest whenever the workspace's files change (as `raytsystem watch`).",
)
@debounce_options
@click.pass_obj
def mcp(app: App, watching: bool, debounce: int, max_wait: int) -> None:
    """Run a read-only MCP server on stdio (tools: query, search, show, bundle, verify)."""
    from .mcp_server import run_stdio

    app.freshness = "track"  # one process, many answers: follow the changes
    run_stdio(app.session, watch=watching, debounce_ms=debounce, max_wait_ms=max_wait)


@click.command()
@click.option("--generation", "-g", help="Draw this generation (default: the current one).")
@click.option("--max-nodes", type=click.IntRange(100, 200_000), default=20_000, show_default=True)
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("universe.html"),
    show_default=True,
)
@json_option
@click.pass_obj
def universe(app: App, generation: str | None, max_nodes: int, out: Path, as_json: bool) -> None:
    """Write the evidence graph of a generation as one self-contained HTML page."""
    from .universe.page import render_page

    data = app.session.graph(generation, max_nodes)
    target = out if out.is_absolute() else app.cwd / out
    target.write_text(render_page(data), encoding="utf-8")
    result = {
        "path": str(target),
        "generation": data["generation"],
        "counts": data["counts"],
        "truncated": data["truncated"],
    }
    emit(result, as_json, lambda: render.universe(result, max_nodes))


@click.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Loopback only: other binds are refused."
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.pass_obj
def serve(app: App, host: str, port: int) -> None:
    """Serve the Universe page and its JSON API on 127.0.0.1 until Ctrl-C."""
    import ipaddress

    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise UsageError(
            f"serve binds to loopback only, not {host!r}: the API is unauthenticated",
            code="bind_refused",
        )
    from .universe.server import serve as run

    app.freshness = "track"  # one process, many answers: follow the changes
    run(app.session, host, port)
