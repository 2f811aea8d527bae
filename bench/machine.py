"""What the figures were measured on: CPU, cores, memory, load, Python, the code's revision.

Machines are shared and noisy, so a result file always says where it came from; the load
average at the start tells a reader whether other work was running.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Hardware", "Processor")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def describe(project_root: Path) -> dict[str, Any]:
    """A JSON-ready description of this machine and of the code under test."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    status = _git(project_root, "status", "--porcelain", "--", "src")
    try:
        from raytsystem import __version__ as version
    except ImportError:  # pragma: no cover - the bench runs inside the project
        version = "unknown"
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": _memory_gib(),
        "load_average_at_start": load,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "raytsystem_version": version,
        "git_commit": _git(project_root, "rev-parse", "--short=12", "HEAD"),
        "src_uncommitted_changes": bool(status) if status is not None else None,
    }
