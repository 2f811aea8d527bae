"""`uv run python -m bench.instructions`: what a cold ingest costs per file, in instructions.

Wall and CPU time drift by 10% on a shared machine, which hides any change smaller than that.
Instruction counts do not: this runs, under `valgrind --tool=callgrind`, a serial cold ingest
(`ingest --jobs 1`: the workers' and the writer's work in one process, and the walk of the
workspace in a child it forks) and markdown-it-py
parsing the same files, each once with the first quarter of them (the lead) and once with all
of them, and reports the difference per file past the lead. Start-up, imports and warm-up
cancel out, and so do the costs a process pays once, on the first file that needs them: the
lead's files have met them, and both runs also hold a file that opens the secrets screen's
gate (`SCREENED`), for which the screen imports detect-secrets. What is left is the cost of
one more file, the same on every run of the same code and corpus (to about 0.1%).

The ratio of the two is the ingest's work against parsing's, for guiding work on the code; it
is not the bench's CPU work ratio and cannot be held against its 4 × threshold: it counts
user-space instructions only (no kernel time, no waiting for memory: an instruction of SQLite
costs more time than one of the parser), and the serial path never pickles the files' results
or passes them between processes. `python -m bench` says how fast the ingest is. Valgrind runs programs
about 50 times slower: 100 files take a minute or two.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import corpus
from .cli import Cli

_COLLECTED = re.compile(r"==\d+== Collected : (\d+)")

# Read and parse every Markdown file under a folder, in path order (reading is counted too: a
# few percent of parsing).
_PARSE = """
import sys
from pathlib import Path
from raytsystem.model.adapters.markdown import make_parser
parser = make_parser()
for path in sorted(Path(sys.argv[1]).rglob("*.md")):
    parser.parse(path.read_text(encoding="utf-8"))
"""


# In every workspace measured, beside the files: a line holding one of the keyword plugin's
# keywords (no secret), which the screen's gate table does not clear.
SCREENED = ("0-lead/screened.md", "# Lead\n\nThe password policy is in the handbook.\n")


class NoValgrind(Exception):
    pass


def _count(argv: list[str], cli: Cli) -> tuple[int, str]:
    """Instructions a command executes (its own process and the children it forks, whose
    work is the command's: valgrind follows a fork, not a new program), and what it
    printed; in `cli`'s environment, with one hash seed for every run (dict and set orders,
    and so the work, repeat exactly)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise NoValgrind("valgrind is not installed (Debian: apt-get install valgrind)")
    proc = subprocess.run(
        [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**cli.env, "PYTHONHASHSEED": "0"},
        cwd=cli.workspace,
    )
    found = _COLLECTED.findall(proc.stderr)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"{' '.join(argv)} under valgrind failed: {proc.stderr[-2000:]}")
    return sum(map(int, found)), proc.stdout


def _workspace(base: Path, name: str, files: list[Path], root: Path) -> Cli:
    """A new workspace with `files` under `docs/` (which the default include globs take), and
    its CLI, with bytecode cached under `base` (a run that compiled its imports would count
    the compiling)."""
    ws = base / name
    screened = ws / "docs" / SCREENED[0]
    screened.parent.mkdir(parents=True)
    screened.write_text(SCREENED[1], encoding="utf-8")
    for path in files:
        target = ws / "docs" / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    cli = Cli(ws, base / "pycache")
    cli.run("init").check()
    return cli


def measure(root: Path, files: int) -> dict[str, Any]:
    """Instructions per file of a serial cold ingest and of parsing, over the first `files`
    Markdown files of `root` after a lead of a quarter of them (at least one) that both runs
    have."""
    lead = lead_files(files)
    paths = sorted(root.rglob("*.md"))[: lead + files]
    if len(paths) <= lead:
        raise ValueError(f"{root} has fewer than {lead + 1} Markdown files")
    ingest_args = ("ingest", "--jobs", "1", "--json")
    with tempfile.TemporaryDirectory(prefix="raytinstr-") as tmp:
        base = Path(tmp)
        # Not counted: compiles every module the counted runs import (all the files: a module
        # imported for one file only, such as detect-secrets, is compiled here too).
        _workspace(base, "warm-up", paths, root).run(*ingest_args).check()
        counts: dict[str, int] = {}
        for name, chosen in (("lead", paths[:lead]), ("all", paths)):
            cli = _workspace(base, name, chosen, root)
            argv = [sys.executable, "-m", "raytsystem", "--workspace", str(cli.workspace)]
            counts[f"ingest_{name}"], out = _count([*argv, *ingest_args], cli)
            scanned = json.loads(out)["counts"]["scanned"]
            if scanned != len(chosen) + 1:  # and SCREENED
                raise RuntimeError(f"the ingest took {scanned} of {len(chosen) + 1} files")
            parse = [sys.executable, "-c", _PARSE, str(cli.workspace / "docs")]
            counts[f"parse_{name}"], _ = _count(parse, cli)
    n = len(paths) - lead
    ingest = (counts["ingest_all"] - counts["ingest_lead"]) / n
    parse_cost = (counts["parse_all"] - counts["parse_lead"]) / n
    return {
        "files": n,
        "lead_files": lead,
        "bytes": sum(p.stat().st_size for p in paths[lead:]),
        "ingest_instructions_per_file": round(ingest),
        "parse_instructions_per_file": round(parse_cost),
        "ratio": round(ingest / parse_cost, 3) if parse_cost > 0 else None,
        "counts": counts,
    }


def lead_files(files: int) -> int:
    """How many files come before the `files` measured: a quarter as many, at least one."""
    return max(1, files // 4)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("at least 1")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("--files", type=_positive, default=100, help="files measured (default 100)")
    parser.add_argument("--source", type=Path, help="a folder of Markdown files instead")
    parser.add_argument("--seed", type=int, default=1, help="synthetic corpus seed (default 1)")
    parser.add_argument("--json", action="store_true", help="print only the JSON")
    args = parser.parse_args(argv)
    try:
        if args.source is not None:
            result = measure(args.source, args.files)
        else:
            with tempfile.TemporaryDirectory(prefix="raytinstr-corpus-") as tmp:
                corpus.generate(
                    Path(tmp), corpus.CorpusSpec(lead_files(args.files) + args.files, args.seed)
                )
                result = measure(Path(tmp), args.files)
    except NoValgrind as exc:
        print(f"python -m bench.instructions: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, ValueError) as exc:
        print(f"python -m bench.instructions: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{result['files']} files, {result['bytes'] / 1e3:.0f} KB: cold ingest "
            f"{result['ingest_instructions_per_file'] / 1e6:.2f} M instructions per file, "
            f"reading and parsing them {result['parse_instructions_per_file'] / 1e6:.2f} M: "
            f"{result['ratio']} x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
