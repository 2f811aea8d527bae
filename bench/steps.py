"""The individual measurements: each takes what it needs and returns a JSON-ready dict.

In process: markdown-it-py parsing (only `parser.parse` timed), BLAKE3, and queries through
`pipeline.query.query`. Through the CLI: process start, cold / no-change / one-file-change
ingest, `query --json` and `verify --json`. Plus the disk used by the workspace's state.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .cli import Cli
from .measure import median, percentile

BLAKE3_SAMPLE_BYTES = 64 * 1024 * 1024

# --- in-process baselines -----------------------------------------------------------------


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _mib(kib: int | None) -> float | None:
    return round(kib / 1024, 1) if kib else None


def parse_baseline(files: list[Path], *, plain: bool = False) -> dict[str, Any]:
    """markdown-it-py over every Markdown file, one process, reading and decoding not timed.

    The parser is the Markdown adapter's (`make_parser`: the CommonMark preset, HTML included,
    with GFM tables, strikethrough, footnotes and front matter), the parse an ingest cannot do
    without and the target's floor; `plain=True` times markdown-it-py's own default,
    `MarkdownIt()`, the CommonMark preset alone, for comparison (ADR 0028)."""
    from markdown_it import MarkdownIt

    from raytsystem.model.adapters import media_type_for
    from raytsystem.model.adapters.markdown import make_parser

    texts: list[str] = []
    size = 0
    for path in files:
        if media_type_for(path.name) != "text/markdown":
            continue
        data = path.read_bytes()
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            continue
        size += len(data)
    parser = MarkdownIt() if plain else make_parser()
    parser.parse("# warm up\n\nThe parser compiles its rules on first use.\n")
    started, cpu_started = time.perf_counter(), time.process_time()
    for text in texts:
        parser.parse(text)
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    return {
        "files": len(texts),
        "bytes": size,
        "seconds": round(seconds, 4),
        "cpu_seconds": round(cpu, 4),
        "files_per_s": round(len(texts) / seconds, 1) if seconds else None,
        "mb_per_s": round(size / 1e6 / seconds, 2) if seconds else None,
    }


def blake3_baseline(files: list[Path]) -> dict[str, Any]:
    """Single-thread BLAKE3 over (up to 64 MB of) the corpus bytes: what hashing costs here."""
    import blake3

    chunks, size = [], 0
    for path in files:
        if size >= BLAKE3_SAMPLE_BYTES:
            break
        data = path.read_bytes()
        chunks.append(data)
        size += len(data)
    started = time.perf_counter()
    for data in chunks:
        blake3.blake3(data).digest()
    seconds = time.perf_counter() - started
    return {
        "bytes": size,
        "seconds": round(seconds, 4),
        "mb_per_s": round(size / 1e6 / seconds, 1) if seconds else None,
    }


# --- CLI measurements ---------------------------------------------------------------------


def process_start(cli: Cli, repeat: int) -> dict[str, Any]:
    runs = [cli.run("--help", global_args=False).check().seconds for _ in range(max(3, repeat))]
    return {"runs_s": [round(r, 4) for r in runs], "median_s": round(median(runs), 4)}


def cold_ingest(cli: Cli, jobs: int | None, corpus_bytes: int) -> dict[str, Any]:
    args = ["ingest", *(["--jobs", str(jobs)] if jobs else [])]
    proc, report = cli.json(*args, sample_tree=True)
    counts = report["counts"]
    size = counts.get("bytes_read") or corpus_bytes
    return {
        "wall_s": round(proc.seconds, 3),
        "json_seconds": report["seconds"],
        "files": counts["scanned"],
        "new_revisions": counts["new_revisions"],
        "bytes": size,
        "files_per_s": round(counts["scanned"] / proc.seconds, 1),
        "mb_per_s": round(size / 1e6 / proc.seconds, 3),
        "claims": counts["claims_added"],
        "findings": len(report["findings"]),
        "finding_codes": dict(Counter(f["code"] for f in report["findings"])),
        "generation": report["generation"],
        "max_rss_mib": round(proc.max_rss_kib / 1024, 1),
        # CPU of the ingest and its workers: the work done, whatever the number of cores
        "cpu_user_s": _rounded(proc.user_s),
        "cpu_system_s": _rounded(proc.system_s),
        "tree_peak_pss_mib": _mib(proc.tree_peak_pss_kib),
        "tree_peak_rss_sum_mib": _mib(proc.tree_peak_rss_sum_kib),
        "tree_peak_memory_files_mib": _mib(proc.tree_peak_memory_files_kib),
        "jobs": jobs or min(os.cpu_count() or 1, 8),
    }


def noop_ingest(cli: Cli, repeat: int) -> dict[str, Any]:
    walls, inner, created = [], [], []
    for _ in range(repeat):
        proc, report = cli.json("ingest")
        walls.append(proc.seconds)
        inner.append(report["seconds"])
        created.append(report["created"])
    return {
        "runs_s": [round(w, 3) for w in walls],
        "json_seconds": inner,
        "median_s": round(median(walls), 3),
        "median_json_s": median(inner),
        "made_a_generation": any(created),
    }


def _editable_line(lines: list[str]) -> int | None:
    """The index of a plain paragraph line (outside front matter and code fences)."""
    fenced = False
    start = 0
    if lines and lines[0].strip() == "---":
        start = next((i + 1 for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
    for i in range(start, len(lines)):
        line = lines[i]
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced and line[:1].isalpha() and not line.startswith("---"):
            return i
    return None


def edit_one_file(path: Path, n: int) -> None:
    """Change one paragraph: append a sentence to one of its lines (or add a paragraph)."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    sentence = f"Benchmark edit {n} changed this paragraph at {time.time_ns()}."
    i = _editable_line(lines)
    if i is None:
        lines.append(f"\n{sentence}\n")
    else:
        lines[i] = lines[i].rstrip() + " " + sentence
    path.write_text("\n".join(lines), encoding="utf-8")


def pick_edit_targets(files: list[Path], count: int, seed: int) -> list[Path]:
    """Ordinary files (1-8 KB Markdown, English where there is a choice), chosen by seed."""
    md = [p for p in files if p.suffix.lower() in (".md", ".markdown")]
    usual = [p for p in md if 1_000 <= p.stat().st_size <= 8_000] or md or files
    ascii_first = [p for p in usual if p.read_bytes().isascii()] or usual
    rng = random.Random(f"edits:{seed}")
    return rng.sample(ascii_first, min(count, len(ascii_first)))


def one_change_ingest(
    cli: Cli, ws: Path, files: list[Path], repeat: int, seed: int, start_s: float
) -> dict[str, Any]:
    """`repeat + 1` one-file edits, each followed by an ingest.

    The first change after a cold ingest patches the copy the cold ingest left (or, with an
    older raytsystem, copies the parent's index); it is reported on its own. The others are the
    steady state: the new index is patched from the index about to be pruned (`[index] keep`).
    """
    runs = []
    for n, path in enumerate(pick_edit_targets(files, repeat + 1, seed), 1):
        edit_one_file(path, n)
        proc, report = cli.json("ingest")
        runs.append(
            {
                "path": path.relative_to(ws).as_posix(),
                "wall_s": round(proc.seconds, 3),
                "json_seconds": report["seconds"],
                "created": report["created"],
                "index_built_from": (report.get("index") or {}).get("built_from"),
                "new_revisions": report["counts"]["new_revisions"],
                "claims_added": report["counts"]["claims_added"],
                "claims_removed": report["counts"]["claims_removed"],
            }
        )
    first, steady = runs[0], runs[1:] or runs
    walls = [r["wall_s"] for r in steady]
    return {
        "runs": runs,
        "first": first,
        "median_wall_s": median(walls),
        "median_json_s": median([r["json_seconds"] for r in steady]),
        "median_wall_minus_start_s": round(median(walls) - start_s, 3),
        "steady_built_from": sorted({str(r["index_built_from"]) for r in steady}),
        "all_made_one_revision": all(r["created"] and r["new_revisions"] == 1 for r in runs),
    }


def _latency_summary(ms: list[float], statuses: Counter[str], texts: list[str]) -> dict[str, Any]:
    slowest = sorted(zip(ms, texts, strict=True), key=lambda x: -x[0])[:5]
    return {
        "count": len(ms),
        "p50_ms": round(percentile(ms, 50), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "max_ms": round(max(ms), 2) if ms else None,
        "mean_ms": round(sum(ms) / len(ms), 2) if ms else None,
        "outcomes": dict(sorted(statuses.items())),
        "slowest": [{"ms": round(t, 1), "query": q} for t, q in slowest],
    }


def query_in_process(ws: Path, texts: list[str]) -> dict[str, Any]:
    """`pipeline.query.query` called directly; the first (warm-up) call is not counted."""
    from raytsystem.errors import RaytError
    from raytsystem.pipeline.query import query
    from raytsystem.storage.blobs import DiskBlobStore
    from raytsystem.storage.reader import open_reader

    url = f"sqlite:///{ws / '.raytsystem' / 'ledger.sqlite3'}"
    index_dir = ws / ".raytsystem" / "indexes"
    blobs = DiskBlobStore(ws / "_raw")
    reader = open_reader(url)
    ms: list[float] = []
    statuses: Counter[str] = Counter()
    try:
        for i, text in enumerate(["warm up", *texts]):
            started = time.perf_counter()
            try:
                status = query(reader, blobs, index_dir, text, limit=5).status
            except RaytError as exc:
                status = f"error:{exc.code}"
            elapsed = (time.perf_counter() - started) * 1000
            if i:
                ms.append(elapsed)
                statuses[status] += 1
    finally:
        reader.close()
    return _latency_summary(ms, statuses, texts)


def query_cli(cli: Cli, texts: list[str], start_s: float) -> dict[str, Any]:
    ms: list[float] = []
    statuses: Counter[str] = Counter()
    for text in texts:
        proc = cli.run("query", text, "--json")
        ms.append(proc.seconds * 1000)
        try:
            data = json.loads(proc.stdout)
            status = data.get("status") or f"error:{data['error']['code']}"
        except (ValueError, KeyError, TypeError):
            status = f"exit:{proc.returncode}"
        statuses[status] += 1
    summary = _latency_summary(ms, statuses, texts)
    summary["p95_minus_start_ms"] = round(summary["p95_ms"] - start_s * 1000, 2)
    return summary


def verify(cli: Cli, raw_bytes: int) -> dict[str, Any]:
    proc = cli.run("verify", "--json", sample_tree=True)  # its own peak, not the bench's
    report = json.loads(proc.stdout)
    if "error" in report:
        raise RuntimeError(f"verify failed: {report['error']}")
    t = report["throughput"]
    return {
        "ok": report["ok"],
        "exit": proc.returncode,
        "findings": len(report["findings"]),
        "finding_codes": dict(Counter(f["code"] for f in report["findings"])),
        "wall_s": round(proc.seconds, 3),
        "json_seconds": report["seconds"],
        "blob_bytes": t["blob_bytes"],
        "blob_mb_per_s": t["mb_per_s"],
        "hash_seconds": t["hash_seconds"],
        "raw_bytes": raw_bytes,
        "raw_mb_per_s": round(raw_bytes / 1e6 / report["seconds"], 1)
        if report["seconds"]
        else None,
        "raw_mb_per_s_wall": round(raw_bytes / 1e6 / proc.seconds, 1),
        "max_rss_mib": round(proc.max_rss_kib / 1024, 1),
        "counts": report["counts"],
    }


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in _walk_all(path))


def _walk_all(root: Path) -> Iterator[Path]:
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            yield Path(dirpath) / name


def disk_usage(ws: Path) -> dict[str, Any]:
    """Bytes of what raytsystem keeps: ledger, per-generation indexes, raw blobs."""
    state = ws / ".raytsystem"
    indexes = sorted((state / "indexes").glob("*.sqlite3"))
    return {
        "ledger_bytes": sum(p.stat().st_size for p in state.glob("ledger.sqlite3*")),
        "index_files": len(indexes),
        "index_bytes_latest": indexes[-1].stat().st_size if indexes else 0,
        "index_bytes_total": sum(p.stat().st_size for p in indexes),
        "raw_bytes": _tree_bytes(ws / "_raw"),
        "state_bytes": _tree_bytes(state),
    }
