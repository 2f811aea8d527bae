"""The whole run: every measurement of `steps`, in order, on one fresh temporary workspace.

1. `raytsystem init` a new folder and fill it: the synthetic corpus (`corpus.generate`) or a
   copy of `--source DIR`.
2. Baselines in this process: markdown-it-py parsing every Markdown file (texts already read
   and decoded, so only `parser.parse` is timed; once more right after the cold ingest, and
   then with markdown-it-py's own default configuration for comparison, ADR 0028),
   BLAKE3 hashing, and process start (`raytsystem --help`).
3. Through the CLI as subprocesses, the way people use it: cold `ingest --json` (wall time,
   peak memory), no-change re-ingest, one-file-change re-ingest, `query --json`, `verify --json`.
4. In process through the library: `pipeline.query.query` on the same workspace, and then
   the freshness check's cost (`freshness.measure`; it edits one file, last).

Every subprocess gets a clean environment (no `RAYTSYSTEM_*` variables) and `--workspace`.
Nothing here judges the figures: `report` holds the targets.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import corpus, freshness, machine, queries
from .cli import Cli
from .measure import run_process
from .steps import (
    blake3_baseline,
    cold_ingest,
    disk_usage,
    noop_ingest,
    one_change_ingest,
    parse_baseline,
    process_start,
    query_cli,
    query_in_process,
    verify,
)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
SKIP_DIRS = frozenset({".git", ".raytsystem", "_raw", "__pycache__", ".venv"})


@dataclass(frozen=True)
class Options:
    """What to run; `__main__` builds it from the command line."""

    files: int = 1000
    seed: int = 1
    target_mb: float | None = None
    source: Path | None = None
    queries: int = 200
    cli_queries: int = 30
    repeat: int = 3
    jobs: int | None = None
    workdir: Path | None = None
    keep: bool = False
    mode: str = "standard"
    bytecode_cache: bool = True
    profile: bool = False
    profile_files: int = 1000

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("source", "workdir"):
            data[key] = str(data[key]) if data[key] is not None else None
        return data


Log = Callable[[str], None]


def _stderr_log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- the corpus ---------------------------------------------------------------------------


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            yield Path(dirpath) / name


def populate(ws: Path, opts: Options, log: Log) -> dict[str, Any]:
    """Put the corpus into the workspace; describe it."""
    if opts.source is None:
        log(f"generating {opts.files} files (seed {opts.seed})")
        stats = corpus.generate(ws, corpus.CorpusSpec(opts.files, opts.seed, opts.target_mb))
        return {"kind": "synthetic", **stats.to_json()}
    src = opts.source.resolve()
    started = time.perf_counter()
    has_layout = any((src / d).is_dir() for d in ("docs", "knowledge"))
    target = ws if has_layout else ws / "docs" / src.name
    log(f"copying {src} into {target.relative_to(ws) if target != ws else 'the workspace'}")
    ignore = shutil.ignore_patterns(*SKIP_DIRS, "raytsystem.toml")
    for entry in sorted(src.iterdir()):
        if entry.name in SKIP_DIRS or entry.name == "raytsystem.toml":
            continue
        if has_layout and entry.name not in ("docs", "knowledge"):
            continue  # only what the default include globs would take, under its own name
        dest = target / entry.name
        if entry.is_dir():
            shutil.copytree(entry, dest, ignore=ignore, dirs_exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(entry, dest)
    files = [p for d in ("docs", "knowledge") for p in _walk(ws / d)]
    return {
        "kind": "source",
        "source": str(src),
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "largest_bytes": max((p.stat().st_size for p in files), default=0),
        "seconds": round(time.perf_counter() - started, 3),
    }


def corpus_files(ws: Path) -> list[Path]:
    return [p for d in ("docs", "knowledge") for p in _walk(ws / d)]


# --- profiles -----------------------------------------------------------------------------


def profile_runs(opts: Options, base: Path, stem: str, log: Log) -> dict[str, Any]:
    """cProfile a cold ingest (one worker, so the profile sees the per-file work) and verify."""
    from . import profile

    ws = base / "profile-workspace"
    ws.mkdir()
    cli = Cli(ws, base / "pycache" if opts.bytecode_cache else None)
    cli.run("init", "--json").check()
    small = Options(**{**asdict(opts), "files": min(opts.files, opts.profile_files)})
    info = populate(ws, small, log)
    out: dict[str, Any] = {"files": len(corpus_files(ws)), "corpus": info.get("kind")}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    # `python -m raytsystem` ends with os._exit (ADR 0033), before cProfile could write its
    # file; `main(argv)` raises SystemExit instead, which cProfile catches.
    entry = base / "profile-entry.py"
    entry.write_text("import sys\nfrom raytsystem.cli import main\nmain(sys.argv[1:])\n")
    for name, args in (("ingest", ["ingest", "--jobs", "1"]), ("verify", ["verify"])):
        prof = RESULTS_DIR / f"{stem}-profile-{name}.prof"
        log(f"profiling {name} on {out['files']} files (cProfile, slow)")
        argv = [sys.executable, "-m", "cProfile", "-o", str(prof), str(entry)]
        proc = run_process(
            [*argv, "--workspace", str(ws), *args, "--json"], env=cli.env, cwd=ws
        ).check()
        out[name] = {
            "file": str(prof),
            "wall_s": round(proc.seconds, 2),
            **profile.categorize(prof),
        }
    return out


# --- the whole run ------------------------------------------------------------------------


def run(opts: Options, log: Log = _stderr_log) -> dict[str, Any]:
    """Every measurement on a fresh workspace; the raw figures as a JSON-ready dict."""
    started = time.gmtime()
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", started)
    info = machine.describe(PROJECT_ROOT)
    if opts.workdir is not None:
        opts.workdir.mkdir(parents=True, exist_ok=True)  # `--workdir` may name a new folder
    base = Path(tempfile.mkdtemp(prefix="raytbench-", dir=opts.workdir))
    ws = base / "workspace"
    ws.mkdir()
    (base / "empty-pycache").mkdir()
    cli = Cli(ws, base / "pycache" if opts.bytecode_cache else None)
    m: dict[str, Any] = {}
    try:
        if opts.bytecode_cache:
            log("warming the bytecode cache (private prefix in the temp folder)")
            cli.warm_up()
        cli.run("init", "--json").check()
        corpus_info = populate(ws, opts, log)
        files = corpus_files(ws)
        corpus_info["files"] = len(files)
        corpus_info["bytes"] = sum(p.stat().st_size for p in files)
        log(f"corpus: {len(files)} files, {corpus_info['bytes'] / 1e6:.1f} MB")

        query_texts = queries.make_queries(files, opts.queries, opts.seed)
        log("baselines: markdown-it-py parse, BLAKE3, process start")
        m["parse"] = parse_baseline(files)
        m["blake3"] = blake3_baseline(files)
        m["process_start"] = start = process_start(cli, opts.repeat)

        log("cold ingest")
        m["ingest_cold"] = cold_ingest(cli, opts.jobs, corpus_info["bytes"])
        # Once more right after: a shared machine's speed drifts during a long ingest, and the
        # ratio divides by the mean of the two.
        log("markdown-it-py parse again")
        m["parse_after"] = parse_baseline(files)
        log("markdown-it-py parse, plain MarkdownIt(), for comparison")
        m["parse_plain"] = parse_baseline(files, plain=True)
        m["disk_after_cold"] = disk_usage(ws)
        log(f"  {m['ingest_cold']['wall_s']} s; no-change re-ingest x{opts.repeat}")
        m["ingest_noop"] = noop_ingest(cli, opts.repeat)
        m["ingest_noop_no_bytecode"] = noop_ingest(
            cli.without_bytecode_cache(base / "empty-pycache"), 1
        )
        log(f"one-file-change re-ingest x{opts.repeat}")
        m["ingest_one_change"] = one_change_ingest(
            cli, ws, files, opts.repeat, opts.seed, start["median_s"]
        )
        m["disk_after_edits"] = disk_usage(ws)
        log(f"{len(query_texts)} queries in process")
        m["query_in_process"] = query_in_process(ws, query_texts)
        step = max(1, len(query_texts) // max(1, opts.cli_queries))
        cli_texts = query_texts[::step][: opts.cli_queries]
        log(f"{len(cli_texts)} queries through the CLI")
        m["query_cli"] = query_cli(cli, cli_texts, start["median_s"])
        log("verify")
        m["verify"] = verify(cli, corpus_info["bytes"])
        log("freshness checks in process")
        m["freshness"] = freshness.measure(ws, 50, edit=files[0] if files else None)
        if opts.profile:
            stem = time.strftime("%Y%m%dT%H%M%SZ", started)
            m["profile"] = profile_runs(opts, base, stem, log)
    finally:
        if opts.keep:
            log(f"kept the workspace: {ws}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    try:
        info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        info["load_average_at_end"] = None
    return {
        "schema": "raytsystem-bench/1",
        "started_at": started_at,
        "argv": sys.argv[1:],
        "options": opts.to_json(),
        "machine": info,
        "corpus": corpus_info,
        "queries_sample": query_texts[:10],
        "measurements": m,
    }
