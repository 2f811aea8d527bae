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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from . import __version__
from .errors import Interrupted, RaytError, UsageError, chain, reportable

if TYPE_CHECKING:
    from .storage.blobs import DiskBlobStore
    from .storage.db import Ledger
    from .workspace import Workspace

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class App:
    workspace_arg: Path | None
    database_url: str | None
    cwd: Path = field(default_factory=Path.cwd)
    _ws: Workspace | None = None
    _ledger: Ledger | None = None

    @property
    def ws(self) -> Workspace:
        if self._ws is None:
            from .workspace import Workspace

            self._ws = (
                Workspace.open(self.workspace_arg)
                if self.workspace_arg
                else Workspace.find(self.cwd)
            )
        return self._ws

    def ledger(self, *, create: bool = False) -> Ledger:
        if self._ledger is None:
            from .storage.db import open_ledger

            url = self.database_url or self.ws.default_database_url
            if url == self.ws.default_database_url:
                self.ws.state_dir.mkdir(exist_ok=True)
            self._ledger = open_ledger(url, create=create)
        return self._ledger

    @property
    def blobs(self) -> DiskBlobStore:
        from .storage.blobs import DiskBlobStore

        return DiskBlobStore(self.ws.raw_dir)


def emit(data: Any, as_json: bool, human: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=False))
    else:
        human(data)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")(f)


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
    from .workspace import init_workspace

    target = folder or app.workspace_arg or app.cwd
    target.mkdir(parents=True, exist_ok=True)
    ws, created = init_workspace(target)
    app._ws = ws
    app.ledger(create=True)
    result = {"workspace": str(ws.root), "created": created}

    def human(r: dict[str, Any]) -> None:
        click.echo(f"workspace {r['workspace']}")
        for item in r["created"] or ["(nothing to create: already a workspace)"]:
            click.echo(f"  + {item}" if r["created"] else f"  {item}")
        click.echo("next: add Markdown under knowledge/ or docs/, then `raytsystem ingest`")

    emit(result, as_json, human)


@cli.command()
@click.argument("paths", nargs=-1)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(1, 64),
    help="Processes that parse files, the writer included (default: cores, at most 8).",
)
@click.option(
    "--lock-timeout",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds to wait for another writer.",
)
@json_option
@click.pass_obj
def ingest(
    app: App, paths: tuple[str, ...], jobs: int | None, lock_timeout: float, as_json: bool
) -> None:
    """Ingest the workspace (or only PATHS) and make a new generation if anything changed."""
    from .pipeline.ingest import ingest as run
    from .progress import progress_for

    ws = app.ws
    scope = [ws.rel_from_cli(p, app.cwd) for p in paths]
    with progress_for("ingest", enabled=not as_json) as progress:
        report = run(
            ws,
            app.ledger(create=True),
            [s for s in scope],
            jobs=jobs,
            lock_timeout=lock_timeout,
            progress=progress,
        )

    def human(r: dict[str, Any]) -> None:
        c = r["counts"]
        gen = r["generation"]
        if r["created"]:
            click.echo(f"generation {gen['number']} {gen['hash'][:16]} created")
        elif gen:
            click.echo(f"no change: generation {gen['number']} {gen['hash'][:16]} stays current")
        else:
            click.echo("no change: nothing to ingest yet")
        click.echo(
            f"  scanned {c['scanned']} files: {c['unchanged']} unchanged, {c['new_revisions']} new "
            f"revisions ({c['new_sources']} new sources), {c['removed_sources']} removed"
        )
        click.echo(
            f"  claims +{c['claims_added']} -{c['claims_removed']} ~{c['claims_changed']} "
            f"(added, removed, new status or evidence)  ({r['seconds']:.2f}s)"
        )
        for f in r["findings"]:
            click.echo(f"  {f['severity']}[{f['code']}] {f['subject']}: {f['message']}")

    emit(report.to_json(), as_json, human)


@cli.command()
@json_option
@click.pass_obj
def status(app: App, as_json: bool) -> None:
    """Show the workspace, the current generation and the last ingest."""
    from .pipeline.inspect import status as run
    from .storage.db import _redact

    ledger = app.ledger(create=True)
    with ledger.reading() as conn:
        result = {
            "workspace": str(app.ws.root),
            "database": _redact(ledger.url),
            "id_scheme": ledger.id_scheme,
            **run(conn),
        }

    def human(r: dict[str, Any]) -> None:
        click.echo(f"workspace  {r['workspace']}")
        click.echo(f"database   {r['database']}")
        if r["id_scheme"] is not None:
            click.echo(f"ID scheme  {r['id_scheme']} (ADR 0030)")
        g = r["generation"]
        if g:
            click.echo(
                f"generation {g['number']} {g['hash'][:16]} ({g['created_at']}): "
                f"{g['active_sources']} sources, {g['active_claims']} claims (any status)"
            )
        else:
            click.echo("generation none yet: run `raytsystem ingest`")
        c = r["ledger_counts"]
        click.echo(
            f"ledger     {c['sources']} sources, {c['revisions']} revisions, "
            f"{c['normalizations']} normalizations, {c['claims']} claims"
        )
        li = r["last_ingest"]
        if li:
            click.echo(
                f"last ingest {li['finished_at']}: "
                f"{'new generation' if li['created_generation'] else 'no change'}, {li['findings']} findings"
            )

    emit(result, as_json, human)


@cli.command()
@click.argument("path")
@json_option
@click.pass_obj
def history(app: App, path: str, as_json: bool) -> None:
    """List the revisions of the source at PATH and the generations each was active in."""
    from .pipeline.inspect import history as run

    rel = app.ws.rel_from_cli(path, app.cwd)
    with app.ledger().reading() as conn:
        result = run(conn, rel)

    def human(r: dict[str, Any]) -> None:
        s = r["source"]
        click.echo(f"{s['path']}  {s['id']}")
        for rev in r["revisions"]:
            spans = (
                ", ".join(
                    f"{x['from']}–{x['to'] - 1}" if x["to"] else f"{x['from']}–now"
                    for x in rev["active_in_generations"]
                )
                or "never active"
            )
            mark = "*" if rev["id"] == r["current_revision"] else " "
            click.echo(
                f" {mark} {rev['id']}  {rev['first_seen_at']}  {rev['size']} bytes  generations {spans}"
            )
        if r["removed_in_generation"]:
            click.echo(f"   removed in generation {r['removed_in_generation']} (revisions kept)")

    emit(result, as_json, human)


@cli.command()
@click.argument("object_id")
@json_option
@click.pass_obj
def show(app: App, object_id: str, as_json: bool) -> None:
    """Show any object (source, revision, normalization, segment, claim, evidence, generation) as JSON."""
    from .pipeline.inspect import show as run

    with app.ledger().reading() as conn:
        result = run(conn, app.blobs, object_id)
    click.echo(json.dumps(result, ensure_ascii=False, indent=2))


@cli.command()
@json_option
@click.pass_obj
def generations(app: App, as_json: bool) -> None:
    """List the generations, oldest first; the current one is marked."""
    from .pipeline.inspect import list_generations

    with app.ledger().reading() as conn:
        result = list_generations(conn)

    def human(rows: list[dict[str, Any]]) -> None:
        if not rows:
            click.echo("no generations yet: run `raytsystem ingest`")
        for g in rows:
            mark = "*" if g["current"] else " "
            s = g["summary"]
            click.echo(
                f"{mark} {g['number']:>4}  {g['hash'][:16]}  {g['created_at']}  {g['sources']} sources  "
                f"{g['claims']} claims  (+{s.get('claims_added', 0)} -{s.get('claims_removed', 0)} "
                f"~{s.get('claims_changed', 0)})"
            )

    emit(result, as_json, human)


@cli.command()
@click.argument("from_generation")
@click.argument("to_generation")
@json_option
@click.pass_obj
def diff(app: App, from_generation: str, to_generation: str, as_json: bool) -> None:
    """Claims added, removed and changed in status between two generations (number or hash)."""
    from .pipeline.inspect import diff as run

    with app.ledger().reading() as conn:
        result = run(conn, from_generation, to_generation)

    def human(r: dict[str, Any]) -> None:
        click.echo(f"generation {r['from']['number']} -> {r['to']['number']}")
        for c in r["added"]:
            click.echo(f"+ {c['id']}  {c['source_path']}: {c['statement']}")
        for c in r["removed"]:
            click.echo(f"- {c['id']}  {c['source_path']}: {c['statement']}")
        for c in r["status_changed"]:
            click.echo(f"~ {c['id']}  {c['from_status']} -> {c['to_status']}: {c['statement']}")
        if r["evidence_changed"]:
            click.echo(f"  ({len(r['evidence_changed'])} claims kept with new evidence)")
        if not (r["added"] or r["removed"] or r["status_changed"]):
            click.echo("no claim added, removed or changed in status")

    emit(result, as_json, human)


def _reader(app: App) -> Any:
    from .storage.sql import open_reader

    url = app.database_url or app.ws.default_database_url
    return open_reader(url)


@cli.command()
@click.argument("text")
@click.option(
    "--limit", "-n", type=int, default=5, show_default=True, help="Most claims to cite (1-50)."
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
    generation: str | None,
    expect_generation: str | None,
    as_json: bool,
) -> None:
    """Answer TEXT from verified, confirmed claims with exact citations, or report a gap."""
    from .pipeline.query import query as run

    reader = _reader(app)
    try:
        result = run(
            reader,
            app.blobs,
            app.ws.index_dir,
            text,
            limit=limit,
            generation=generation,
            expect_generation=expect_generation,
        )
    finally:
        reader.close()

    def human(r: dict[str, Any]) -> None:
        g = r["generation"]
        if r["status"] == "gap":
            click.echo(
                f"gap: no confirmed claim answers this (generation {g['number']} {g['hash'][:16]})"
            )
            return
        click.echo(r["answer"])
        click.echo()
        for c in r["citations"]:
            for e in c["evidence"]:
                where = f"{e['source_path']}:{e['lines']['start']}"
                if e["lines"]["end"] != e["lines"]["start"]:
                    where += f"-{e['lines']['end']}"
                click.echo(
                    f"[{c['id']}] {where}  ({c['claim']['authority']}, {e['role']})  sha256 {e['cited_excerpt_sha256'][:16]}"
                )
        click.echo(f"verified against generation {g['number']} {g['hash'][:16]}")

    emit(result, as_json, human)


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
    from .pipeline.search import search as run

    reader = _reader(app)
    try:
        result = run(
            reader,
            app.blobs,
            app.ws.index_dir,
            text,
            limit=limit,
            kind="claim" if claims else "segment",
            generation=generation,
        )
    finally:
        reader.close()

    def human(r: dict[str, Any]) -> None:
        if not r["hits"]:
            click.echo("no match")
        for h in r["hits"]:
            where = h["source_path"]
            if h.get("lines"):
                where += f":{h['lines']['start']}"
            heading = " > ".join(h["heading_path"])
            click.echo(f"{where}  [{h['kind']}]  {heading}")
            body = " ".join(h["text"].split())
            click.echo(f"    {body[:200]}{'…' if len(body) > 200 else ''}")

    emit(result, as_json, human)


def lock_timeout_option(f: F) -> F:
    return click.option(
        "--lock-timeout",
        type=float,
        default=30.0,
        show_default=True,
        help="Seconds to wait for another writer.",
    )(f)


@cli.command()
@click.option("--generation", "-g", help="Review this generation (default: the current one).")
@lock_timeout_option
@json_option
@click.pass_obj
def review(app: App, generation: str | None, lock_timeout: float, as_json: bool) -> None:
    """Audit a generation and write ops/reviews/<n>-<hash>.json and .md; changes no knowledge."""
    from .pipeline import state
    from .pipeline.review import review as run
    from .storage.lock import writer_lock
    from .workspace import REVIEWS_DIR

    ledger = app.ledger()
    with writer_lock(app.ws.state_dir, ledger, lock_timeout), ledger.transaction() as conn:
        gen = state.generation_or_head(conn, generation)
        result = run(conn, app.blobs, gen, app.ws.root / REVIEWS_DIR)

    def human(r: dict[str, Any]) -> None:
        g, c = r["generation"], r["counts"]
        click.echo(
            f"review of generation {g['number']} {g['hash'][:16]}: "
            f"{c['error']} error(s), {c['warning']} warning(s), {c['info']} info"
        )
        for f in r["findings"]:
            click.echo(f"  {f['severity']}[{f['code']}] {f['message']}")
            click.echo(f"      {', '.join(f['subjects'])}")
        click.echo("report: " + ", ".join(r["files"]))

    emit(result, as_json, human)


@cli.command()
@json_option
@click.pass_obj
def verify(app: App, as_json: bool) -> None:
    """Full integrity check: re-hash every blob, re-derive every ID, chain and index. Exit 3 if wrong."""
    from .pipeline.verify import verify as run
    from .progress import progress_for

    ledger = app.ledger()
    with progress_for("verify", enabled=not as_json) as progress, ledger.reading() as conn:
        report = run(conn, app.blobs, app.ws.index_dir, progress=progress)
    result = report.to_json()

    def human(r: dict[str, Any]) -> None:
        c, t = r["counts"], r["throughput"]
        click.echo(
            f"{'ok' if r['ok'] else 'PROBLEMS FOUND'}: {c.get('blobs', 0)} blobs "
            f"({t['blob_bytes'] / 1e6:.1f} MB at {t['mb_per_s'] or 0:.0f} MB/s), "
            f"{c.get('claims', 0)} claims, {c.get('evidence', 0)} evidence, "
            f"{c.get('generations', 0)} generations, {c.get('indexes', 0)} indexes in {r['seconds']:.2f}s"
        )
        for f in r["findings"]:
            click.echo(f"  {f['severity']}[{f['code']}] {f['subject']}: {f['message']}")

    emit(result, as_json, human)
    if not report.ok:
        raise SystemExit(3)


@cli.command()
@click.argument("pack")
@lock_timeout_option
@json_option
@click.pass_obj
def unpack(app: App, pack: str, lock_timeout: float, as_json: bool) -> None:
    """Store each intact blob of PACK on its own and remove the pack (a damaged pack's repair)."""
    from .storage.lock import writer_lock

    name = Path(pack).name  # as verify names it, or a path to it: the store checks the form
    ledger = app.ledger()
    with writer_lock(app.ws.state_dir, ledger, lock_timeout):
        kept, damaged = app.blobs.unpack(name)
    result = {"pack": name, "kept": len(kept), "damaged": damaged}

    def human(r: dict[str, Any]) -> None:
        click.echo(f"unpacked {r['pack']}: {r['kept']} blob(s) kept on their own")
        for address in r["damaged"]:
            click.echo(f"  damaged, not kept: {address}")

    emit(result, as_json, human)


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
    from .pipeline.evaluate import evaluate, load_dataset

    data = load_dataset(dataset if dataset.is_absolute() else app.cwd / dataset)
    reader = _reader(app)
    try:
        result = evaluate(reader, app.blobs, app.ws.index_dir, data, k=k, generation=generation)
    finally:
        reader.close()
    m = result["metrics"]
    failed = min_recall is not None and (m["recall_at_k"] or 0.0) < min_recall
    result["min_recall"] = min_recall
    result["passed"] = not failed

    def human(r: dict[str, Any]) -> None:
        kk, ee = r["k"], r["evidence_k"]
        b = r["baseline"]["metrics"]
        click.echo(
            f"{r['dataset']}: {m['cases']} cases ({m['offtopic_cases']} off-topic), "
            f"generation {r['generation']['number']}"
        )
        click.echo(
            f"  {'':<24} {'raytsystem':>10} {'BM25':>8} {'ratio':>7}   "
            f"(BM25: {b['sources']} sources, {b['sentences']} sentences)"
        )
        rows = [
            (f"recall@{kk} (sources)", "recall_at_k"),
            (f"MRR@{kk}", "mrr_at_k"),
            ("top-1", "top1"),
            (f"evidence recall@{ee}", "evidence_recall_at_e"),
            (f"evidence hit@{ee}", "evidence_hit_at_e"),
            (f"word precision@{ee}", "word_precision_at_e"),
            ("gap rate, off-topic", "gap_rate_offtopic"),
            ("gap rate, answerable", "gap_rate_answerable"),
            (f"sources in {ee} citations", "sources_in_e_citations"),
            (f"claim recall@{kk}", "claim_recall_at_k"),
            ("citation precision", "citation_precision"),
            ("contamination", "contamination"),
            ("must contain", "must_contain"),
            ("must not contain", "must_not_contain"),
            ("repeatable", "repeatable"),
        ]
        for name, key in rows:
            value = m.get(key)
            if value is None:
                continue
            base = b.get(key)
            if base is None:
                click.echo(f"  {name:<24} {value:>10.4f}")
                continue
            ratio = f"{value / base:>6.2f}x" if base else f"{'-':>7}"
            click.echo(f"  {name:<24} {value:>10.4f} {base:>8.4f} {ratio}")
        click.echo(
            f"  {'latency p50 / p95':<24} {m['latency_ms']['p50']:.1f} / {m['latency_ms']['p95']:.1f} ms"
        )
        if failed:
            click.echo(
                f"FAILED: recall@{kk} {m['recall_at_k']:.4f} is below --min-recall {min_recall}"
            )

    emit(result, as_json, human)
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
    from .pipeline.bundle import bundle as run

    reader = _reader(app)
    try:
        result = run(
            reader, app.blobs, app.ws.index_dir, task, max_tokens=max_tokens, generation=generation
        )
    finally:
        reader.close()

    def human(r: dict[str, Any]) -> None:
        b = r["budget"]
        click.echo(
            f"{len(r['items'])} items, ~{b['estimated_tokens']} of {b['max_tokens']} tokens "
            f"(generation {r['generation']['number']}), bundle {r['bundle_sha256'][:16]}"
        )
        for item in r["items"]:
            cut = " (shortened)" if item["shortened"] else ""
            click.echo(
                f"{item['rank']:>3}. {item['source_path']}:{item['lines']['start']}  [{item['kind']}]{cut}  {item['why']}"
            )
            click.echo(f"     {' '.join(item['text'].split())[:160]}")
        if r["must_read"]:
            click.echo("read in full before acting: " + ", ".join(r["must_read"]))
        if r["omitted"]:
            click.echo(f"{len(r['omitted'])} more items did not fit the budget")

    emit(result, as_json, human)


@cli.command()
@click.pass_obj
def mcp(app: App) -> None:
    """Run a read-only MCP server on stdio (tools: query, search, show, bundle, verify)."""
    from .mcp_server import run_stdio

    run_stdio(app.ws, app.database_url or app.ws.default_database_url)


def _universe_api(app: App) -> Any:
    from .universe.api import UniverseApi

    return UniverseApi(
        ledger=app.ledger(),
        blobs=app.blobs,
        index_dir=app.ws.index_dir,
        database_url=app.database_url or app.ws.default_database_url,
    )


@cli.command()
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

    data = _universe_api(app).graph(generation, max_nodes)
    target = out if out.is_absolute() else app.cwd / out
    target.write_text(render_page(data), encoding="utf-8")
    result = {
        "path": str(target),
        "generation": data["generation"],
        "counts": data["counts"],
        "truncated": data["truncated"],
    }

    def human(r: dict[str, Any]) -> None:
        c = r["counts"]
        click.echo(
            f"wrote {r['path']}: {c['nodes']} nodes, {c['edges']} edges (generation {r['generation']['number']})"
        )
        if r["truncated"]:
            click.echo(
                f"  {r['truncated']['claims_left_out']} claims left out to stay under {max_nodes} nodes"
            )

    emit(result, as_json, human)


@cli.command()
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

    run(_universe_api(app), host, port)


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
    from .pipeline import state
    from .pipeline.indexing import rebuild
    from .progress import progress_for
    from .storage.lock import writer_lock

    ledger = app.ledger()
    with (
        writer_lock(app.ws.state_dir, ledger, lock_timeout),
        ledger.reading() as conn,
        progress_for("index rebuild", enabled=not as_json) as progress,
    ):
        gen = state.generation_or_head(conn, generation)
        result = rebuild(app.ws.index_dir, conn, app.blobs, gen, progress)

    def human(r: dict[str, Any]) -> None:
        g = r["generation"]
        click.echo(
            f"index of generation {g['number']} {g['hash'][:16]} rebuilt: {r['documents']} documents"
        )
        click.echo(f"  rows digest {r['rows_digest']}")
        if r["previous_rows_digest"]:
            same = "same as" if r["same_as_previous"] else "DIFFERENT from"
            click.echo(f"  {same} the index it replaced")

    emit(result, as_json, human)


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv


def main(argv: list[str] | None = None) -> None:
    """Run one command. `argv=None`: the process's own command line, and the process ends with
    it (`_end_process`); with `argv` (tests, embedders) it raises SystemExit as usual."""
    if argv is None:  # the process's own command: no SQLite connection exists yet
        from .storage.sqlite_tuning import tune_process

        tune_process()
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
    anyway: a sixth of a query's wall time, and 0.2 s after a large ingest (ADR 0019)."""
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


def _main(args: list[str]) -> None:
    as_json = _wants_json(args)
    try:
        cli.main(args=args, prog_name="raytsystem", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        _fail(Interrupted("interrupted"), as_json, Interrupted.exit_status)
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
