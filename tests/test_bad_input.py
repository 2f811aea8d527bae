"""Bad input never crashes an ingest: each file gets a normalization or one specific finding.

Covered, first through `process_file` on real files in tmp_path, then end to end through the
CLI in one ingest of all of them beside two good files:

- malformed YAML front matter and front matter that is never closed (kept as text);
- an unclosed code fence (`unclosed_code_fence`, the normalization still exists);
- an enormous single line (2 MB of sentences): one segment on line 1, every sentence a claim;
- mixed line endings (CRLF, lone CR, LF) with line spans that match the raw lines;
- a UTF-8 BOM (dropped), UTF-16 LE/BE with BOM (decoded like UTF-8), broken UTF-16;
- NUL bytes (`binary_file`) and invalid UTF-8 (`undecodable_text`), with no blob stored;
- lists and block quotes nested 200 deep;
- a file over `max_file_bytes` (`file_too_large`, set in raytsystem.toml) and one exactly at it;
- an empty file and a file of only whitespace (a normalization with no segments).

After the CLI ingest of all of them the ingest exits 0, the findings name the bad files with
their specific codes, and the good files' claims (and those of the odd-but-valid files) are
answered by `query` with the right source and raw line span.

Text nested deeper than the parser's nesting limit is reported (`nesting_too_deep`), and an
inline footnote (`^[note]`) stays literal text.
"""

from __future__ import annotations

import codecs
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import blob_bytes, process_one, run_cli, write

from raytsystem.model.text import NotText, decode
from raytsystem.pipeline.files import FileResult
from raytsystem.storage.blobs import DiskBlobStore

MAX_BYTES = 10 * 1024 * 1024

# --- the bad files, as bytes ------------------------------------------------------------------

MALFORMED_FRONT_MATTER = (
    b"---\ntitle: [unclosed\n  : : not yaml\n---\n\nThe body survives intact.\n"
)
UNCLOSED_FRONT_MATTER = b"---\ntitle: never closed\n\nA paragraph after it.\n"
UNCLOSED_FENCE = b"Before the fence stays a claim.\n\n```python\nx = 1\n\nThe zeppelin is code.\n"
MIXED_ENDINGS = (
    b"# Mixed\r\n\r\nFirst line crlf.\rSecond line cr.\nThird line lf.\r\n\r\n"
    b"- Item on line seven.\r- Item on line eight.\n"
)
BOM_TEXT = "# Heading after the BOM\n\nThe marmalade kettle whistles at noon.\n"
NUL_BYTES = b"Looks like text\x00but has a NUL byte.\n"
INVALID_UTF8 = b"Caf\xe9 au lait is Latin-1, not UTF-8.\n"
DEEP = 200


def huge_line(size: int = 2 * 1024 * 1024, padding: int = 0) -> tuple[bytes, int]:
    """One raw line of `size`+ bytes made of distinct sentences, and how many sentences.

    `padding` lengthens every sentence by that many words, for fewer claims in the same bytes.
    """
    parts, total, n = [], 0, 0
    pad = " and on" * padding
    while total < size:
        sentence = f"Sentence number {n} talks about item {n * 7}{pad}. "
        parts.append(sentence)
        total += len(sentence)
        n += 1
    return "".join(parts).rstrip().encode() + b"\n", n


def deep_list(depth: int = DEEP) -> bytes:
    return "".join("  " * i + f"- level {i} item.\n" for i in range(depth)).encode()


def deep_quote(depth: int = DEEP) -> bytes:
    return "".join(">" * i + f" quote level {i}.\n" for i in range(1, depth + 1)).encode()


# --- process_file in tmp_path -----------------------------------------------------------------


_RAW_ROOTS: list[Path] = []  # where `run` stored the blobs, for `text_of`


def run(tmp_path: Path, rel: str, data: bytes, max_bytes: int = MAX_BYTES) -> FileResult:
    _RAW_ROOTS.append(tmp_path / "_raw")
    disk = tmp_path / "ws" / rel
    disk.parent.mkdir(parents=True, exist_ok=True)
    disk.write_bytes(data)
    return process_one(rel, disk, tmp_path / "_raw", max_bytes)  # type: ignore[no-any-return]


def text_of(result: FileResult) -> str:
    """The normalized text, read back from the blob the worker wrote."""
    blob = str(result.normalization["text_blob"])
    return blob_bytes(_RAW_ROOTS[-1], blob).decode("utf-8")


def segments(result: FileResult) -> list[tuple[str, str, int, int]]:
    text = text_of(result)
    return [
        (s.kind, text[s.start : s.end], s.line_start, s.line_end) for s in result.segment_rows()
    ]


def statements(result: FileResult) -> list[str]:
    return [c.statement for c, _ in result.claim_pairs()]


def assert_normalized(result: FileResult) -> None:
    assert result.outcome == "new", result.finding
    assert result.finding is None
    assert result.normalization["status"] == "ok"


def stored_blobs(tmp_path: Path) -> list[str]:
    raw = tmp_path / "_raw"
    return sorted(DiskBlobStore(raw).addresses()) if raw.exists() else []


def test_malformed_front_matter_is_kept_as_text_and_the_body_is_claimed(tmp_path: Path) -> None:
    result = run(tmp_path, "docs/fm.md", MALFORMED_FRONT_MATTER)
    assert_normalized(result)
    assert segments(result) == [
        ("front_matter", "title: [unclosed\n  : : not yaml", 2, 3),
        ("paragraph", "The body survives intact.", 6, 6),
    ]
    assert statements(result) == ["The body survives intact."]


def test_front_matter_never_closed_is_ordinary_markdown(tmp_path: Path) -> None:
    result = run(tmp_path, "docs/fm-open.md", UNCLOSED_FRONT_MATTER)
    assert_normalized(result)
    assert [s[0] for s in segments(result)] == ["paragraph", "paragraph"]
    assert "A paragraph after it." in statements(result)


def test_unclosed_code_fence_gives_a_finding_and_still_a_normalization(tmp_path: Path) -> None:
    result = run(tmp_path, "docs/fence.md", UNCLOSED_FENCE)
    assert_normalized(result)
    assert [(f.code, f.subject) for f in result.findings] == [
        ("unclosed_code_fence", "docs/fence.md:line 3")
    ]
    assert segments(result) == [
        ("paragraph", "Before the fence stays a claim.", 1, 1),
        ("code", "x = 1\n\nThe zeppelin is code.", 4, 6),
    ]
    assert statements(result) == ["Before the fence stays a claim."]
    assert "unclosed_code_fence" in str(result.normalization["meta"])


def test_enormous_single_line_is_one_segment_with_every_sentence_claimed(tmp_path: Path) -> None:
    data, count = huge_line()
    assert len(data) > 2 * 1024 * 1024
    started = time.monotonic()
    result = run(tmp_path, "docs/huge.md", data)
    elapsed = time.monotonic() - started
    assert_normalized(result)
    assert [(k, a, b) for k, _t, a, b in segments(result)] == [("paragraph", 1, 1)]
    assert len(result.claims) == count
    text = text_of(result)
    pairs = result.claim_pairs()
    for claim, evidence in (pairs[0], pairs[count // 2], pairs[-1]):
        assert text[evidence.start : evidence.end] == claim.statement
    last = count - 1
    assert statements(result)[-1] == f"Sentence number {last} talks about item {last * 7}."
    assert elapsed < 30, f"a 2 MB line took {elapsed:.1f} s"


def test_mixed_line_endings_give_lf_text_and_raw_line_spans(tmp_path: Path) -> None:
    result = run(tmp_path, "docs/mixed.md", MIXED_ENDINGS)
    assert_normalized(result)
    assert segments(result) == [
        ("heading", "Mixed", 1, 1),
        ("paragraph", "First line crlf.\nSecond line cr.\nThird line lf.", 3, 5),
        ("list_item", "Item on line seven.", 7, 7),
        ("list_item", "Item on line eight.", 8, 8),
    ]
    assert "\r" not in text_of(result)
    raw = DiskBlobStore(tmp_path / "_raw").get(result.blob)
    assert raw == MIXED_ENDINGS  # the raw blob keeps the exact bytes, line endings included


def test_plain_text_with_lone_cr_lines_keeps_its_line_numbers(tmp_path: Path) -> None:
    result = run(tmp_path, "docs/old-mac.txt", b"one.\rtwo.\r\rfour.\r")
    assert_normalized(result)
    assert segments(result) == [("paragraph", "one.\ntwo.", 1, 2), ("paragraph", "four.", 4, 4)]


def test_utf8_bom_is_dropped_from_the_text_but_kept_in_the_raw_blob(tmp_path: Path) -> None:
    data = codecs.BOM_UTF8 + BOM_TEXT.encode()
    result = run(tmp_path, "docs/bom.md", data)
    assert_normalized(result)
    assert segments(result)[0] == ("heading", "Heading after the BOM", 1, 1)
    assert not text_of(result).startswith("\ufeff")
    assert DiskBlobStore(tmp_path / "_raw").get(result.blob) == data


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_with_bom_normalizes_like_utf8(tmp_path: Path, encoding: str) -> None:
    bom = codecs.BOM_UTF16_LE if encoding.endswith("le") else codecs.BOM_UTF16_BE
    text = BOM_TEXT.replace("\n", "\r\n") + "Кириллица и 中文。\r\n"
    wide = run(tmp_path, f"docs/{encoding}.md", bom + text.encode(encoding))
    narrow = run(tmp_path, "docs/utf8.md", text.encode())
    assert_normalized(wide)
    assert segments(wide) == segments(narrow)
    assert statements(wide) == statements(narrow)
    assert wide.blob != narrow.blob


def test_utf16_bom_with_a_lone_surrogate_is_undecodable(tmp_path: Path) -> None:
    data = codecs.BOM_UTF16_LE + "ok".encode("utf-16-le") + b"\x00\xd8" + b"a\x00"
    result = run(tmp_path, "docs/broken16.md", data)
    assert result.outcome == "skipped"
    assert result.finding is not None and result.finding.code == "undecodable_text"


def test_nul_bytes_make_a_binary_file_finding_and_no_blob(tmp_path: Path) -> None:
    result = run(tmp_path, "docs/nul.md", NUL_BYTES)
    assert result.outcome == "skipped"
    assert result.finding is not None
    assert (result.finding.code, result.finding.subject) == ("binary_file", "docs/nul.md")
    assert "offset 15" in result.finding.message
    assert result.claims == [] and result.segments == []
    assert stored_blobs(tmp_path) == []


def test_utf16_without_bom_is_binary_not_guessed(tmp_path: Path) -> None:
    result = run(tmp_path, "docs/nobom16.md", "No BOM here.".encode("utf-16-le"))
    assert result.finding is not None and result.finding.code == "binary_file"


def test_invalid_utf8_is_undecodable_with_the_byte_offset(tmp_path: Path) -> None:
    result = run(tmp_path, "docs/latin1.md", INVALID_UTF8)
    assert result.outcome == "skipped"
    assert result.finding is not None
    assert (result.finding.code, result.finding.subject) == ("undecodable_text", "docs/latin1.md")
    assert "byte 3" in result.finding.message
    assert stored_blobs(tmp_path) == []


@pytest.mark.parametrize(
    ("data", "code"),
    [(NUL_BYTES, "binary_file"), (INVALID_UTF8, "undecodable_text")],
    ids=["nul", "invalid-utf8"],
)
def test_decode_raises_not_text_with_the_finding_code(data: bytes, code: str) -> None:
    with pytest.raises(NotText) as raised:
        decode(data)
    assert raised.value.code == code


def test_list_nested_200_deep_normalizes_without_a_crash(tmp_path: Path) -> None:
    result = run(tmp_path, "docs/deep-list.md", deep_list())
    assert_normalized(result)
    got = segments(result)
    assert got[0] == ("list_item", "level 0 item.", 1, 1)
    assert all(kind == "list_item" and f"level {a - 1} " in t for kind, t, a, _ in got)


def test_block_quote_nested_200_deep_normalizes_without_a_crash(tmp_path: Path) -> None:
    result = run(tmp_path, "docs/deep-quote.md", deep_quote())
    assert_normalized(result)
    got = segments(result)
    assert got[0] == ("quote", "quote level 1.", 1, 1)
    assert all(f"quote level {a}." in t for _k, t, a, _b in got)


@pytest.mark.parametrize("make", [deep_list, deep_quote], ids=["list", "quote"])
def test_text_nested_200_deep_is_kept_or_reported(
    tmp_path: Path, make: Callable[[], bytes]
) -> None:
    result = run(tmp_path, "docs/deep.md", make())
    text = text_of(result)
    kept = f"level {DEEP - 1} item." in text or f"quote level {DEEP}." in text
    assert kept or result.findings, "the deepest text is neither kept nor reported"


def test_file_over_the_size_limit_is_skipped_before_reading(tmp_path: Path) -> None:
    result = run(tmp_path, "docs/big.md", b"Too big. " * 200, max_bytes=1000)
    assert result.outcome == "skipped"
    assert result.finding is not None
    assert (result.finding.code, result.finding.subject) == ("file_too_large", "docs/big.md")
    assert "1800" in result.finding.message and "1000" in result.finding.message
    assert stored_blobs(tmp_path) == []


def test_file_exactly_at_the_size_limit_is_ingested(tmp_path: Path) -> None:
    data = b"Exactly at the limit. " * 10
    result = run(tmp_path, "docs/edge.md", data, max_bytes=len(data))
    assert_normalized(result)
    assert statements(result) == ["Exactly at the limit."] * 10
    assert [c.occurrence for c, _ in result.claim_pairs()] == list(range(10))
    assert len({c.id for c, _ in result.claim_pairs()}) == 10


@pytest.mark.parametrize(
    "data",
    [b"", b"   \n\t\n\r\n  ", codecs.BOM_UTF8, "\u3000\u00a0\n".encode()],
    ids=["empty", "whitespace", "only-bom", "unicode-spaces"],
)
@pytest.mark.parametrize("rel", ["docs/blank.md", "docs/blank.txt"])
def test_empty_and_whitespace_files_have_an_empty_normalization(
    tmp_path: Path, data: bytes, rel: str
) -> None:
    result = run(tmp_path, rel, data)
    assert_normalized(result)
    assert result.normalization["segment_count"] == 0
    assert text_of(result) == ""
    assert result.segments == [] and result.claims == [] and result.findings == []
    assert DiskBlobStore(tmp_path / "_raw").get(result.blob) == data


def test_inline_footnote_gives_a_normalization(tmp_path: Path) -> None:
    # Inline footnotes are not part of the citation grammar: they stay literal text.
    result = run(tmp_path, "docs/inline-note.md", b"Retries stop early.^[An inline note.] Fine.\n")
    assert_normalized(result)
    assert statements(result) == ["Retries stop early.^[An inline note.]", "Fine."]


# --- end to end through the CLI ---------------------------------------------------------------

CLI_LIMIT = 3 * 1024 * 1024
# Long sentences keep the CLI's 2 MB line to ~5,000 claims (the ledger and index cost is per
# claim); the process_file test above takes the 46,000-sentence version.
HUGE_PADDING = 50
GOOD = {
    "docs/good-payments.md": "# Payments\n\nRetries stop after at most seven zanzibar attempts.\n",
    "docs/good-refunds.md": "# Refunds\n\nRefunds of quetzal orders take ten business days.\n",
}


def bad_files() -> dict[str, bytes]:
    bom16 = codecs.BOM_UTF16_LE + "# Wide\r\n\r\nThe wombat ledger is UTF-16.\r\n".encode(
        "utf-16-le"
    )
    return {
        "docs/front-matter.md": MALFORMED_FRONT_MATTER,
        "docs/front-matter-open.md": UNCLOSED_FRONT_MATTER,
        "docs/unclosed-fence.md": UNCLOSED_FENCE,
        "docs/huge-line.md": huge_line(padding=HUGE_PADDING)[0],
        "docs/mixed-endings.md": MIXED_ENDINGS,
        "docs/utf8-bom.md": codecs.BOM_UTF8 + BOM_TEXT.encode(),
        "docs/utf16-bom.md": bom16,
        "docs/nul.md": NUL_BYTES,
        "docs/latin1.md": INVALID_UTF8,
        "docs/deep-list.md": deep_list(),
        "docs/deep-quote.md": deep_quote(),
        "docs/too-large.md": b"Over the limit. " * (CLI_LIMIT // 16 + 1),
        "docs/empty.md": b"",
        "docs/whitespace.md": b"  \n\t\r\n   \n",
    }


def write_bytes(root: Path, rel: str, data: bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def set_limit(ws: Path, limit: int) -> None:
    config = ws / "raytsystem.toml"
    text = config.read_text(encoding="utf-8")
    text, n = re.subn(r"(?m)^max_file_bytes = \d+$", f"max_file_bytes = {limit}", text)
    assert n == 1, text
    config.write_text(text, encoding="utf-8")


def query(ws: Path, text: str) -> dict[str, object]:
    result = run_cli("query", text, "--json", cwd=ws)
    assert result.code == 0, (result.stdout, result.stderr)
    body = result.json()
    assert isinstance(body, dict)
    return body


def first_evidence(body: dict[str, object]) -> dict[str, object]:
    citations = body["citations"]
    assert isinstance(citations, list) and citations
    evidence = citations[0]["evidence"][0]
    assert isinstance(evidence, dict)
    return evidence


def test_one_ingest_of_every_bad_file_beside_good_ones(workspace: Path) -> None:
    set_limit(workspace, CLI_LIMIT)
    for rel, text in GOOD.items():
        write(workspace, rel, text)
    bad = bad_files()
    for rel, data in bad.items():
        write_bytes(workspace, rel, data)

    result = run_cli("ingest", "--json", cwd=workspace)
    assert result.code == 0, (result.stdout[-2000:], result.stderr[-2000:])
    report = result.json()
    assert report["created"] is True
    findings = {(f["code"], f["subject"]) for f in report["findings"]}
    assert findings == {
        ("binary_file", "docs/nul.md"),
        ("undecodable_text", "docs/latin1.md"),
        ("nesting_too_deep", "docs/deep-quote.md:document"),
        ("nesting_too_deep", "docs/deep-list.md:document"),
        ("file_too_large", "docs/too-large.md"),
        ("unclosed_code_fence", "docs/unclosed-fence.md:line 3"),
    }
    assert all(f["message"] for f in report["findings"])
    counts = report["counts"]
    assert counts["scanned"] == len(GOOD) + len(bad)
    assert counts["new_sources"] == len(GOOD) + len(bad) - 3
    huge_sentences = huge_line(padding=HUGE_PADDING)[1]
    assert counts["claims_added"] > huge_sentences

    for question, path in (
        ("zanzibar attempts", "docs/good-payments.md"),
        ("quetzal refunds", "docs/good-refunds.md"),
    ):
        body = query(workspace, question)
        assert body["status"] == "answered", body
        assert first_evidence(body)["source_path"] == path

    # Odd but valid files are answered too; each citation's raw lines are its sentence's lines,
    # whatever the file's line endings or encoding.
    last = huge_sentences - 2
    for question, path, lines, excerpt in (
        ("second line cr", "docs/mixed-endings.md", (4, 4), "Second line cr."),
        ("item on line eight", "docs/mixed-endings.md", (8, 8), "Item on line eight."),
        ("marmalade kettle", "docs/utf8-bom.md", (3, 3), "The marmalade kettle"),
        ("wombat ledger", "docs/utf16-bom.md", (3, 3), "The wombat ledger is UTF-16."),
        ("body survives intact", "docs/front-matter.md", (6, 6), "The body survives intact."),
        (f"sentence number {last}", "docs/huge-line.md", (1, 1), f"Sentence number {last} "),
    ):
        body = query(workspace, question)
        assert body["status"] == "answered", (question, body)
        evidence = first_evidence(body)
        assert evidence["source_path"] == path, question
        assert evidence["lines"] == {"start": lines[0], "end": lines[1]}, question
        assert str(evidence["cited_excerpt"]).startswith(excerpt), question

    # The bad files left nothing queryable behind, and the code after the fence is no claim.
    for question in ("latin lait", "NUL byte", "over the limit", "zeppelin"):
        assert query(workspace, question)["status"] == "gap", question

    again = run_cli("ingest", "--json", cwd=workspace)
    assert again.code == 0, again.stderr
    assert again.json()["created"] is False
    assert {f["code"] for f in again.json()["findings"]} >= {"binary_file", "file_too_large"}


def test_inline_footnote_file_does_not_stop_the_ingest(workspace: Path) -> None:
    write(workspace, "docs/good-payments.md", GOOD["docs/good-payments.md"])
    write(workspace, "docs/inline-note.md", "Retries stop early.^[An inline note.] Fine.\n")
    result = run_cli("ingest", "--json", cwd=workspace)
    assert result.code == 0, result.stdout
    assert query(workspace, "zanzibar attempts")["status"] == "answered"
