"""The benchmark's own measurements: what it reports must be what happened."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap

import pytest

from bench.cli import Cli
from bench.instructions import _count, measure
from bench.measure import run_process
from bench.report import (
    _cpu_figures,
    _fig,
    _memory_figures,
    _plain_figures,
    _target_ratio,
    _value,
    _verify_figures,
)

# A child that burns CPU in two worker processes and reports what they used.
_POOL = textwrap.dedent(
    """
    import time
    from concurrent.futures import ProcessPoolExecutor

    def burn(seconds):
        started = time.process_time()
        while time.process_time() - started < seconds:
            pass
        return time.process_time() - started

    if __name__ == "__main__":
        with ProcessPoolExecutor(2) as pool:
            print(sum(pool.map(burn, [0.3, 0.3])))
    """
)


@pytest.mark.skipif(not hasattr(os, "wait4"), reason="no os.wait4 on this platform")
def test_run_process_counts_the_cpu_of_the_workers_it_waited_for(tmp_path):
    script = tmp_path / "pool.py"
    script.write_text(_POOL)
    result = run_process([sys.executable, str(script)]).check()
    workers = float(result.stdout)
    assert workers >= 0.6
    assert result.user_s is not None and result.system_s is not None
    assert result.user_s + result.system_s >= workers


_HOLD = textwrap.dedent(
    """
    import subprocess, sys, time
    def hold(mib):
        block = bytearray(mib * 1024 * 1024)  # touched: resident
        for i in range(0, len(block), 4096):
            block[i] = 1
        return block
    if sys.argv[1:] == ["child"]:
        kept = hold(64)
        time.sleep(1.5)
    else:
        kept = hold(96)
        subprocess.run([sys.executable, __file__, "child"], check=True)
    """
)


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="no smaps_rollup")
def test_the_tree_sampler_sees_what_a_child_and_its_own_child_hold(tmp_path):
    script = tmp_path / "hold.py"
    script.write_text(_HOLD)
    result = run_process([sys.executable, str(script)], sample_tree=True).check()
    assert result.tree_peak_pss_kib is not None
    assert result.tree_peak_pss_kib >= (96 + 60) * 1024  # both at once, while the child sleeps
    assert result.tree_peak_rss_sum_kib is not None
    # each process's own peak added: at least both blocks, and at least the PSS seen at once;
    # each counted once, and each its own (not the memory of the process that started it)
    assert result.tree_peak_rss_sum_kib >= max((96 + 64) * 1024, result.tree_peak_pss_kib)
    assert result.tree_peak_rss_sum_kib < (96 + 64 + 80) * 1024
    # without a sampler, neither is measured
    plain = run_process([sys.executable, "-c", "pass"]).check()
    assert plain.tree_peak_pss_kib is None and plain.tree_peak_rss_sum_kib is None


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="no /proc")
def test_a_sampled_child_reports_its_own_peak_not_its_starters(tmp_path):
    """Linux gives a child started by vfork and exec at least its starter's resident set as
    `ru_maxrss`; sampled, the child's own peak is what is reported."""
    held = bytearray(200 * 1024 * 1024)
    for i in range(0, len(held), 4096):
        held[i] = 1
    result = run_process(
        [sys.executable, "-c", "import time; time.sleep(0.3)"], sample_tree=True
    ).check()
    assert result.max_rss_kib < 100 * 1024, result
    assert result.tree_peak_rss_sum_kib is not None and result.tree_peak_rss_sum_kib < 100 * 1024


def test_the_memory_target_is_judged_on_every_process_when_it_was_measured():
    cold = {"max_rss_mib": 800.0, "tree_peak_pss_mib": 870.0, "tree_peak_rss_sum_mib": 1030.0}
    whole, largest, pss = _memory_figures(cold)
    assert (whole.value, whole.target, whole.status) == (1030.0, "< 1024", "FAIL")
    assert largest.target is None and pss.target is None
    # a result saved before the sum was measured: the largest process is judged, as it was
    old = _memory_figures({**cold, "tree_peak_rss_sum_mib": None})
    assert [(f.label, f.status) for f in old] == [
        ("ingest peak RSS (largest process)", "PASS"),
        ("ingest peak PSS (whole tree, sampled)", None),
    ]


def _runs(cpu: tuple[float, float] | None) -> tuple[dict, dict, dict]:
    """A cold ingest of 5 MB in 10 s, and parse baselines of 4 and 6 s for the same 5 MB."""
    cold: dict = {"wall_s": 10.0, "files": 1000, "bytes": 5_000_000}
    if cpu is not None:
        cold["cpu_user_s"], cold["cpu_system_s"] = cpu
    before = {"files": 1000, "bytes": 5_000_000, "cpu_seconds": 4.0}
    after = {"files": 1000, "bytes": 5_000_000, "cpu_seconds": 6.0}
    return cold, before, after


def test_cpu_figures_divide_the_ingest_work_by_the_parse_work():
    total, ratio = _cpu_figures(*_runs((18.0, 2.0)))
    assert total.value == 20.0
    assert "10% in the kernel" in total.note and "2.00 cores busy" in total.note
    # 20 s of CPU for the bytes parsing takes 5 s for (the mean of both runs): 4 x
    assert ratio.value == 4.0


def test_the_target_ratio_is_cut_from_unrounded_rates_never_rounded_up_to_pass():
    # A run of 2026-12-01: 1.14351 MB/s against parse runs of 2.3809 and 2.2119 MB/s, 0.49790...
    # Its rounded rates (1.144 against a mean of 2.29) made 0.49956, shown as 0.5: a PASS.
    cold = {"wall_s": 54.453, "bytes": 62_267_609, "mb_per_s": 1.144}
    before = {"seconds": 26.1529, "bytes": 62_267_609, "mb_per_s": 2.38}
    after = {"seconds": 28.1514, "bytes": 62_267_609, "mb_per_s": 2.21}
    assert _target_ratio(cold, before, after) == 0.4979
    # Results saved with only the first parse run: that run alone.
    assert _target_ratio(cold, before, None) == 0.4802
    # A run of exactly half the parse rate passes as exactly 0.5.
    half = {"wall_s": 20.0, "bytes": 5_000_000}
    parse = {"seconds": 10.0, "bytes": 5_000_000}
    assert _target_ratio(half, parse, parse) == 0.5
    # Binary floating point does not cut a ratio of exactly 0.57 to 0.5699.
    assert _target_ratio({"wall_s": 100.0, "bytes": 28_500_000}, parse, parse) == 0.57
    # The table shows a judged ratio with its four decimals: 0.5002 and 0.4996 are not "0.5".
    assert _value(_fig("ingest", "ratio", 0.5002, "×", ">= 0.5")) == "0.5002 ×"
    assert _value(_fig("ingest", "ratio", 0.4996, "×", ">= 0.5")) == "0.4996 ×"


def test_the_verify_target_is_judged_on_the_raw_bytes_over_the_re_hashing_step():
    # The bench's 10,000-file run of 2026-12-02 23:52 UTC (saved before `hash_seconds` was):
    # 120.8 MB of blobs re-hashed at 732.2 MB/s, so in 0.165 s; 62.3 MB of raw files.
    v = {
        "ok": True,
        "findings": 0,
        "wall_s": 66.852,
        "json_seconds": 66.533,
        "max_rss_mib": 341.1,
        "blob_bytes": 120_836_169,
        "blob_mb_per_s": 732.2,
        "raw_bytes": 62_267_609,
        "raw_mb_per_s_wall": 0.9,
    }
    figures = {f.label.strip(): f for f in _verify_figures(v, 56.784, 1315.3)}
    raw = figures["verify raw MB/s (corpus bytes ÷ re-hashing seconds)"]
    # Only the raw files' bytes count, though the step hashes the normalized texts too.
    assert raw.value == 377.3 and raw.status == "PASS"
    assert figures["every blob re-hashed MB/s (JSON)"].target is None
    assert figures["÷ single-thread BLAKE3 MB/s"].value == 0.557
    # The whole command is held to its time against the ingest's, not to a rate of bytes.
    ratio = figures["verify wall time ÷ cold ingest wall time"]
    assert ratio.value == 1.18 and ratio.status == "PASS"
    assert figures["whole command: corpus MB ÷ wall seconds"].target is None
    # A re-hashing step slower than the target fails it, and so does a slow re-derivation.
    slow = _verify_figures({**v, "hash_seconds": 0.312, "wall_s": 90.0}, 56.784, 1315.3)
    assert [f.status for f in slow if f.target] == ["PASS", "FAIL", "FAIL"]


def test_plain_markdown_it_is_shown_beside_the_adapters_parser_without_a_target():
    cold = {"wall_s": 50.0, "bytes": 60_000_000}
    after = {"seconds": 24.0, "cpu_seconds": 24.0, "bytes": 60_000_000}
    plain = {"seconds": 20.0, "cpu_seconds": 20.0, "bytes": 60_000_000, "mb_per_s": 3.0}
    shown, ratio = _plain_figures(cold, after, plain)
    assert shown.value == 3.0 and "1.2 × its CPU per byte" in shown.note
    # 1.2 MB/s of ingest against 3.0 MB/s of plain parsing, for comparison only.
    assert ratio.value == 0.4 and ratio.target is None and ratio.status is None
    # Results saved before the plain parse was timed show neither.
    assert _plain_figures(cold, after, None) == []


def test_results_saved_without_cpu_figures_report_none():
    assert _cpu_figures(*_runs(None)) == []


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instruction_counts_follow_the_work_done(tmp_path):
    cli = Cli(tmp_path, None)
    idle, _ = _count([sys.executable, "-c", "pass"], cli)
    busy, _ = _count([sys.executable, "-c", "sum(range(2_000_000))"], cli)
    assert idle > 1_000_000  # an interpreter's start-up alone
    assert busy > idle + 10_000_000  # two million additions, several instructions each
    # A child the command forks is counted with it: its work is the command's.
    forked, _ = _count(
        [
            sys.executable,
            "-c",
            "import os\nif not os.fork():\n    sum(range(2_000_000))\n    os._exit(0)\nos.wait()",
        ],
        cli,
    )
    assert forked > idle + 10_000_000


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instructions_measure_an_ingest_of_every_file_of_any_folder(tmp_path):
    # Paths the default include globs would not take: the tool puts them under docs/.
    source = tmp_path / "pages" / "common"
    source.mkdir(parents=True)
    # Only the last file opens the secrets screen's gate (a keyword), and it is measured: the
    # screen imports detect-secrets for the first such file, once per process, which the
    # tool's own lead file (`SCREENED`) makes both runs pay, not the measured files.
    for name in "abcdefghi":
        (source / f"{name}.md").write_text(f"# {name}\n\nOne sentence here. Another one.\n")
    (source / "j.md").write_text("# J\n\nThe password policy is in the handbook.\n")
    result = measure(tmp_path / "pages", 8)
    assert (result["files"], result["lead_files"]) == (8, 2)
    assert result["parse_instructions_per_file"] > 0
    assert result["ingest_instructions_per_file"] > result["parse_instructions_per_file"]
    # Importing and configuring detect-secrets costs some 350 million instructions even from
    # compiled bytecode (45 million for each of these 8 files); a file of two sentences, 3.
    assert result["ingest_instructions_per_file"] < 20_000_000


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no memfd")
def test_the_tree_sampler_counts_memory_files_once_though_two_processes_hold_them():
    """A memfd's pages are in no process's RSS: the sum adds the most the files held at once,
    each file once however many processes hold it (a forked child shares its parent's)."""
    script = (
        "import os, time\n"
        "fd = os.memfd_create('held')\n"
        "for i in range(48):\n"
        "    os.pwrite(fd, b'x' * (1024 * 1024), i * 1024 * 1024)\n"
        "if os.fork() == 0:\n"
        "    time.sleep(0.6)\n"
        "    os._exit(0)\n"
        "time.sleep(0.6)\n"
        "os.wait()\n"
    )
    result = run_process([sys.executable, "-c", script], sample_tree=True).check()
    assert result.tree_peak_memory_files_kib == 48 * 1024
    assert result.tree_peak_rss_sum_kib is not None
    # the processes' own peaks hold less than the file: the sum has it through the files alone
    own = result.tree_peak_rss_sum_kib - result.tree_peak_memory_files_kib
    assert 2 * 4 * 1024 < own < 48 * 1024
