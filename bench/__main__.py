"""`uv run python -m bench`: measure raytsystem on a fresh workspace and judge the figures.

Prints a table (or, with --json, only the JSON) and saves the JSON to
bench/results/<timestamp>-<files>.json. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import report
from .run import Options, run

QUICK_FILES = 200
LARGE_FILES = 50_000

EPILOG = """\
sizes:
  (default)        1,000 synthetic files (about 6.5 MB)
  --files 10000    the size most targets are set for (about 15-20 min on 2 slow cores)
  --large          50,000 files (the peak-memory target; an hour or more)
  --quick          200 files, fewer queries and repeats: a smoke run in well under a minute

what is measured (each on a fresh `raytsystem init` workspace in a temp folder):
  cold `ingest --json` (files/s, MB/s, peak memory) against markdown-it-py parsing the same
  files in one process; no-change and one-file-change re-ingest; process start (`--help`);
  query latency p50/p95 in process (pipeline.query.query) and through the CLI;
  `verify --json` throughput. Each figure with its target and PASS/FAIL.

examples:
  uv run python -m bench --quick
  uv run python -m bench --files 10000
  uv run python -m bench --source /work/shared/corpora/tldr-multilingual
  uv run python -m bench.corpus /tmp/corpus --files 500      # only write a corpus
"""


def parse_args(argv: list[str] | None) -> tuple[Options, argparse.Namespace]:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark raytsystem: ingest, re-ingest, query and verify, with targets.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--files", type=int, help="synthetic corpus size (default 1000)")
    size.add_argument("--large", action="store_true", help=f"{LARGE_FILES:,} files")
    size.add_argument("--quick", action="store_true", help=f"smoke run: {QUICK_FILES} files")
    parser.add_argument("--target-mb", type=float, help="scale file sizes to about this many MB")
    parser.add_argument("--seed", type=int, default=1, help="corpus and query seed (default 1)")
    parser.add_argument(
        "--source",
        type=Path,
        metavar="DIR",
        help="benchmark a copy of this folder of real files instead of a synthetic corpus",
    )
    parser.add_argument("--queries", type=int, help="in-process queries (default 200)")
    parser.add_argument("--cli-queries", type=int, help="CLI query runs (default 30)")
    parser.add_argument("--repeat", type=int, help="runs of each re-ingest figure (default 3)")
    parser.add_argument("--jobs", type=int, help="pass --jobs to ingest (default: its own)")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where to make the temp workspace, made if missing (default: system temp)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the workspace afterwards")
    parser.add_argument(
        "--no-bytecode-cache",
        dest="bytecode_cache",
        action="store_false",
        help="run commands with the environment's bytecode setting as is (default: a private "
        "cache, so a PYTHONDONTWRITEBYTECODE sandbox does not add ~1 s to every command)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also cProfile a cold ingest (one worker) and verify, and show where the time goes",
    )
    parser.add_argument(
        "--profile-files",
        type=int,
        default=1000,
        help="corpus size for --profile (default: min(files, 1000))",
    )
    parser.add_argument("--out", type=Path, help="result file (default bench/results/...)")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)

    if args.source is not None:
        if args.files or args.large or args.target_mb:
            parser.error("--source uses the folder's own files: drop --files/--large/--target-mb")
        if not args.source.is_dir():
            parser.error(f"--source {args.source}: not a folder")
    files = QUICK_FILES if args.quick else LARGE_FILES if args.large else args.files or 1000
    if files < 1:
        parser.error("--files must be at least 1")
    quick = bool(args.quick)
    mode = "quick" if quick else "large" if args.large else "standard"
    opts = Options(
        files=files,
        seed=args.seed,
        target_mb=args.target_mb,
        source=args.source,
        queries=args.queries or (100 if quick else 200),
        cli_queries=args.cli_queries or (10 if quick else 30),
        repeat=args.repeat or (1 if quick else 3),
        jobs=args.jobs,
        workdir=args.workdir,
        keep=args.keep,
        mode=mode,
        bytecode_cache=args.bytecode_cache,
        profile=args.profile,
        profile_files=args.profile_files,
    )
    return opts, args


def main(argv: list[str] | None = None) -> int:
    opts, args = parse_args(argv)
    try:
        raw = run(opts)
    except RuntimeError as exc:  # a raytsystem command failed: say which, with its output
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    result, figs = report.finish(raw)
    path = report.write(result, args.out)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        print(report.table(result, figs))
        print(f"\nresult: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
