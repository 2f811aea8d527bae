"""The `raytsystem` command line: parse arguments, call one library function, print, exit.

Only this module reads the environment, prints or exits. Every failure a user can cause is a
`RaytError` and becomes one line on stderr (`error[code]: message`), or with `--json` the
envelope `{"error": {"code": ..., "message": ...}}` on stdout, and its documented exit status.
Heavy modules are imported inside the commands that need them, so `query` starts fast.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from . import __version__, cli_servers
from . import cli_render as render
from .cli_common import App, emit, json_option, lock_timeout_option
from .errors import Interrupted, RaytError, UsageError, chain, reportable

if TYPE_CHECKING:
    pass

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--workspace",
    "-w",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="RAYTSYSTEM_WORKSPACE",
    help="Workspace folder (default: the nearest folder with a raytsystem.toml).",
)
@click.option(
    "--database-url",
    envvar="RAYTSYSTEM_DATABASE_URL",
    help="Ledger database URL (default: sqlite:///<workspace>/.raytsystem/ledger.sqlite3).",
)
@click.version_option(__version__, prog_name="raytsystem")
@click.pass_context
def cli(ctx: click.Context, workspace: Path | None, database_url: str | None) -> None:
    """raytsystem: a local-first knowledge base whose answers are proven by exact source bytes."""
    ctx.obj = App(workspace, database_url)


@cli.command()
@click.argument("folder", required=False, type=click.Path(file_okay=False, path_type=Path))
@json_option
@click.pass_obj
def init(app: App, folder: Path | None, as_json: bool) -> None:
    """Make FOLDER (default: the current folder) a workspace; safe to run again."""
    from .api import Session

    target = folder or app.workspace_arg or app.cwd
    session, created = Session.init(target, database_url=app.database_url, cwd=app.cwd)
    app._session = session
    workspace = str(session.ws.root)
    emit(
        {"workspace": workspace, "created": created},
        as_json,
        lambda: render.init(workspace, created),
    )


@cli.command()
@click.argument("paths", nargs=-1)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(1, 64),
    help="Processes that parse files, the writer included (default: cores, at most 8).",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Make the new generation even if it drops every source (no file left selected).",
)
@lock_timeout_option
@json_option
@click.pass_obj
def ingest(
    app: App,
    paths: tuple[str, ...],
    jobs: int | None,
    allow_empty: bool,
    lock_timeout: float,
    as_json: bool,
) -> None:
    """Ingest the workspace (or only PATHS) and make a new generation if anything changed."""
    from .progress import progress_for

    session = app.session
    with progress_for("ingest", enabled=not as_json) as progress:
        report = session.ingest(
            paths,
            jobs=jobs,
            lock_timeout=lock_timeout,
            progress=progress,
            allow_empty=allow_empty,
            walk_ahead=True,  # one command per process, no thread started yet
        )
    emit(report.to_json(), as_json, lambda: render.ingest(report))


@cli.command()
@click.argument("paths", nargs=-1)
@json_option
@click.pass_obj
def scan(app: App, paths: tuple[str, ...], as_json: bool) -> None:
    """Check the workspace's files (or PATHS) for secrets and personal data as ingest would,
    storing nothing. Exit 3 if a secret (or quarantined personal data) is found."""
    report = app.session.scan(paths)
    emit(report.to_json(), as_json, lambda: render.scan(report))
    if report.found:
        raise SystemExit(3)


@cli.command()
@click.argument("target", metavar="BLOB|PATH")
@click.option("--reason", required=True, help="Why the bytes must go (kept in the tombstone).")
@lock_timeout_option
@json_option
@click.pass_obj
def purge(app: App, target: str, reason: str, lock_timeout: float, as_json: bool) -> None:
    """Remove a raw blob's bytes (or every revision's of the source at PATH) and its
    normalized texts' from the store, packs included, recording a tombstone for each."""
    result = app.session.purge(target, reason, lock_timeout=lock_timeout)
    emit(result, as_json, lambda: render.purge(result))


@cli.command()
@json_option
@click.pass_obj
def status(app: App, as_json: bool) -> None:
    """Show the workspace, the current generation and the last ingest."""
    result = app.session.status()
    emit(result, as_json, lambda: render.status(result))


@cli.command()
@click.argument("path")
@json_option
@click.pass_obj
def history(app: App, path: str, as_json: bool) -> None:
    """List the revisions of the source at PATH and the generations each was active in."""
    result = app.session.history(path)
    emit(result, as_json, lambda: render.history(result))


@cli.command()
@click.argument("object_id")
@json_option
@click.pass_obj
def show(app: App, object_id: str, as_json: bool) -> None:
    """Show any object (source, revision, normalization, segment, claim, evidence, generation) as JSON."""
    click.echo(json.dumps(app.session.show(object_id), ensure_ascii=False, indent=2))


@cli.command()
@json_option
@click.pass_obj
def generations(app: App, as_json: bool) -> None:
    """List the generations, oldest first; the current one is marked."""
    result = app.session.generations()
    emit(result, as_json, lambda: render.generations(result))


@cli.command()
@click.argument("from_generation")
@click.argument("to_generation")
@json_option
@click.pass_obj
def diff(app: App, from_generation: str, to_generation: str, as_json: bool) -> None:
    """Claims added, removed and changed in status between two generations (number or hash)."""
    result = app.session.diff(from_generation, to_generation)
    emit(result, as_json, lambda: render.diff(result))


@cli.command()
@click.argument("text")
@click.option(
    "--limit", "-n", type=int, default=5, show_default=True, help="Most claims to cite (1-50)."
)
@click.option(
    "--per-source",
    type=int,
    default=2,
    show_default=True,
    help="Claims of one source cited before other sources' (1-50); more only if room is left.",
)
@click.option(
    "--generation",
    "-g",
    help="Answer from this generation (number or hash) while its index exists.",
)
@click.option(
    "--expect-generation", help="Fail closed unless the current generation has this hash."
)
@json_option
@click.pass_obj
def query(
    app: App,
    text: str,
    limit: int,
    per_source: int,
    generation: str | None,
    expect_generation: str | None,
    as_json: bool,
) -> None:
    """Answer TEXT from verified, confirmed claims with exact citations, or report a gap."""
    answer = app.session.query(
        text,
        limit=limit,
        per_source=per_source,
        generation=generation,
        expect_generation=expect_generation,
    )
    emit(answer.to_json(), as_json, lambda: render.query(answer))


@cli.command()
@click.argument("text")
@click.option("--limit", "-n", type=int, default=10, show_default=True, help="Most hits (1-50).")
@click.option("--claims", is_flag=True, help="Search confirmed claims instead of segments.")
@click.option("--generation", "-g", help="Search this generation (number or hash).")
@json_option
@click.pass_obj
def search(
    app: App, text: str, limit: int, claims: bool, generation: str | None, as_json: bool
) -> None:
    """Browse the blocks (or claims) that contain TEXT's words; not a verified answer."""
    result = app.session.search(text, limit=limit, claims=claims, generation=generation)
    emit(result, as_json, lambda: render.search(result))


@cli.command()
@click.option("--generation", "-g", help="Review this generation (default: the current one).")
@lock_timeout_option
@json_option
@click.pass_obj
def review(app: App, generation: str | None, lock_timeout: float, as_json: bool) -> None:
    """Audit a generation and write ops/reviews/<n>-<hash>.json and .md; changes no knowledge."""
    result = app.session.review(generation, lock_timeout=lock_timeout)
    emit(result, as_json, lambda: render.review(result))


@cli.command()
@json_option
@click.pass_obj
def verify(app: App, as_json: bool) -> None:
    """Full integrity check: re-hash every blob, re-derive every ID, chain and index. Exit 3 if wrong."""
    from .progress import progress_for

    session = app.session
    with progress_for("verify", enabled=not as_json) as progress:
        report = session.verify(progress=progress)
    emit(report.to_json(), as_json, lambda: render.verify(report))
    if not report.ok:
        raise SystemExit(3)


@cli.command()
@click.argument("pack")
@lock_timeout_option
@json_option
@click.pass_obj
def unpack(app: App, pack: str, lock_timeout: float, as_json: bool) -> None:
    """Store each intact blob of PACK on its own and remove the pack (a damaged pack's repair)."""
    result = app.session.unpack(pack, lock_timeout=lock_timeout)
    emit(result, as_json, lambda: render.unpack(result))


@cli.command("eval")
@click.argument("dataset", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--k",
    type=click.IntRange(1, 50),
    help="Cut-off for recall@k and MRR@k (default: the dataset's, else 10).",
)
@click.option(
    "--min-recall",
    type=click.FloatRange(0.0, 1.0),
    help="Exit 3 when recall@k is below this (0 to 1).",
)
@click.option("--generation", "-g", help="Evaluate against this generation.")
@json_option
@click.pass_obj
def eval_command(
    app: App,
    dataset: Path,
    k: int | None,
    min_recall: float | None,
    generation: str | None,
    as_json: bool,
) -> None:
    """Measure retrieval quality on DATASET.json beside plain BM25: recall@k, MRR, evidence
    recall, gap rates, citation precision, contamination."""
    result = app.session.evaluate(dataset, k=k, generation=generation)
    recall = result["metrics"]["recall_at_k"] or 0.0
    failed = min_recall is not None and recall < min_recall
    result["min_recall"] = min_recall
    result["passed"] = not failed
    emit(result, as_json, lambda: render.evaluation(result))
    if failed:
        raise SystemExit(3)


@cli.command()
@click.argument("task")
@click.option(
    "--max-tokens",
    type=int,
    default=4000,
    show_default=True,
    help="Budget (estimate: ceil(UTF-8 bytes / 4)).",
)
@click.option("--generation", "-g", help="Bundle from this generation.")
@json_option
@click.pass_obj
def bundle(app: App, task: str, max_tokens: int, generation: str | None, as_json: bool) -> None:
    """A deterministic, verified context bundle for an agent about to do TASK."""
    result = app.session.bundle(task, max_tokens=max_tokens, generation=generation)
    emit(result, as_json, lambda: render.bundle(result))


@cli.group()
def index() -> None:
    """Manage the per-generation search indexes (derived files under .raytsystem/indexes)."""


@index.command("rebuild")
@click.argument("generation", required=False)
@lock_timeout_option
@json_option
@click.pass_obj
def index_rebuild(app: App, generation: str | None, lock_timeout: float, as_json: bool) -> None:
    """Rebuild the index of GENERATION (default: the current one) from the ledger alone."""
    from .progress import progress_for

    session = app.session
    with progress_for("index rebuild", enabled=not as_json) as progress:
        result = session.rebuild_index(generation, lock_timeout=lock_timeout, progress=progress)
    emit(result, as_json, lambda: render.rebuilt_index(result))


for _command in (
    cli_servers.watch,
    cli_servers.hooks,
    cli_servers.mcp,
    cli_servers.universe,
    cli_servers.serve,
):
    cli.add_command(_command)


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv


def main(argv: list[str] | None = None) -> None:
    """Run one command. `argv=None`: the process's own command line, and the process ends with
    it (`_end_process`); with `argv` (tests, embedders) it raises SystemExit as usual."""
    if argv is None:  # the process's own command: no SQLite connection exists yet
        from .api import prepare_process

        prepare_process()
        try:
            _main(sys.argv[1:])
        except SystemExit as exc:
            _end_process(exc)
        _end_process(SystemExit(0))
    _main(argv)


def _end_process(exc: SystemExit) -> NoReturn:
    """End the process with `exc`'s status as `sys.exit` would, minus the interpreter's
    teardown: exit handlers run and the output is flushed, then the process exits at once.

    Every command has closed what it opened by then (ledger and index connections, worker
    processes, threads: context managers). What the teardown would still do is free every
    module and object one at a time, to give back memory the system takes back at exit
    anyway, a noticeable share of a short command's wall time (ADR 0033)."""
    code = exc.code
    if code is None or isinstance(code, int):
        status = code or 0
    else:  # sys.exit("message"), as Python reports it
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    try:
        if sys.stdout is not None:  # None: the process was started with stdout closed
            sys.stdout.flush()
    except BrokenPipeError:
        pass  # the reader left after the command's last write: nothing more to say
    except (OSError, ValueError):
        status = status or 120  # what Python exits with when stdout cannot be flushed
    with contextlib.suppress(OSError, ValueError):
        if sys.stderr is not None:
            sys.stderr.flush()
    os._exit(status)


def _placed_option_hint(exc: click.NoSuchOption) -> str:
    """click's message, and where the option goes if it is one of the group's (global)
    options given after the command."""
    message = exc.format_message()
    name = exc.option_name
    if not any(name in (*p.opts, *p.secondary_opts) for p in cli.params):
        return message
    command = exc.ctx.command_path.split(" ", 1)[-1] if exc.ctx is not None else "COMMAND"
    return (
        f"{message.rstrip('.')}. {name} is a global option: it goes before the command, as in "
        f"`raytsystem {name} ... {command}`"
    )


def _main(args: list[str]) -> None:
    as_json = _wants_json(args)
    try:
        cli.main(args=args, prog_name="raytsystem", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        _fail(Interrupted("interrupted"), as_json, Interrupted.exit_status)
    except click.NoSuchOption as exc:
        _fail(UsageError(_placed_option_hint(exc)), as_json, exc.exit_code)
    except click.ClickException as exc:
        _fail(UsageError(exc.format_message()), as_json, exc.exit_code)
    except KeyboardInterrupt:
        _fail(Interrupted("interrupted"), as_json, Interrupted.exit_status)
    # (A reader that leaves mid-command never gets here: click itself ends the command, with
    # status 1 and its streams quieted.)
    except Exception as exc:
        if during_interrupt(exc):
            _fail(Interrupted("interrupted"), as_json, Interrupted.exit_status)
        # Ours, or the disk or the memory running out, whatever error it surfaced as on the way.
        if (error := reportable(exc)) is not None:
            _fail(error, as_json, error.exit_status)
        # A bug: one line, the traceback only when asked for.
        if os.environ.get("RAYTSYSTEM_DEBUG"):
            raise
        _fail(
            RaytError(
                f"internal error ({type(exc).__name__}: {exc}); rerun with RAYTSYSTEM_DEBUG=1 "
                "for the traceback and report it",
                code="internal_error",
            ),
            as_json,
            1,
        )
    sys.exit(0)


def during_interrupt(exc: BaseException) -> bool:
    """Whether `exc` was raised while a Ctrl-C was being handled (cleanup code that failed
    because the interrupt had cut a statement short, say): the command was interrupted, and
    that is what to report, not the cleanup's error."""
    return any(isinstance(e, KeyboardInterrupt) for e in chain(exc))


def _fail(exc: RaytError, as_json: bool, status: int) -> None:
    if as_json:
        click.echo(json.dumps(exc.to_json(), ensure_ascii=False, sort_keys=True))
    else:
        click.echo(f"error[{exc.code}]: {exc.message}", err=True)
    sys.exit(status)
