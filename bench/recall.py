"""Recall of single-term lookups on tldr-multilingual: a term's files found vs files holding it.

    uv run python -m bench.recall [--corpus DIR] [--keep DIR]

Ingests the corpus (default ../shared/corpora/tldr-multilingual) into a temporary workspace,
then, for each term, compares the files whose index row (`sources_fts`, after raytsystem's
text analysis) matches the term with the files whose decoded text contains it (case-folded
substring). It also reports what plain SQLite `unicode61` would find, for comparison.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

TERMS = [
    "压缩",
    "文件",
    "目录",
    "圧縮",
    "ファイル",
    "ディレクトリ",
    "архив",
    "файл",
    "каталог",
    "compress",
    "archive",
    "directory",
]
DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "tldr-multilingual"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=DEFAULT)
    parser.add_argument("--keep", type=Path, help="use (and keep) this workspace folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        sys.exit(f"no corpus at {args.corpus}")
    from raytsystem.pipeline.claim_scoring import match_expression
    from raytsystem.pipeline.query import parse_query
    from raytsystem.storage.index_file import index_path

    ws = args.keep or Path(tempfile.mkdtemp(prefix="raytrecall-"))
    try:
        if not (ws / "raytsystem.toml").exists():
            ws.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [sys.executable, "-m", "raytsystem", "init", str(ws)],
                check=True,
                capture_output=True,
            )
            shutil.copytree(args.corpus, ws / "docs", dirs_exist_ok=True)
        out = subprocess.run(
            [sys.executable, "-m", "raytsystem", "--workspace", str(ws), "ingest", "--json"],
            check=True,
            capture_output=True,
            text=True,
        )
        gen = json.loads(out.stdout)["generation"]
        index = sqlite3.connect(
            index_path(ws / ".raytsystem" / "indexes", gen["number"], gen["hash"])
        )
        files = {
            p.relative_to(ws).as_posix(): p.read_text(encoding="utf-8", errors="replace").casefold()
            for p in (ws / "docs").rglob("*.md")
        }
        plain = sqlite3.connect(":memory:")
        plain.execute("CREATE VIRTUAL TABLE t USING fts5(path UNINDEXED, body)")
        plain.executemany("INSERT INTO t VALUES (?, ?)", files.items())
        rows = []
        for term in TERMS:
            holding = {p for p, text in files.items() if term.casefold() in text}
            found = {
                r[0]
                for r in index.execute(
                    "SELECT d.source_path FROM sources_fts f JOIN docs d ON d.rowid = f.rowid "
                    "WHERE sources_fts MATCH ?",
                    (match_expression(parse_query(term)),),
                )
            }
            baseline = {
                r[0] for r in plain.execute("SELECT path FROM t WHERE t MATCH ?", (f'"{term}"',))
            }
            rows.append(
                {
                    "term": term,
                    "files_holding": len(holding),
                    "found": len(found & holding),
                    "found_elsewhere": len(found - holding),
                    "unicode61_found": len(baseline & holding),
                }
            )
        if args.json:
            print(json.dumps(rows, ensure_ascii=False, indent=1))
            return
        print(f"{'term':<12} {'holding':>8} {'found':>6} {'recall':>7} {'extra':>6}   unicode61")
        for r in rows:
            recall = r["found"] / r["files_holding"] if r["files_holding"] else 0
            base = r["unicode61_found"] / r["files_holding"] if r["files_holding"] else 0
            print(
                f"{r['term']:<12} {r['files_holding']:>8} {r['found']:>6} {recall:>7.2f} "
                f"{r['found_elsewhere']:>6}   {r['unicode61_found']} ({base:.2f})"
            )
    finally:
        if args.keep is None:
            shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    main()
