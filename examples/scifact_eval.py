"""Build a raytsystem workspace and an eval dataset from SciFact (../shared/corpora/scifact).

    uv run python examples/scifact_eval.py --out /tmp/scifact          # all 5,183 abstracts
    uv run raytsystem --workspace /tmp/scifact ingest
    uv run raytsystem --workspace /tmp/scifact eval /tmp/scifact/scifact-train.json

Each abstract becomes `docs/scifact/<doc_id>.md`: its title as the heading and its sentences
as one paragraph. Each train claim becomes a case whose query is the claim and whose expected
sources are the cited abstracts (BEIR's qrels). `--docs N` keeps the abstracts cited by the
first claims plus distractors, for a quicker run. SciFact: Wadden et al., EMNLP 2020; claims
CC BY 4.0, abstracts ODC-By 1.0 (see the corpus's LICENSE.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "scifact"


def build(corpus: Path, out: Path, docs: int | None = None) -> Path:
    claims = [json.loads(line) for line in (corpus / "claims_train.jsonl").open(encoding="utf-8")]
    abstracts = {}
    for line in (corpus / "corpus.jsonl").open(encoding="utf-8"):
        doc = json.loads(line)
        abstracts[doc["doc_id"]] = doc
    if docs is not None:
        keep: list[int] = []
        chosen_claims = []
        for claim in claims:
            cited = [d for d in claim["cited_doc_ids"] if d in abstracts]
            if len(set(keep) | set(cited)) > docs // 2:
                break
            keep.extend(d for d in cited if d not in keep)
            chosen_claims.append(claim)
        claims = chosen_claims
        distractors = [d for d in sorted(abstracts) if d not in set(keep)][: docs - len(keep)]
        abstracts = {d: abstracts[d] for d in keep + distractors}
    if not (out / "raytsystem.toml").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "raytsystem", "init", str(out)], check=True, capture_output=True
        )
    target = out / "docs" / "scifact"
    target.mkdir(parents=True, exist_ok=True)
    for doc_id, doc in abstracts.items():
        body = " ".join(s.strip() for s in doc["abstract"])
        (target / f"{doc_id}.md").write_text(
            f"# {doc['title'].strip()}\n\n{body}\n", encoding="utf-8"
        )
    cases = [
        {
            "id": f"scifact-{c['id']}",
            "query": c["claim"],
            "expect_paths": sorted(
                {f"docs/scifact/{d}.md" for d in c["cited_doc_ids"] if d in abstracts}
            ),
        }
        for c in claims
        if any(d in abstracts for d in c["cited_doc_ids"])
    ]
    dataset = out / "scifact-train.json"
    dataset.write_text(
        json.dumps({"name": "scifact-train", "k": 10, "cases": cases}, indent=1), encoding="utf-8"
    )
    return dataset


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--docs", type=int, help="keep about this many abstracts (default: all)")
    args = parser.parse_args()
    if not (args.corpus / "corpus.jsonl").is_file():
        sys.exit(f"no SciFact corpus at {args.corpus}")
    print(build(args.corpus, args.out, args.docs))


if __name__ == "__main__":
    main()
