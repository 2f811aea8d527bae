"""A deterministic synthetic Markdown corpus, shaped like a team's docs and knowledge folders.

`generate(root, CorpusSpec(files=1000, seed=1))` writes the same bytes on every machine for
the same spec: the plan (paths, languages, sizes) comes from one seeded generator and each
file's text from a generator seeded with (seed, file number), never from hash or set order.

Shape: about 80% English, 10% Russian, 5% Chinese, 5% Japanese; front matter in about a third
of the files; `#`/`##`/`###` headings; paragraphs of 2-6 sentences (hard-wrapped in some
files); bullet and numbered lists (some nested); tables; fenced code blocks; block quotes.
Files sit in nested folders under `docs/` and `knowledge/` (never `knowledge/manual/`, whose
notes have their own grammar). Most files are 1-8 KB, a few 50-200 KB.

Run it alone with `uv run python -m bench.corpus OUT --files N [--target-mb MB] [--seed S]`.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from . import prose as prose_mod
from . import vocab
from .prose import Prose

LANGUAGE_SHARES: Final = (("ru", 0.10), ("zh", 0.05), ("ja", 0.05))  # the rest is English
DOC_AREAS: Final = (
    "api",
    "guides",
    "architecture",
    "operations",
    "runbooks",
    "reference",
    "onboarding",
    "security",
    "releases",
    "product",
)
KNOWLEDGE_AREAS: Final = ("teams", "decisions", "glossary", "postmortems", "howto", "faq")
SUBFOLDERS: Final = (
    "billing",
    "search",
    "storage",
    "auth",
    "payments",
    "ingest",
    "mobile",
    "web",
    "data",
    "infra",
    "legacy",
    "v2",
)
CODE_LANGUAGES: Final = ("python", "bash", "yaml", "json", "sql", "")
MIN_FILE_BYTES: Final = 200


@dataclass(frozen=True)
class CorpusSpec:
    """What to generate: how many files, optionally how many MB in total, and the seed."""

    files: int = 1000
    seed: int = 1
    target_mb: float | None = None


@dataclass(frozen=True)
class FilePlan:
    index: int
    path: str
    language: str
    target_bytes: int


@dataclass
class CorpusStats:
    """What was written: counts and bytes, by language, and how long generation took."""

    files: int = 0
    bytes: int = 0
    largest_bytes: int = 0
    files_by_language: dict[str, int] = field(default_factory=dict)
    bytes_by_language: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _language(rng: random.Random) -> str:
    r = rng.random()
    for code, share in LANGUAGE_SHARES:
        if r < share:
            return code
        r -= share
    return "en"


def _size(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.015:
        return rng.randint(50_000, 200_000)  # the few big ones: specs, exported wikis
    if r < 0.06:
        return rng.randint(8_000, 20_000)
    if r < 0.10:
        return rng.randint(400, 1_000)
    return int(1_000 * 8 ** rng.random())  # log-uniform 1-8 KB


def _folder(rng: random.Random, language: str) -> str:
    if rng.random() < 0.25:
        parts = ["knowledge", rng.choice(KNOWLEDGE_AREAS)]
    else:
        parts = ["docs"]
        if language != "en" and rng.random() < 0.5:
            parts += ["i18n", language]
        parts.append(rng.choice(DOC_AREAS))
    for _ in range(rng.choice((0, 1, 1, 2))):
        parts.append(rng.choice(SUBFOLDERS))
    return "/".join(parts)


def plan(spec: CorpusSpec, words: Prose) -> list[FilePlan]:
    """Paths, languages and target sizes of every file, from the seed alone."""
    if spec.files < 1:
        raise ValueError("the corpus needs at least one file")
    rng = random.Random(f"plan:{spec.seed}")
    rows = []
    for i in range(spec.files):
        language = _language(rng)
        folder = _folder(rng, language)
        slug = "-".join(w.lower() for w in words.phrase(rng, rng.randint(1, 3)).split())
        rows.append((i, f"{folder}/{slug}-{i:05d}.md", language, _size(rng)))
    scale = 1.0
    if spec.target_mb is not None:
        scale = spec.target_mb * 1e6 / sum(r[3] for r in rows)
    return [
        FilePlan(i, p, lang, max(MIN_FILE_BYTES, int(size * scale))) for i, p, lang, size in rows
    ]


# --- blocks -------------------------------------------------------------------------------


def _wrap(text: str, width: int) -> str:
    lines: list[str] = []
    line: list[str] = []
    length = 0
    for word in text.split(" "):
        if line and length + 1 + len(word) > width:
            lines.append(" ".join(line))
            line, length = [], 0
        length += len(word) + (1 if line else 0)
        line.append(word)
    lines.append(" ".join(line))
    return "\n".join(lines)


def paragraph(rng: random.Random, p: Prose, wrap: int | None) -> str:
    sep = "" if p.cjk else " "
    text = sep.join(p.sentence(rng) for _ in range(rng.randint(2, 6)))
    return _wrap(text, wrap) if wrap and not p.cjk else text


def bullets(rng: random.Random, p: Prose, numbered: bool) -> str:
    lines = []
    bullet = rng.choice("-*")  # one marker per list: a new marker would start a new list
    for n in range(1, rng.randint(2, 7) + 1):
        marker = f"{n}." if numbered else bullet
        item = p.sentence(rng) if rng.random() < 0.7 else p.phrase(rng, rng.randint(1, 4))
        lines.append(f"{marker} {item}")
        if rng.random() < 0.12:
            indent = " " * (len(marker) + 1)
            lines.extend(f"{indent}- {p.sentence(rng)}" for _ in range(rng.randint(1, 3)))
    return "\n".join(lines)


def table(rng: random.Random, p: Prose) -> str:
    columns = rng.randint(2, 5)
    header = [p.phrase(rng, rng.randint(1, 2)).capitalize() for _ in range(columns)]
    rows = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * columns) + "|"]
    for _ in range(rng.randint(2, 8)):
        cells = []
        for _ in range(columns):
            kind = rng.randrange(5)
            if kind == 0:
                cells.append(prose_mod.number(rng))
            elif kind == 1:
                cells.append(rng.choice(("yes", "no", "n/a", "—")))
            elif kind == 2:
                cells.append(p.sentence(rng))
            else:
                cells.append(p.phrase(rng, rng.randint(1, 3)))
        rows.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(rows)


def _name(rng: random.Random, latin: Prose) -> str:
    """A content word for identifiers and tags (function words make odd names)."""
    while True:
        word = latin.phrase(rng, 1)
        if word not in vocab.ENGLISH_FUNCTION:
            return word


def code_block(rng: random.Random, latin: Prose) -> str:
    lang = rng.choice(CODE_LANGUAGES)
    names = [_name(rng, latin) for _ in range(6)]
    lines: list[str] = []
    for i in range(rng.randint(3, 18)):
        a, b, c = names[i % 6], names[(i + 1) % 6], names[(i + 2) % 6]
        if lang == "python":
            lines.append(
                rng.choice(
                    (
                        f"def {a}({b}):",
                        f"    return {b}.{c}({rng.randint(0, 9)})",
                        f"{a} = {b}[{c!r}]",
                        f"# {latin.sentence(rng)}",
                    )
                )
            )
        elif lang == "bash":
            lines.append(
                rng.choice(
                    (
                        f"$ raytsystem {a} --{b}",
                        f"export {a.upper()}={c}",
                        f"cd {a}/{b} && make {c}",
                    )
                )
            )
        elif lang == "yaml":
            lines.append(rng.choice((f"{a}:", f"  {b}: {rng.randint(0, 500)}", f"  - {c}")))
        elif lang == "json":
            lines.append(f'  "{a}": {{"{b}": "{c}", "n": {rng.randint(0, 99)}}},')
        elif lang == "sql":
            lines.append(f"SELECT {a}, {b} FROM {c} WHERE {a} > {rng.randint(0, 99)};")
        else:
            lines.append(f"{a} {b} {c}")
    return "\n".join([f"```{lang}", *lines, "```"])


def quote(rng: random.Random, p: Prose) -> str:
    sep = "" if p.cjk else " "
    body = sep.join(p.sentence(rng) for _ in range(rng.randint(1, 3)))
    lead = "**Note:** " if (not p.cjk and rng.random() < 0.3) else ""
    return "> " + lead + body


def front_matter(rng: random.Random, p: Prose, latin: Prose) -> str:
    tags = ", ".join(_name(rng, latin) for _ in range(rng.randint(1, 4)))
    title = p.title(rng).replace('"', "")
    date = f"20{rng.randint(18, 26)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    owner = f"team-{_name(rng, latin)}"
    return f'---\ntitle: "{title}"\ntags: [{tags}]\nowner: {owner}\nupdated: {date}\n---'


# --- documents ----------------------------------------------------------------------------


def document(item: FilePlan, seed: int, langs: dict[str, Prose]) -> str:
    """The Markdown text of one planned file, from (seed, file number) alone."""
    rng = random.Random(f"file:{seed}:{item.index}")
    p, latin = langs[item.language], langs["en"]
    wrap = rng.choice((None, None, 80, 100)) if not p.cjk else None
    blocks: list[str] = []
    size = 0

    def put(block: str) -> None:
        nonlocal size
        blocks.append(block)
        size += len(block.encode("utf-8")) + 2

    if rng.random() < 0.35:
        put(front_matter(rng, p, latin))
    put(f"# {p.title(rng)}")
    put(paragraph(rng, p, wrap))
    while size < item.target_bytes:
        put(f"## {p.title(rng)}")
        for _ in range(rng.randint(1, 5)):
            kind = rng.choices(
                ("para", "bullets", "numbered", "table", "code", "quote", "sub"),
                weights=(45, 15, 8, 8, 10, 7, 7),
            )[0]
            if kind == "para":
                put(paragraph(rng, p, wrap))
            elif kind in ("bullets", "numbered"):
                put(bullets(rng, p, numbered=kind == "numbered"))
            elif kind == "table":
                put(table(rng, p))
            elif kind == "code":
                put(code_block(rng, latin))
            elif kind == "quote":
                put(quote(rng, p))
            else:
                put(f"### {p.title(rng)}")
                put(paragraph(rng, p, wrap))
            if size >= item.target_bytes:
                break
    return "\n\n".join(blocks) + "\n"


def generate(root: Path, spec: CorpusSpec) -> CorpusStats:
    """Write the corpus of `spec` under `root` (docs/ and knowledge/); return what was written."""
    started = time.perf_counter()
    langs = prose_mod.languages(spec.seed)
    stats = CorpusStats()
    files: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    made: set[Path] = set()
    for item in plan(spec, langs["en"]):
        data = document(item, spec.seed, langs).encode("utf-8")
        path = root / item.path
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_bytes(data)
        files[item.language] += 1
        sizes[item.language] += len(data)
        stats.bytes += len(data)
        stats.largest_bytes = max(stats.largest_bytes, len(data))
    stats.files = spec.files
    stats.files_by_language = dict(sorted(files.items()))
    stats.bytes_by_language = dict(sorted(sizes.items()))
    stats.seconds = round(time.perf_counter() - started, 3)
    return stats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.corpus",
        description="Write a deterministic synthetic Markdown corpus into OUT (docs/, knowledge/).",
    )
    parser.add_argument("out", type=Path, help="folder to write into (created if missing)")
    parser.add_argument("--files", type=int, default=1000, help="number of files (default 1000)")
    parser.add_argument("--target-mb", type=float, help="scale file sizes to about this many MB")
    parser.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    args = parser.parse_args(argv)
    stats = generate(args.out, CorpusSpec(args.files, args.seed, args.target_mb))
    print(
        f"{stats.files} files, {stats.bytes / 1e6:.1f} MB "
        f"(largest {stats.largest_bytes / 1e3:.0f} KB) in {stats.seconds:.1f}s: "
        + ", ".join(f"{k} {v}" for k, v in stats.files_by_language.items())
    )


if __name__ == "__main__":
    main()
