"""`raytsystem` as a subprocess: a clean environment, `--workspace`, and bytecode handling.

Python would normally cache bytecode after the first run; when the environment forbids it
(PYTHONDONTWRITEBYTECODE, as in some sandboxes) every process recompiles its imports, which
adds about a second to each command. With a cache folder the subprocesses write and reuse
bytecode under that private prefix (nothing is written into src/ or .venv/), so the figures
are those of a normal installation.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from .measure import ProcResult, run_process

WARM_MODULES = (
    "cli",
    "pipeline.ingest",
    "pipeline.query",
    "pipeline.search",
    "pipeline.verify",
    "pipeline.show",
)


class Cli:
    """`raytsystem --workspace WS ...`; `pycache` None keeps the environment's setting."""

    def __init__(self, workspace: Path, pycache: Path | None) -> None:
        script = Path(sys.executable).with_name("raytsystem")
        self.prefix = [str(script)] if script.exists() else [sys.executable, "-m", "raytsystem"]
        self.workspace = workspace
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAYTSYSTEM_")}
        if pycache is not None:
            self.env.pop("PYTHONDONTWRITEBYTECODE", None)
            self.env["PYTHONPYCACHEPREFIX"] = str(pycache)

    def without_bytecode_cache(self, empty: Path) -> Cli:
        """The same CLI forced to compile every import (an empty, read-only cache prefix)."""
        other = Cli(self.workspace, None)
        other.env["PYTHONDONTWRITEBYTECODE"] = "1"
        other.env["PYTHONPYCACHEPREFIX"] = str(empty)
        return other

    def warm_up(self) -> None:
        """Import what the commands import once, so later runs find compiled bytecode."""
        modules = ", ".join(f"raytsystem.{m}" for m in WARM_MODULES)
        run_process([sys.executable, "-c", f"import {modules}"], env=self.env).check()
        self.run("--help", global_args=False).check()

    def run(self, *args: str, sample_tree: bool = False, global_args: bool = True) -> ProcResult:
        argv = [*self.prefix, *(["--workspace", str(self.workspace)] if global_args else []), *args]
        return run_process(argv, env=self.env, cwd=self.workspace, sample_tree=sample_tree)

    def json(self, *args: str, sample_tree: bool = False) -> tuple[ProcResult, dict[str, Any]]:
        result = self.run(*args, "--json", sample_tree=sample_tree).check()
        return result, json.loads(result.stdout)
