"""Build a raytsystem workspace and an eval dataset from tldr-multilingual
(../shared/corpora/tldr-multilingual): task questions in Chinese, Japanese and Russian, and
off-topic questions that must be gaps.

    uv run python examples/tldr_eval.py --out /tmp/tldr
    uv run raytsystem --workspace /tmp/tldr ingest
    uv run raytsystem --workspace /tmp/tldr eval /tmp/tldr/tldr-multilingual.json

The corpus is copied under `docs/` of the workspace (about 2.4 MB, 4,745 pages), as
`bench.recall` does. The task questions are examples/tldr-multilingual-questions.json: 10 each in
Chinese, Japanese and Russian, each with its words and the forms a citation may hold them in
(`expect_words`: word precision@5 is the share of the first 5 citations holding every word)
and the pages that answer. Off-topic cases (`"expect": "gap"`): `--offtopic N` SciFact train
claims (../shared/corpora/scifact, read at run time) and the general questions of
examples/offtopic-general.json. tldr-pages and SciFact claims: CC BY 4.0.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from scifact_eval import general_questions, init_workspace, offtopic_cases, write_dataset

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parents[1] / "shared" / "corpora" / "tldr-multilingual"
DEFAULT_SCIFACT = DEFAULT_CORPUS.parent / "scifact"
QUESTIONS = HERE / "tldr-multilingual-questions.json"


def scifact_claims(scifact: Path, n: int) -> list[str]:
    """The first `n` SciFact train claims, in the file's order."""
    path = scifact / "claims_train.jsonl"
    if n <= 0 or not path.is_file():
        return []
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line)["claim"] for line, _ in zip(lines, range(n), strict=False)]


def build(corpus: Path, out: Path, scifact: Path = DEFAULT_SCIFACT, offtopic: int = 60) -> Path:
    init_workspace(out)
    shutil.copytree(corpus, out / "docs", dirs_exist_ok=True)
    cases = list(json.loads(QUESTIONS.read_text(encoding="utf-8"))["cases"])
    cases += offtopic_cases("offtopic-scifact", scifact_claims(scifact, offtopic))
    cases += offtopic_cases("offtopic-general", general_questions())
    return write_dataset(out, "tldr-multilingual", cases)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--offtopic", type=int, default=60, help="SciFact claims asked as off-topic cases"
    )
    args = parser.parse_args()
    if not (args.corpus / "pages.zh").is_dir():
        sys.exit(f"no tldr-multilingual corpus at {args.corpus}")
    print(build(args.corpus, args.out, args.scifact, args.offtopic))


if __name__ == "__main__":
    main()
