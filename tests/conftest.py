"""Shared fixtures: real workspaces in tmp_path and the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CORPORA = Path(os.environ.get("RAYTSYSTEM_CORPORA", SHARED / "corpora"))


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


CliRunner = Callable[..., Result]


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> Result:
    """Run `raytsystem ARGS` as a real process (the installed console script's module)."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "raytsystem", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def _workspace_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template") / "ws"
    root.mkdir()
    result = run_cli("init", cwd=root)
    assert result.code == 0, result.stderr
    return root


@pytest.fixture
def workspace(tmp_path: Path, _workspace_template: Path) -> Path:
    """An initialized, empty workspace (a copy of one `raytsystem init` made per session)."""
    root = tmp_path / "ws"
    shutil.copytree(_workspace_template, root, symlinks=True)
    return root


@pytest.fixture
def cli() -> CliRunner:
    return run_cli


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
