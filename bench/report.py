"""Targets, PASS/FAIL, the stdout table and the JSON result file.

A target holds at the corpus size it was set for (`at_files`); a smaller run still shows
PASS or FAIL against the same threshold, and the table says the run is below that size, so a
quick PASS is never mistaken for the real thing.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .run import RESULTS_DIR


@dataclass(frozen=True)
class Figure:
    section: str
    label: str
    value: float | int | str | None
    unit: str = ""
    target: str | None = None  # e.g. "< 1.5"
    at_files: int | None = None  # the corpus size the target is set for
    status: str | None = None  # PASS / FAIL / None (informational)
    note: str = ""


# `verify` may take at most this many times the cold ingest's wall time (ADR 0035).
VERIFY_OVER_INGEST = 1.5

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _jobs(jobs: int) -> str:
    """What `ingest --jobs N` runs (ADR 0031): the writer alone, or N - 1 workers beside it."""
    if jobs <= 1:
        return "1 process (serial)"
    return f"{jobs} processes ({jobs - 1} worker{'s' if jobs > 2 else ''} and the writer)"


def _judge(value: Any, target: str | None) -> str | None:
    if target is None:
        return None
    if target.startswith("== "):
        return "PASS" if str(value) == target[3:] else "FAIL"
    if not isinstance(value, int | float):
        return "FAIL"  # a target whose figure could not be measured is not met
    op, threshold = target.split()
    return "PASS" if _OPS[op](value, float(threshold)) else "FAIL"


def _fig(
    section: str,
    label: str,
    value: Any,
    unit: str = "",
    target: str | None = None,
    at_files: int | None = None,
    note: str = "",
) -> Figure:
    return Figure(section, label, value, unit, target, at_files, _judge(value, target), note)


def _ratio(a: Any, b: Any) -> float | None:
    """a / b to three significant figures, or None when either is missing."""
    if isinstance(a, int | float) and isinstance(b, int | float) and b:
        return float(f"{a / b:.3g}")
    return None


def _rate(run: dict[str, Any], seconds: str) -> float | None:
    """MB/s from a run's bytes and seconds, unrounded."""
    if run.get("bytes") and run.get(seconds):
        return float(run["bytes"]) / 1e6 / float(run[seconds])
    return None


def _parse_mean(before: dict[str, Any], after: dict[str, Any] | None) -> float | None:
    """The parse baseline's MB/s, unrounded: the mean of the runs before and after the ingest
    (results saved before there was a second run have only the first)."""
    rates = [r for r in (_rate(before, "seconds"), _rate(after or {}, "seconds")) if r]
    return sum(rates) / len(rates) if rates else None


def _target_ratio(
    cold: dict[str, Any], before: dict[str, Any], after: dict[str, Any] | None
) -> float | None:
    """Ingest MB/s over the parse baseline's, from the unrounded rates and cut (not rounded) to
    four decimals: a ratio of 0.49996 must not pass as 0.5."""
    ingest, parse = _rate(cold, "wall_s"), _parse_mean(before, after)
    if ingest is None or parse is None:
        return None
    return _cut(ingest / parse)


def _cut(ratio: float) -> float:
    """A ratio cut (not rounded) to four decimals. Rounded to 1e-5 first: a ratio of 0.57 is
    5699.99999... ten-thousandths in floating point."""
    return math.floor(round(ratio * 1e4, 5)) / 1e4


def _parse_rate(before: dict[str, Any], after: dict[str, Any] | None) -> tuple[Any, str]:
    """The parse baseline as the table shows it (three significant figures), and its note."""
    note = f"1 process, {before['files']} files, {before['seconds']} s"
    mean = _parse_mean(before, after)
    shown = float(f"{mean:.3g}") if mean else before.get("mb_per_s")
    if after and after.get("mb_per_s"):
        note += f"; mean of {before['mb_per_s']} before and {after['mb_per_s']} after ingest"
    return shown, note


def _cpu_per_byte(run: dict[str, Any] | None) -> float | None:
    if run and run.get("cpu_seconds") and run.get("bytes"):
        return float(run["cpu_seconds"]) / float(run["bytes"])
    return None


def _plain_figures(
    cold: dict[str, Any], adapter_after: dict[str, Any] | None, plain: dict[str, Any] | None
) -> list[Figure]:
    """markdown-it-py's own default, `MarkdownIt()` (the CommonMark preset), beside the
    adapter's parser: what the syntax the adapter reads on top costs (the plain run against the
    adapter's run just before it), and the ingest against the plain parse. For comparison only:
    the target's floor is the parse the ingest cannot skip (ADR 0034)."""
    if not plain:
        return []  # results saved before the plain parse was timed
    adapter_cost = _ratio(_cpu_per_byte(adapter_after), _cpu_per_byte(plain))
    cost = (
        f"the adapter's parser costs {adapter_cost} × its CPU per byte (the two runs back to "
        "back, after the ingest)"
        if adapter_cost
        else "its CPU against the adapter's parser was not measured"
    )
    ingest, rate = _rate(cold, "wall_s"), _rate(plain, "seconds")
    return [
        _fig(
            "ingest",
            "markdown-it-py parse MB/s, plain MarkdownIt()",
            plain.get("mb_per_s"),
            "MB/s",
            note=f"the CommonMark preset: no tables, strikethrough, footnotes or front matter; "
            f"{cost}; ADR 0034",
        ),
        _fig(
            "ingest",
            "  ingest MB/s ÷ plain parse MB/s",
            _cut(ingest / rate) if ingest and rate else None,
            "×",
            note="for comparison, no target: the target's floor is the adapter's parse (ADR 0034)",
        ),
    ]


def _cpu_figures(
    cold: dict[str, Any], before: dict[str, Any], after: dict[str, Any] | None
) -> list[Figure]:
    """What the cold ingest cost in CPU (its workers included), against parsing's CPU.

    The work ratio is the ingest's CPU per byte over parsing's CPU per byte (the mean of the
    runs before and after the ingest). Ingest ÷ parse in MB/s is then the cores kept busy
    divided by the work ratio: 0.5 × on two busy cores needs the whole ingest, start-up and
    the end included, to cost at most 4 × the parse. A large system share is the kernel's
    work: the writer re-reading and rewriting pages, or the machine (ext4 without a journal
    right after many files were deleted); ADR 0034."""
    user, system = cold.get("cpu_user_s"), cold.get("cpu_system_s")
    if user is None or system is None:
        return []  # results saved before these were measured, or no wait4
    total = user + system
    runs = [r for r in (before, after) if r and r.get("cpu_seconds") and r.get("bytes")]
    parse_cpu = sum(r["cpu_seconds"] / r["bytes"] for r in runs) / len(runs) if runs else None
    ingest_cpu = total / cold["bytes"] if cold.get("bytes") else None
    busy = total / cold["wall_s"] if cold.get("wall_s") else None
    return [
        _fig(
            "ingest",
            "cold ingest CPU (user + system)",
            round(total, 1),
            "s",
            note=(
                f"user {user:.1f} s, system {system:.1f} s ({system / total:.0%} in the kernel); "
                f"{busy:.2f} cores busy on average"
                if total and busy
                else ""
            ),
        ),
        _fig(
            "ingest",
            "  ingest CPU ÷ parse CPU, per byte",
            _ratio(ingest_cpu, parse_cpu),
            "×",
            note="0.5 × needs at most 2 × the cores kept busy (4 × on two)",
        ),
    ]


def _memory_figures(cold: dict[str, Any]) -> list[Figure]:
    """The cold ingest's peak memory. The target (under 1 GiB at 50,000 files) is judged on
    the whole process tree, every process's own peak added up: an upper bound of the peak
    (but for a process's growth in its last 0.1 s), not a sample of it. Results saved before
    that was measured judge the largest single process instead (ADR 0034)."""
    tree = cold.get("tree_peak_rss_sum_mib")
    largest = _fig(
        "ingest",
        "ingest peak RSS (largest process)",
        cold["max_rss_mib"],
        "MiB",
        None if tree else "< 1024",
        None if tree else 50_000,
        note="its own VmHWM, read every 0.1 s" if tree else "os.wait4 ru_maxrss",
    )
    pss = _fig(
        "ingest",
        "ingest peak PSS (whole tree, sampled)",
        cold["tree_peak_pss_mib"],
        "MiB",
        note="the processes' proportional set sizes at one time, added; an estimate from "
        "below, read with at most 1% of a core",
    )
    if not tree:
        return [largest, pss]
    whole = _fig(
        "ingest",
        "ingest peak memory, every process",
        tree,
        "MiB",
        "< 1024",
        50_000,
        note="each process's own peak RSS (VmHWM), added up, and the most held in memory "
        "files (the workers' results, ADR 0031): an upper bound of the tree's peak",
    )
    return [whole, largest, pss]


def figures(result: dict[str, Any]) -> list[Figure]:
    """Every figure of a run, with its target and status where the brief sets one."""
    m = result["measurements"]
    cold, parse, start = m["ingest_cold"], m["parse"], m["process_start"]
    noop, one, v = m["ingest_noop"], m["ingest_one_change"], m["verify"]
    qi, qc = m["query_in_process"], m["query_cli"]
    parse_rate, parse_note = _parse_rate(parse, m.get("parse_after"))
    ingest_ratio = _target_ratio(cold, parse, m.get("parse_after"))
    jobs = cold["jobs"]
    return [
        _fig(
            "ingest",
            "cold ingest wall time",
            cold["wall_s"],
            "s",
            note=f"ingest JSON `seconds` {cold['json_seconds']}; {_jobs(jobs)}",
        ),
        _fig(
            "ingest",
            "cold ingest files/s",
            cold["files_per_s"],
            "files/s",
            note=f"{cold['files']} files, {cold['claims']} claims, {cold['findings']} findings",
        ),
        _fig(
            "ingest",
            "cold ingest MB/s",
            cold["mb_per_s"],
            "MB/s",
            note=f"{cold['bytes'] / 1e6:.1f} MB read",
        ),
        _fig(
            "ingest",
            "markdown-it-py parse MB/s (the adapter's parser)",
            parse_rate,
            "MB/s",
            note=parse_note,
        ),
        _fig(
            "ingest",
            "ingest MB/s ÷ parse MB/s",
            ingest_ratio,
            "×",
            ">= 0.5",
            note=f"ingest uses {jobs} process(es), the parse baseline 1",
        ),
        *_plain_figures(cold, m.get("parse_after"), m.get("parse_plain")),
        *_cpu_figures(cold, parse, m.get("parse_after")),
        *_memory_figures(cold),
        _fig(
            "re-ingest",
            "process start (`raytsystem --help`)",
            start["median_s"],
            "s",
            note=f"median of {len(start['runs_s'])}",
        ),
        _fig(
            "re-ingest",
            "no-change re-ingest",
            noop["median_s"],
            "s",
            "< 1.5",
            10_000,
            note=f"median of {len(noop['runs_s'])}; JSON seconds {noop['median_json_s']}"
            + ("; MADE A GENERATION" if noop["made_a_generation"] else ""),
        ),
        _fig(
            "re-ingest",
            "  same, no bytecode cache",
            m["ingest_noop_no_bytecode"]["median_s"],
            "s",
            note="every import compiled (PYTHONDONTWRITEBYTECODE=1, empty cache)",
        ),
        _fig(
            "re-ingest",
            "one-file-change re-ingest (wall)",
            one["median_wall_s"],
            "s",
            note=f"median of {len(one['runs']) - 1 or 1}; index from: "
            + ", ".join(one.get("steady_built_from", ["?"]))
            + ("" if one["all_made_one_revision"] else "; NOT exactly one new revision"),
        ),
        _fig(
            "re-ingest",
            "  minus process start",
            one["median_wall_minus_start_s"],
            "s",
            "< 1.0",
            10_000,
            note="target: < 1 s plus process start",
        ),
        _fig("re-ingest", "  generation/index part (JSON seconds)", one["median_json_s"], "s"),
        _fig(
            "re-ingest",
            "  first change after the cold ingest (wall)",
            one["first"]["wall_s"],
            "s",
            note=f"index from: {one['first']['index_built_from']}; "
            f"JSON seconds {one['first']['json_seconds']}",
        ),
        _fig(
            "re-ingest",
            "  outside ingest's own timer",
            round(one["median_wall_s"] - one["median_json_s"], 3),
            "s",
            note="wall minus JSON seconds: imports, ledger open, exit",
        ),
        _fig("query", "in-process p50", qi["p50_ms"], "ms"),
        _fig(
            "query",
            "in-process p95",
            qi["p95_ms"],
            "ms",
            "< 50",
            10_000,
            note=f"{qi['count']} queries; {_outcomes(qi)}; slowest {_slowest(qi)}",
        ),
        _fig("query", "CLI p50", qc["p50_ms"], "ms"),
        _fig(
            "query",
            "CLI p95",
            qc["p95_ms"],
            "ms",
            "< 300",
            10_000,
            note=f"{qc['count']} runs; minus process start {qc['p95_minus_start_ms']} ms; "
            f"{_outcomes(qc)}",
        ),
        *_freshness_figures(m.get("freshness")),
        *_storage_figures(m, result["corpus"]["bytes"]),
        *_verify_figures(v, cold["wall_s"], m["blake3"]["mb_per_s"]),
    ]


def _freshness_figures(f: dict[str, Any] | None) -> list[Figure]:
    """What saying fresh or stale costs (ADR 0039): a tracking session's added time is
    judged; a walk (what each CLI answer does, beside its query) is shown."""
    if f is None:
        return []  # a result from before freshness was measured
    check, track = f["check"], f["track"]
    out = [
        _fig(
            "freshness",
            "walk and verdict p95 (each CLI answer)",
            check["p95_ms"],
            "ms",
            note=f"p50 {check['p50_ms']} ms over {check['files']} files; "
            f"bound {f['bound_s']} s; in a thread beside the query; {', '.join(check['states'])}",
        ),
        _fig("freshness", "session's first check (walk, watcher start)", f["track_first_ms"], "ms"),
        _fig(
            "freshness",
            "added to an in-process query p95 (session)",
            track["p95_ms"],
            "ms",
            "< 10",
            10_000,
            note=f"p50 {track['p50_ms']} ms; {track['count']} checks; {', '.join(track['states'])}",
        ),
    ]
    stale = f.get("track_stale")
    if stale:
        out.append(
            _fig(
                "freshness",
                "  same, one file edited (hashed)",
                stale["p95_ms"],
                "ms",
                note=f"p50 {stale['p50_ms']} ms; {', '.join(stale['states'])}",
            )
        )
    return out


def _verify_figures(v: dict[str, Any], cold_wall: float, blake3: float) -> list[Figure]:
    """`verify`'s figures (ADR 0035). The 200 MB/s target is judged on the corpus's raw bytes
    over the seconds of the step that re-hashes every blob (the normalized texts are hashed in
    the same step and not counted). The whole command re-derives every row, so its time follows
    the rows, not the bytes: it is held to at most VERIFY_OVER_INGEST × the cold ingest's time,
    which derived those rows."""
    hash_seconds = v.get("hash_seconds") or (
        v["blob_bytes"] / 1e6 / v["blob_mb_per_s"] if v.get("blob_mb_per_s") else None
    )
    raw_rate = v["raw_bytes"] / 1e6 / hash_seconds if hash_seconds else None
    return [
        _fig(
            "verify",
            "verify result",
            "ok" if v["ok"] else f"{v['findings']} findings",
            target="== ok",
            note=", ".join(f"{c} {n}" for c, n in v.get("finding_codes", {}).items()),
        ),
        _fig(
            "verify",
            "verify wall time",
            v["wall_s"],
            "s",
            note=f"JSON seconds {v['json_seconds']}; ok={v['ok']}",
        ),
        _fig(
            "verify",
            "verify peak RSS (largest process)",
            v.get("max_rss_mib"),
            "MiB",
            note="its own VmHWM, read every 0.1 s; it streams what it checks (ADR 0035)",
        ),
        _fig(
            "verify",
            "verify raw MB/s (corpus bytes ÷ re-hashing seconds)",
            round(raw_rate, 1) if raw_rate else None,
            "MB/s",
            ">= 200",
            note=f"{v['raw_bytes'] / 1e6:.1f} MB of raw files over the {hash_seconds:.3f} s of "
            "the step that re-hashes every blob, its processes' start included (ADR 0035)"
            if hash_seconds
            else "",
        ),
        _fig(
            "verify",
            "  every blob re-hashed MB/s (JSON)",
            v["blob_mb_per_s"],
            "MB/s",
            note=f"{v['blob_bytes'] / 1e6:.1f} MB: the raw files and their normalized texts",
        ),
        _fig(
            "verify",
            "  ÷ single-thread BLAKE3 MB/s",
            _ratio(v["blob_mb_per_s"], blake3),
            "×",
            note=f"BLAKE3 in this process: {blake3} MB/s",
        ),
        _fig(
            "verify",
            "verify wall time ÷ cold ingest wall time",
            _ratio(v["wall_s"], cold_wall),
            "×",
            f"<= {VERIFY_OVER_INGEST}",
            note="it re-derives every row the ingest derived: its time follows the rows (ADR 0035)",
        ),
        _fig(
            "verify",
            "  whole command: corpus MB ÷ wall seconds",
            v.get("raw_mb_per_s_wall"),
            "MB/s",
            note="no target: every ID, hash, reference, chain and index row is re-derived",
        ),
    ]


def _storage_figures(m: dict[str, Any], corpus_bytes: int) -> list[Figure]:
    cold, edits = m["disk_after_cold"], m["disk_after_edits"]
    mib = 1024 * 1024

    def times(n: int) -> str:
        return f"{n / corpus_bytes:.1f}× the corpus" if corpus_bytes else ""

    return [
        _fig(
            "storage",
            "ledger after cold ingest",
            round(cold["ledger_bytes"] / mib, 1),
            "MiB",
            note=times(cold["ledger_bytes"]),
        ),
        _fig(
            "storage",
            "index of one generation",
            round(cold["index_bytes_latest"] / mib, 1),
            "MiB",
            note=times(cold["index_bytes_latest"]),
        ),
        _fig(
            "storage",
            "raw blobs (_raw/)",
            round(cold["raw_bytes"] / mib, 1),
            "MiB",
            note=times(cold["raw_bytes"]) + " (raw + normalized text)",
        ),
        _fig(
            "storage",
            ".raytsystem/ after the re-ingests",
            round(edits["state_bytes"] / mib, 1),
            "MiB",
            note=f"{edits['index_files']} index files kept; " + times(edits["state_bytes"]),
        ),
    ]


def _slowest(summary: dict[str, Any]) -> str:
    worst = summary.get("slowest") or []
    return "; ".join(f"{w['ms']:.0f} ms {w['query']!r}" for w in worst[:2])


def _outcomes(summary: dict[str, Any]) -> str:
    return ", ".join(f"{k} {n}" for k, n in summary["outcomes"].items())


def _value(f: Figure) -> str:
    if f.value is None:
        return "n/a"
    if isinstance(f.value, float) and f.unit == "×" and f.target:
        text = f"{f.value:.4f}"  # a judged ratio, cut to four decimals: 0.5002 is not 0.5
    elif isinstance(f.value, float):
        text = f"{f.value:,.1f}" if abs(f.value) >= 100 else f"{f.value:.3g}"
    elif isinstance(f.value, int):
        text = f"{f.value:,}"
    else:
        text = str(f.value)
    return f"{text} {f.unit}".strip()


def table(result: dict[str, Any], figs: list[Figure]) -> str:
    """A fixed-width table of every figure, headed by the machine and the corpus."""
    mach, corp, opts = result["machine"], result["corpus"], result["options"]
    files = corp["files"]
    lines = [
        f"raytsystem bench  {result['started_at']}  mode={opts['mode']}",
        f"machine: {mach['cpu_model']}, {mach['cores']} cores ({mach['usable_cores']} usable), "
        f"{mach['memory_gib']} GiB, Python {mach['python']}, load average "
        f"{mach['load_average_at_start']} at start, {mach.get('load_average_at_end')} at end",
        f"code:    raytsystem {mach['raytsystem_version']} at {mach['git_commit']}"
        + (" + uncommitted src/ changes" if mach["src_uncommitted_changes"] else ""),
        f"corpus:  {corp['kind']}"
        + (f" from {corp['source']}" if corp.get("source") else f" seed {opts['seed']}")
        + f", {files} files, {corp['bytes'] / 1e6:.1f} MB"
        + (f" ({_langs(corp)})" if corp.get("files_by_language") else ""),
        "",
    ]
    w_label = max(len(f.label) for f in figs) + 2
    header = f"{'figure':<{w_label}}{'value':>16}  {'target':<9}{'status':<8}note"
    lines += [header, "-" * len(header)]
    section = None
    below_scale: set[int] = set()
    for f in figs:
        if f.section != section:
            section = f.section
            lines.append(f"[{section}]")
        status = f.status or ""
        if f.status and f.at_files and files < f.at_files:
            status += "*"
            below_scale.add(f.at_files)
        lines.append(
            f"{f.label:<{w_label}}{_value(f):>16}  {(f.target or ''):<9}{status:<8}{f.note}"
        )
    if "profile" in result["measurements"]:
        from .profile import render

        prof = result["measurements"]["profile"]
        lines += ["", f"where the time goes (cProfile, {prof['files']} files, one worker):"]
        for name in ("ingest", "verify"):
            lines.append(render(f"{name} ({prof[name]['wall_s']} s wall)", prof[name]))
    lines.append("")
    passed = sum(1 for f in figs if f.status == "PASS")
    judged = sum(1 for f in figs if f.status)
    lines.append(f"targets met: {passed}/{judged}")
    if below_scale:
        sizes = " or ".join(f"{n:,}" for n in sorted(below_scale))
        lines.append(f"* a target set for {sizes} files; this run has {files:,}: indicative only")
    return "\n".join(lines)


def _langs(corp: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in corp["files_by_language"].items())


def finish(result: dict[str, Any]) -> tuple[dict[str, Any], list[Figure]]:
    """The result with its judged figures added."""
    figs = figures(result)
    result["figures"] = [asdict(f) for f in figs]
    result["summary"] = {
        "targets_met": sum(1 for f in figs if f.status == "PASS"),
        "targets": sum(1 for f in figs if f.status),
        "failed": [f.label.strip() for f in figs if f.status == "FAIL"],
    }
    return result, figs


def write(result: dict[str, Any], out: Path | None = None) -> Path:
    """Save the result as `bench/results/<timestamp>-<files>.json` (or `out`)."""
    if out is None:
        stamp = result["started_at"].replace("-", "").replace(":", "")
        out = RESULTS_DIR / f"{stamp}-{result['corpus']['files']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return out
