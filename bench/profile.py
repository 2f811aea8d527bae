"""Where the time goes: cProfile of a cold ingest (one worker) and of verify, by category.

`--profile` runs `python -m cProfile -o FILE -m raytsystem ...` on a fresh workspace, then
sums each function's own time (tottime) into categories by the file it lives in. Built-in
functions (fsync, sqlite3 calls, regex methods) have no file of their own, so they count
toward the category of the caller that spent the most time in them, except fsync, which is
its own category. The profiler slows Python code more than system calls, so the shares are
a guide to where to look, not exact fractions of the unprofiled wall time.
"""

from __future__ import annotations

import pstats
from pathlib import Path
from typing import Any, Final

# (category, substrings of a function's file name or built-in name), first match wins.
CATEGORIES: Final = (
    ("fsync (blob durability)", ("posix.fsync",)),
    ("imports and bytecode compile", ("importlib", "<frozen", "builtins.compile", "marshal")),
    ("markdown-it-py parse", ("markdown_it/", "mdit_py_plugins/")),
    ("canonical JSON + ID hashing", ("raytsystem/canonical.py", "raytsystem/ids.py", "json/")),
    ("terms and stemming (index text)", ("raytsystem/model/terms.py", "Stemmer")),
    ("sentence split + claims", ("raytsystem/sentences/", "raytsystem/model/claims.py")),
    ("markdown adapter (normalize)", ("raytsystem/model/adapters/",)),
    ("SQL (SQLAlchemy + sqlite3)", ("sqlalchemy/", "sqlite3")),
    (
        "FTS index build/check",
        ("raytsystem/storage/index_file.py", "raytsystem/pipeline/indexing.py"),
    ),
    (
        "blob store I/O",
        (
            "raytsystem/storage/blobs.py",
            "raytsystem/storage/packs.py",
            "raytsystem/storage/addresses.py",
            "blake3",
        ),
    ),
)
OTHER_RAYTSYSTEM: Final = "other raytsystem code"
OTHER: Final = "other (stdlib, click, pydantic, ...)"

Func = tuple[str, int, str]


def _name(func: Func) -> str:
    filename, _, name = func
    return (
        f"{filename}:{name}"
        if filename != "~"
        else name.strip("<>").replace("built-in method ", "")
    )


def _category_of_name(name: str) -> str | None:
    for category, needles in CATEGORIES:
        if any(n in name for n in needles):
            return category
    return None


def categorize(path: Path) -> dict[str, Any]:
    """Own time by category, largest first, and the top functions by own time."""
    stats: dict[Func, Any] = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {}
    total = 0.0
    for func, (_, _, tottime, _, callers) in stats.items():
        total += tottime
        name = _name(func)
        category = _category_of_name(name)
        if category is None and func[0] == "~" and callers:
            # A built-in: charge it to the caller that spent the most time in it.
            caller = max(callers.items(), key=lambda kv: kv[1][2])[0]
            category = _category_of_name(_name(caller))
            name = _name(caller)
        if category is None:
            category = OTHER_RAYTSYSTEM if "raytsystem/" in name else OTHER
        totals[category] = totals.get(category, 0.0) + tottime
    top = sorted(stats.items(), key=lambda kv: -kv[1][2])[:12]
    return {
        "profiled_seconds": round(total, 2),
        "by_category": [
            {"category": c, "seconds": round(s, 2), "share": round(s / total, 3) if total else 0}
            for c, s in sorted(totals.items(), key=lambda kv: -kv[1])
        ],
        "top_functions": [
            {"function": _name(f), "calls": v[1], "own_seconds": round(v[2], 3)} for f, v in top
        ],
    }


def render(title: str, summary: dict[str, Any]) -> str:
    lines = [f"{title}: {summary['profiled_seconds']} s under cProfile"]
    for row in summary["by_category"]:
        if row["share"] >= 0.01:
            lines.append(
                f"  {row['share'] * 100:5.1f}%  {row['seconds']:8.2f} s  {row['category']}"
            )
    lines.append("  top functions by own time:")
    for row in summary["top_functions"][:8]:
        lines.append(f"    {row['own_seconds']:8.3f} s  {row['calls']:>9,}  {row['function']}")
    return "\n".join(lines)
