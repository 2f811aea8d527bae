"""Build a raytsystem workspace and an eval dataset from SciFact (../shared/corpora/scifact).

    uv run python examples/scifact_eval.py --out /tmp/scifact          # all 5,183 abstracts
    uv run raytsystem --workspace /tmp/scifact ingest
    uv run raytsystem --workspace /tmp/scifact eval /tmp/scifact/scifact-train.json

Each abstract becomes `docs/scifact/<doc_id>.md`: its title as the heading and its sentences
as one paragraph. Each train claim becomes a case whose query is the claim, whose expected
sources are the cited abstracts (BEIR's qrels) and, when the claim has rationales, whose
expected evidence is those sentences (`abstract[i]` of the cited abstract). `--docs N` keeps
the abstracts cited by the first claims plus distractors, for a quicker run.

Off-topic cases (`"expect": "gap"`) come with it: `--offtopic N` task sentences of the English
tldr pages (../shared/corpora/tldr-multilingual/pages/common, read at run time: spread evenly
over the sorted pages, the first example of each) and the general questions of
examples/offtopic-general.json. SciFact: Wadden et al., EMNLP 2020; claims CC BY 4.0,
abstracts ODC-By 1.0 (see the corpus's LICENSE.md); tldr-pages CC BY 4.0.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "scifact"
DEFAULT_TLDR = DEFAULT_CORPUS.parent / "tldr-multilingual"
GENERAL = Path(__file__).resolve().parent / "offtopic-general.json"


def general_questions() -> list[str]:
    return list(json.loads(GENERAL.read_text(encoding="utf-8"))["questions"])


def tldr_tasks(tldr: Path, n: int) -> list[str]:
    """The first example sentence of `n` English tldr pages spread evenly over them (a task
    such as "Create an archive and write it to a file"), without tldr's `[x]` key marks; a
    task already taken (alias pages share theirs) is passed over for the next page's."""
    pages = sorted((tldr / "pages" / "common").glob("*.md"))
    if not pages or n <= 0:
        return []
    n = min(n, len(pages))
    tasks: list[str] = []
    start = 0
    for i in range(n):
        for page in pages[max(start, i * len(pages) // n) :]:
            start = pages.index(page) + 1
            task = _first_task(page)
            if task and task not in tasks:
                tasks.append(task)
                break
    return tasks


def _first_task(page: Path) -> str | None:
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("- "):
            task = line[2:].rstrip(":").replace("[", "").replace("]", "").replace("`", "")
            return task.strip()
    return None


def offtopic_cases(prefix: str, questions: list[str]) -> list[dict[str, object]]:
    return [
        {"id": f"{prefix}-{i}", "query": q, "expect": "gap"} for i, q in enumerate(questions, 1)
    ]


def init_workspace(out: Path) -> None:
    """Make `out` a raytsystem workspace unless it is one."""
    if not (out / "raytsystem.toml").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "raytsystem", "init", str(out)], check=True, capture_output=True
        )


def write_dataset(out: Path, name: str, cases: list[dict[str, object]]) -> Path:
    """`out/<name>.json`: an eval dataset of `cases`, k 10, evidence_k 5, listed in the
    workspace's `.gitignore` so that ingest passes over it: a dataset in the corpus it
    measures holds every question, and off-topic questions would be answered from it."""
    dataset = out / f"{name}.json"
    ignore = out / ".gitignore"
    listed = ignore.read_text(encoding="utf-8").splitlines() if ignore.exists() else []
    if f"/{dataset.name}" not in listed:
        ignore.write_text("".join(f"{line}\n" for line in [*listed, f"/{dataset.name}"]))
    dataset.write_text(
        json.dumps(
            {"name": name, "k": 10, "evidence_k": 5, "cases": cases}, indent=1, ensure_ascii=False
        ),
        encoding="utf-8",
    )
    return dataset


def build(
    corpus: Path, out: Path, docs: int | None = None, tldr: Path = DEFAULT_TLDR, offtopic: int = 60
) -> Path:
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
    init_workspace(out)
    target = out / "docs" / "scifact"
    target.mkdir(parents=True, exist_ok=True)
    for doc_id, doc in abstracts.items():
        body = " ".join(s.strip() for s in doc["abstract"])
        (target / f"{doc_id}.md").write_text(
            f"# {doc['title'].strip()}\n\n{body}\n", encoding="utf-8"
        )
    cases: list[dict[str, object]] = []
    for c in claims:
        if not any(d in abstracts for d in c["cited_doc_ids"]):
            continue
        case: dict[str, object] = {
            "id": f"scifact-{c['id']}",
            "query": c["claim"],
            "expect_paths": sorted(
                {f"docs/scifact/{d}.md" for d in c["cited_doc_ids"] if d in abstracts}
            ),
        }
        evidence = [
            {
                "path": f"docs/scifact/{doc_id}.md",
                "text": abstracts[int(doc_id)]["abstract"][i].strip(),
            }
            for doc_id, sets in sorted(c["evidence"].items(), key=lambda kv: int(kv[0]))
            if int(doc_id) in abstracts
            for i in sorted({i for s in sets for i in s["sentences"]})
        ]
        if evidence:
            case["expect_evidence"] = evidence
        cases.append(case)
    cases += offtopic_cases("offtopic-tldr", tldr_tasks(tldr, offtopic))
    cases += offtopic_cases("offtopic-general", general_questions())
    return write_dataset(out, "scifact-train", cases)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--docs", type=int, help="keep about this many abstracts (default: all)")
    parser.add_argument("--tldr", type=Path, default=DEFAULT_TLDR, help="tldr-multilingual")
    parser.add_argument(
        "--offtopic", type=int, default=60, help="tldr tasks asked as off-topic cases"
    )
    args = parser.parse_args()
    if not (args.corpus / "corpus.jsonl").is_file():
        sys.exit(f"no SciFact corpus at {args.corpus}")
    print(build(args.corpus, args.out, args.docs, args.tldr, args.offtopic))


if __name__ == "__main__":
    main()
