"""Invariants of the per-file path: decoded text -> normalization -> segments -> claims/evidence.

What every normalization must satisfy, whatever the input (checked by `check_file`):

- segments: `normalized.text[start:end]` is the segment text, never empty and with no leading or
  trailing whitespace; the normalized text is exactly the segment texts joined by "\\n\\n" (so
  spans are ordered and never overlap); each segment row records the SHA-256 of its text
  (re-computed here with hashlib, not with the project's helper); kinds are known ones;
- line spans: a segment with k newlines spans k + 1 raw lines, inside the file, and the k-th line
  of the segment is raw line `line_start + k`: every word of it (runs of letters and digits of
  length >= 2, so markup characters such as `_`, `*` and backquotes never matter) occurs in that
  raw line, once the markup characters are removed from the raw line too;
- evidence: one per claim, naming the segment row, with a span inside a prose segment, excerpt
  SHA-256 re-computed with hashlib, statement equal to the whitespace-collapsed (NFC) excerpt;
  the evidence spans of a segment are ordered, disjoint, trimmed, and together cover every
  letter and digit of the segment (no prose is silently left out of the claims);
- the blobs: the raw blob holds the exact file bytes, the normalized-text blob the exact text;
- identity: the same bytes give the same segment, claim and evidence IDs; another adapter
  version or config gives another normalization ID (and so other segment IDs).

Inputs: hand-written documents, Hypothesis-generated Markdown built from blocks (headings,
styled paragraphs, nested lists, quotes, tables, fenced code, footnotes, front matter, CRLF/CR
line endings, Latin, Cyrillic and CJK text), plain text, and every page of the
tldr-multilingual corpus (`test_every_tldr_multilingual_page_keeps_the_invariants`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import itertools
import json
import os
import re
import tempfile
import time
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import CORPORA, process_one, store_for
from hypothesis import given
from hypothesis import strategies as st

from raytsystem.ids import NEWEST
from raytsystem.model.adapters import (
    PROSE_KINDS,
    SEGMENT_KINDS,
    Adapter,
    adapter_for,
    media_type_for,
)
from raytsystem.model.adapters.markdown import ADAPTER as MARKDOWN
from raytsystem.model.adapters.markdown import normalize_markdown
from raytsystem.model.adapters.plaintext import ADAPTER as PLAINTEXT
from raytsystem.model.claims import segment_rows
from raytsystem.model.objects import chain_ids, source_id_for
from raytsystem.model.text import decode
from raytsystem.pipeline.files import FileResult

IDS = chain_ids(NEWEST)


def normalization_id_for(revision_id: str, adapter: Adapter) -> str:
    return IDS.normalization_id(revision_id, adapter.name, adapter.version, adapter.config_hash)


MAX_BYTES = 10 * 1024 * 1024
CORPUS_BUDGET_SECONDS = 60.0

_WORD = re.compile(r"[^\W_]{2,}")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")
# Markup that may vanish from the middle of a word: `**bo**ld`, `` `x`s ``, `\_`, `a<b>c`,
# `[x](url)y`. The raw line is also compared without it, so joined words still match.
_MARKUP = re.compile(r"[*_`~\\\[\]|]")
_TAG = re.compile(r"<[^<>]*>")
_DESTINATION = re.compile(r"\]\([^()]*\)")


# --- the checker -------------------------------------------------------------------------------


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _raw_line_forms(line: str) -> str:
    """A raw line as it may be read: itself, without markup characters, with entities decoded."""
    forms = [line]
    for cut in (line, _TAG.sub("", line), _DESTINATION.sub("", line)):
        bare = _MARKUP.sub("", cut)
        forms += [bare, html.unescape(bare)]
    return "\n".join(forms)


def check_file(data: bytes, result: FileResult, raw_root: Path) -> None:
    """Assert every invariant of the module docstring on one processed file."""
    assert result.outcome == "new", (result.outcome, result.finding)
    assert result.normalization["status"] == "ok", result.normalization
    nid = str(result.normalization["id"])
    store = store_for(raw_root)
    text = store.get(str(result.normalization["text_blob"])).decode("utf-8")
    raw_lines = decode(data).split("\n")
    assert store.get(result.blob) == data
    assert store.get(str(result.normalization["text_blob"])).decode("utf-8") == text
    assert result.normalization["segment_count"] == len(result.segments)
    assert result.normalization["text_length"] == len(text)

    rows = result.segment_rows()
    assert [r.ordinal for r in rows] == list(range(len(rows)))
    # The rows are exactly the adapter's drafts (the drafts are what the adapter contract is about).
    drafts = adapter_for(media_type_for(result.path)).run(decode(data))
    assert drafts.text == text
    assert [
        (d.kind, d.start, d.end, d.line_start, d.line_end, list(d.heading_path))
        for d in drafts.segments
    ] == [
        (r.kind, r.start, r.end, r.line_start, r.line_end, json.loads(r.heading_path)) for r in rows
    ]
    assert text == "\n\n".join(text[r.start : r.end] for r in rows)
    previous_end = -2
    for row in rows:
        body = text[row.start : row.end]
        where = f"segment {row.ordinal} ({row.kind}) {body[:80]!r}"
        assert row.normalization_id == nid
        assert row.kind in SEGMENT_KINDS, where
        assert body, where
        assert body == body.strip(), where
        assert row.start == previous_end + 2, where
        previous_end = row.end
        assert row.sha256 == _sha256(body), where
        assert 1 <= row.line_start <= row.line_end <= len(raw_lines), where
        assert row.line_end - row.line_start == body.count("\n"), where
        for k, line in enumerate(body.split("\n")):
            raw = _raw_line_forms(raw_lines[row.line_start - 1 + k])
            missing = [w for w in _WORD.findall(line) if w not in raw]
            assert not missing, (
                f"{where}: line {k} is said to be raw line {row.line_start + k} "
                f"({raw_lines[row.line_start - 1 + k][:120]!r}) but {missing[:5]} are not there"
            )

    by_id = {r.id: r for r in rows}
    assert len(by_id) == len(rows), "segment IDs must be unique within a normalization"
    spans: dict[str, list[tuple[int, int]]] = {r.id: [] for r in rows}
    claim_ids = set()
    for claim, evidence in result.claim_pairs():
        assert claim.id not in claim_ids, "one evidence per extracted claim"
        claim_ids.add(claim.id)
        assert evidence.claim_id == claim.id
        assert claim.source_id == source_id_for(result.path)
        assert claim.authority == "extracted"
        assert evidence.role == "statement"
        seg = by_id[evidence.segment_id]
        assert seg.kind in PROSE_KINDS, (seg.kind, claim.statement)
        assert seg.start <= evidence.start < evidence.end <= seg.end, (seg, evidence)
        excerpt = text[evidence.start : evidence.end]
        assert evidence.sha256 == _sha256(excerpt)
        assert excerpt == excerpt.strip()
        assert claim.statement == unicodedata.normalize("NFC", " ".join(excerpt.split()))
        assert _LETTER_OR_DIGIT.search(excerpt), excerpt
        spans[seg.id].append((evidence.start, evidence.end))
    for row in rows:
        if row.kind not in PROSE_KINDS:
            assert not spans[row.id], f"{row.kind} segments are not claims"
            continue
        own = spans[row.id]
        assert own == sorted(own)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(own)), own
        covered = set()
        for s, e in own:
            covered.update(range(s, e))
        lost = [
            text[i]
            for i in range(row.start, row.end)
            if i not in covered and _LETTER_OR_DIGIT.match(text[i])
        ]
        assert not lost, f"segment {row.ordinal}: letters {lost[:10]} are in no claim"


# --- running the real per-file path ------------------------------------------------------------


# Blob writes fsync; on a RAM disk that costs nothing, and durability is not what is tested here.
_RAM = Path("/dev/shm")
SCRATCH_PARENT = str(_RAM) if _RAM.is_dir() and os.access(_RAM, os.W_OK) else None


@contextmanager
def scratch() -> Iterator[Path]:
    """A fresh directory (Hypothesis examples cannot share the function-scoped tmp_path)."""
    with tempfile.TemporaryDirectory(prefix="raytsystem-inv-", dir=SCRATCH_PARENT) as name:
        yield Path(name)


def process_bytes(root: Path, rel: str, data: bytes) -> FileResult:
    disk = root / "ws" / rel
    disk.parent.mkdir(parents=True, exist_ok=True)
    disk.write_bytes(data)
    return process_one(rel, disk, root / "_raw", MAX_BYTES)  # type: ignore[no-any-return]


def check_bytes(data: bytes, rel: str = "docs/page.md") -> FileResult:
    with scratch() as root:
        result = process_bytes(root, rel, data)
        check_file(data, result, root / "_raw")
        return result


def identities(result: FileResult) -> tuple[list[str], list[str], list[str]]:
    return (
        [s.id for s in result.segment_rows()],
        [c.id for c, _ in result.claim_pairs()],
        [e.id for _, e in result.claim_pairs()],
    )


# --- hand-written documents --------------------------------------------------------------------

SAMPLE = (
    "---\ntitle: Payments\ntags: [a, b]\n---\n"
    "# Payments\n\n"
    "Retries use **exponential** backoff. The limit is _five_ attempts, see `retry.py`.\n"
    "A [guide](https://example.com/a.b) explains it. Версия 2.0 вышла.\n\n"
    "## Списки\n\n"
    "- Первый пункт.\n  - Вложенный пункт. Второе предложение.\n"
    "1. One.\n2. Two [[Note|alias]].\n\n"
    "> Quoted text here.\n> Still quoted.\n\n"
    "| Name | Value |\n|------|-------|\n| `x` | 3.11 |\n| 名前 | 値です。 |\n\n"
    "```python\nprint('no claim')\n```\n\n"
    "    indented code\n\n"
    "中文句子。第二句！第三句？\n\n"
    "Ends with a note[^n].\n\n[^n]: The footnote text. Two sentences.\n"
)


def test_sample_document_keeps_every_invariant() -> None:
    result = check_bytes(SAMPLE.encode())
    kinds = {s.kind for s in result.segment_rows()}
    assert {"front_matter", "heading", "paragraph", "list_item", "quote", "table_header"} <= kinds
    assert {"table_row", "code", "footnote"} <= kinds
    assert len(result.claims) >= 15


@pytest.mark.parametrize("ending", ["\r\n", "\r"], ids=["crlf", "cr"])
def test_crlf_and_cr_files_have_the_same_text_and_lines_as_lf(ending: str) -> None:
    lf = check_bytes(SAMPLE.encode())
    other = check_bytes(SAMPLE.replace("\n", ending).encode())
    assert [(s.start, s.end, s.line_start, s.line_end, s.sha256) for s in other.segment_rows()] == [
        (s.start, s.end, s.line_start, s.line_end, s.sha256) for s in lf.segment_rows()
    ]
    assert [c.statement for c, _ in other.claim_pairs()] == [
        c.statement for c, _ in lf.claim_pairs()
    ]


def test_same_bytes_give_identical_segment_claim_and_evidence_ids() -> None:
    data = SAMPLE.encode()
    with scratch() as a, scratch() as b:
        first = process_bytes(a, "docs/page.md", data)
        second = process_bytes(b, "docs/page.md", data)
    assert first.normalization["id"] == second.normalization["id"]
    assert identities(first) == identities(second)
    assert all(identities(first))


def test_another_path_gives_other_claim_ids_but_the_same_excerpts() -> None:
    data = SAMPLE.encode()
    with scratch() as root:
        first = process_bytes(root, "docs/a.md", data)
        second = process_bytes(root, "docs/b.md", data)
    assert first.blob == second.blob
    assert not set(identities(first)[1]) & set(identities(second)[1])
    assert [e.sha256 for _, e in first.claim_pairs()] == [e.sha256 for _, e in second.claim_pairs()]


def test_another_adapter_version_or_config_gives_another_normalization_id() -> None:
    revision = IDS.revision_id(source_id_for("docs/page.md"), "ab" * 32)
    base = normalization_id_for(revision, MARKDOWN)
    bumped = normalization_id_for(revision, dataclasses.replace(MARKDOWN, version=2))
    configured = normalization_id_for(revision, dataclasses.replace(MARKDOWN, config={"x": 1}))
    assert base == normalization_id_for(revision, MARKDOWN)
    assert len({base, bumped, configured}) == 3
    # ...and so every segment of the same text gets another ID too.
    normalized = normalize_markdown(decode(SAMPLE.encode()))
    old = {r.id for r in segment_rows(IDS, base, normalized)}
    new = {r.id for r in segment_rows(IDS, bumped, normalized)}
    assert old and not old & new


def test_process_file_uses_the_adapter_it_records() -> None:
    with scratch() as root:
        md = process_bytes(root, "docs/page.md", SAMPLE.encode())
        txt = process_bytes(root, "docs/page.txt", SAMPLE.encode())
    assert (md.normalization["adapter"], md.normalization["adapter_version"]) == (
        MARKDOWN.name,
        MARKDOWN.version,
    )
    assert txt.normalization["adapter"] == PLAINTEXT.name
    assert md.normalization["id"] != txt.normalization["id"]


@pytest.mark.parametrize(
    "data",
    [
        b"See [the guide](\nhttps://example.com/guide) for details.\n",
        b'See [the guide](https://example.com "a\ntitle") for details.\n',
        b"See [the guide][my\nlabel] for details.\n\n[my label]: https://example.com\n",
        b'An ![image](chart.png "multi\nline title") after it.\n',
    ],
    ids=["destination", "title", "reference-label", "image-title"],
)
def test_link_markup_across_lines_keeps_the_line_mapping(data: bytes) -> None:
    check_bytes(data)


def test_code_span_across_lines_keeps_the_line_mapping() -> None:
    check_bytes(b"Run `make\ntest` first.\nThen deploy it.\n")


# --- Hypothesis: Markdown built from blocks ---------------------------------------------------

LATIN = ("retry", "payment", "limit", "worker", "queue", "backoff", "server", "cache", "token")
CYRILLIC = ("платёж", "очередь", "лимит", "сервер", "повтор", "задача", "ключ", "версия")
CJK = ("支付", "队列", "重试", "服务器", "缓存", "設定", "キュー", "再試行")


@st.composite
def words(draw: st.DrawFn) -> list[str]:
    script = draw(st.sampled_from(("latin", "cyrillic", "cjk")))
    pool = {"latin": LATIN, "cyrillic": CYRILLIC, "cjk": CJK}[script]
    chosen = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=6))
    return ["".join(chosen)] if script == "cjk" else chosen


@st.composite
def styled_word(draw: st.DrawFn, word: str) -> str:
    style = draw(st.sampled_from(("plain", "plain", "bold", "em", "code", "link", "image", "wiki")))
    return {
        "plain": word,
        "bold": f"**{word}**",
        "em": f"_{word}_",
        "code": f"`{word}`",
        "link": f"[{word}](https://example.com/{len(word)})",
        "image": f"![{word}](img/{len(word)}.png)",
        "wiki": f"[[{word}]]" if len(word) % 2 else f"[[target|{word}]]",
    }[style]


@st.composite
def sentence(draw: st.DrawFn) -> str:
    ws = draw(words())
    styled = [draw(styled_word(w)) for w in ws]
    joined = "".join(styled) if len(ws) == 1 and not ws[0].isascii() else " ".join(styled)
    end = "。" if not joined.isascii() and draw(st.booleans()) else draw(st.sampled_from(".!?"))
    return joined[:1].upper() + joined[1:] + end


@st.composite
def prose_lines(draw: st.DrawFn, max_lines: int = 3) -> list[str]:
    lines = [" ".join(draw(st.lists(sentence(), min_size=1, max_size=3)))]
    for _ in range(draw(st.integers(0, max_lines - 1))):
        lines.append(" ".join(draw(st.lists(sentence(), min_size=1, max_size=2))))
    if len(lines) > 1 and draw(st.booleans()):
        lines[0] += "  "  # a hard break
    return lines


@st.composite
def heading(draw: st.DrawFn) -> str:
    title = " ".join(draw(words()))
    if draw(st.booleans()):
        return "#" * draw(st.integers(1, 4)) + " " + title
    return title + "\n" + draw(st.sampled_from(("===", "---")))


@st.composite
def bullet_list(draw: st.DrawFn) -> str:
    ordered = draw(st.booleans())
    out = []
    for n in range(1, draw(st.integers(1, 4)) + 1):
        marker = f"{n}. " if ordered else "- "
        out.append(marker + draw(sentence()))
        for _ in range(draw(st.integers(0, 2))):
            nested = " " * len(marker) + draw(st.sampled_from(("- ", "* ", "1. ")))
            out.append(nested + draw(sentence()))
    return "\n".join(out)


@st.composite
def quote(draw: st.DrawFn) -> str:
    return "\n".join("> " + line for line in draw(prose_lines()))


@st.composite
def table(draw: st.DrawFn) -> str:
    columns = draw(st.integers(1, 3))

    def row() -> str:
        return "| " + " | ".join(draw(sentence()) for _ in range(columns)) + " |"

    body = [row() for _ in range(draw(st.integers(0, 3)))]
    return "\n".join([row(), "|" + "---|" * columns, *body])


@st.composite
def fenced_code(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.sampled_from(("x = 1", "print(x)", "", "  indented()")), max_size=4))
    return "\n".join(["```" + draw(st.sampled_from(("", "python"))), *lines, "```"])


@st.composite
def paragraph(draw: st.DrawFn) -> str:
    return "\n".join(draw(prose_lines()))


@st.composite
def footnoted(draw: st.DrawFn) -> str:
    label = draw(st.sampled_from(("1", "note", "x")))
    return f"{draw(sentence())}[^{label}] {draw(sentence())}\n\n[^{label}]: {draw(sentence())}"


BLOCKS = st.one_of(
    heading(),
    paragraph(),
    paragraph(),
    bullet_list(),
    quote(),
    table(),
    fenced_code(),
    footnoted(),
    st.just("    indented code"),
    st.just("<div>\nraw html\n</div>"),
)


@st.composite
def markdown_document(draw: st.DrawFn) -> bytes:
    blocks = draw(st.lists(BLOCKS, min_size=1, max_size=8))
    if draw(st.booleans()):
        blocks.insert(0, "---\ntitle: " + " ".join(draw(words())) + "\n---")
    text = "\n\n".join(blocks) + draw(st.sampled_from(("", "\n", "\n\n")))
    lines = text.split("\n")
    style = draw(st.sampled_from(("lf", "crlf", "cr", "mixed")))
    if style == "mixed":
        enders = [draw(st.sampled_from(("\n", "\r\n", "\r"))) for _ in lines[1:]]
    else:
        enders = [{"lf": "\n", "crlf": "\r\n", "cr": "\r"}[style]] * (len(lines) - 1)
    out = lines[0] + "".join(e + line for e, line in zip(enders, lines[1:], strict=True))
    bom = b"\xef\xbb\xbf" if draw(st.booleans()) else b""
    return bom + out.encode("utf-8")


@given(markdown_document())
def test_generated_markdown_keeps_every_invariant(data: bytes) -> None:
    check_bytes(data)


@given(markdown_document())
def test_generated_markdown_gives_the_same_ids_twice(data: bytes) -> None:
    with scratch() as a, scratch() as b:
        first = process_bytes(a, "docs/gen.md", data)
        second = process_bytes(b, "docs/gen.md", data)
    assert identities(first) == identities(second)


@given(
    st.lists(
        st.one_of(
            st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40),
            st.sampled_from(("", "   ", "\t", "Один. Два.", "中文。句子。")),
        ),
        max_size=12,
    ),
    st.sampled_from(("\n", "\r\n", "\r")),
)
def test_generated_plain_text_keeps_every_invariant(lines: list[str], ending: str) -> None:
    data = ending.join(lines).encode("utf-8")
    text = decode(data)
    result = check_bytes(data, "docs/notes.txt")
    if not text.strip():
        assert result.segments == []


@given(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=200))
def test_arbitrary_text_as_markdown_keeps_every_invariant(text: str) -> None:
    check_bytes(text.encode("utf-8"))


# --- the whole tldr-multilingual corpus -------------------------------------------------------


@pytest.mark.slow
def test_every_tldr_multilingual_page_keeps_the_invariants() -> None:
    corpus = CORPORA / "tldr-multilingual"
    if not corpus.is_dir():
        pytest.skip(f"corpus not present at {corpus}")
    files = sorted(p for p in corpus.rglob("*") if p.is_file())
    assert len(files) > 4000
    started, cpu_started = time.monotonic(), time.process_time()
    languages: set[str] = set()
    claims = 0
    failures: list[str] = []
    with scratch() as root:
        raw = root / "_raw"
        for path in files:
            rel = path.relative_to(corpus).as_posix()
            data = path.read_bytes()
            result = process_one(rel, path, raw, MAX_BYTES)
            try:
                check_file(data, result, raw)
            except AssertionError as exc:
                failures.append(f"{rel}: {str(exc)[:300]}")
                continue
            claims += len(result.claims)
            languages.add(rel.split("/")[0])
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu_started
    print(
        f"\ntldr-multilingual: {len(files)} files, {claims} claims, {elapsed:.1f} s ({cpu:.1f} CPU)"
    )
    assert not failures, f"{len(failures)} files break an invariant:\n" + "\n".join(failures[:20])
    assert {"pages", "pages.ru", "pages.zh", "pages.ja"} <= languages
    assert claims > len(files)
    # CPU time, not wall time: fsyncs and other jobs on a shared machine must not make it flaky.
    assert cpu < CORPUS_BUDGET_SECONDS, f"the corpus took {cpu:.1f} s of CPU ({elapsed:.1f} s)"
