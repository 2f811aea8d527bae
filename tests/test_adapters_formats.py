"""The adapters for HTML, reStructuredText, PDF, notebooks and source code (issue 36).

Golden fixtures: each `tests/fixtures/formats/NAME.EXT` (not `.json`, `.roff`) is an input,
read by the adapter its suffix names; `NAME.json` beside it is what the adapter must make of it:

    {
      "adapter": "html@1",
      "findings": ["code_unparsable"],                  # codes of Normalized.findings
      "segments": [{"kind": ..., "heading_path": [...], "text": ..., "lines": [a, b],
                    "page": 1, "cell": 0, "protected": [[s, e]]}],  # page/cell/protected if set
      "symbols": [{"name": "RetryPolicy.run", "kind": "method", "lines": [a, b],
                   "text": "the normalized text at its span"}],
      "claims": ["statement", ...]
    }

or, for an input the adapter refuses, `{"adapter": ..., "refused": "pdf_encrypted"}`. The inputs
were written for these tests (no outside text); `retry.pdf` is `groff -man -Tpdf retry.roff`
(groff 1.22.4), and the damaged PDFs are made from it by pypdf and by cutting it.

    UPDATE_GOLDEN=1 uv run pytest tests/test_adapters_formats.py

rewrites the expectations from the current output; read the diff, and bump the adapter's
version when its output for some input changes.

Every normalization, of the fixtures and of the real documents installed on the machine (Debian
packages: python3-doc, docutils-doc, groff, python-nbsphinx-doc, golang-github-pkg-errors-dev,
librust-semver-dev, node-mj-context-menu; each test says which it needs and skips without it),
is checked by `check_invariants`: the text is the segments joined by blank lines, each span
slices it, evidence excerpts equal the text at their spans, symbols' spans hold their segments,
and each segment line points at the raw line it came from (for PDF, at the line of its page's
text as pypdf extracts it, read independently; for a notebook, the `.ipynb` line or the line
in its cell).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from raytsystem.ids import scheme
from raytsystem.model.adapters import (
    ADAPTERS,
    MEDIA_TYPES,
    SEGMENT_KINDS,
    AdapterRefused,
    Normalized,
    adapter_for,
    media_type_for,
)
from raytsystem.model.claims import extract_claims, segment_rows
from raytsystem.model.objects import chain_ids
from raytsystem.model.text import decode

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
NOT_INPUTS = {".json", ".roff"}
CASES = sorted(p.name for p in FIXTURES.iterdir() if p.suffix not in NOT_INPUTS)

_WORD = re.compile(r"[^\W_]{2,}")
# Markup that may vanish from between the letters of a word (`*a*\ b`, `x``s`, `<b>c</b>`).
_MARKUP = re.compile(r"\\ |[*_`~\\\[\]|]|<[^<>]*>")


def normalize(path: Path) -> Normalized:
    adapter = adapter_for(media_type_for(path.name))
    return adapter.normalize(path.read_bytes())


# --- the invariants ----------------------------------------------------------------------------


def raw_lines_of(path: Path, data: bytes, normalized: Normalized) -> dict[int | None, list[str]]:
    """What segment lines point at: the file's lines, or per page the text pypdf extracts
    (read here without the adapter), or per cell its source when a notebook says so."""
    media_type = media_type_for(path.name)
    if media_type == "application/pdf":
        import pypdf

        reader = pypdf.PdfReader(io.BytesIO(data))
        return {
            n + 1: (page.extract_text() or "").split("\n") for n, page in enumerate(reader.pages)
        }
    text = decode(data)
    if media_type == "application/x-ipynb+json" and any(
        f.code == "notebook_lines_in_cells" for f in normalized.findings
    ):
        cells = json.loads(text)["cells"]
        return {
            k: "".join(c["source"] if isinstance(c["source"], list) else [c["source"]]).split("\n")
            for k, c in enumerate(cells)
        }
    return {None: text.split("\n")}


def line_forms(line: str) -> str:
    import html

    bare = _MARKUP.sub("", line)
    return "\n".join([line, bare, html.unescape(line), html.unescape(bare)]).casefold()


def check_invariants(path: Path, normalized: Normalized) -> list[str]:
    """The failures of the line invariant, one per segment (the other invariants assert)."""
    data = path.read_bytes()
    text = normalized.text
    segments = normalized.segments
    assert text == "\n\n".join(text[s.start : s.end] for s in segments)
    for seg in segments:
        body = text[seg.start : seg.end]
        assert body and body == body.strip(), seg
        assert seg.kind in SEGMENT_KINDS, seg.kind
        assert seg.line_end - seg.line_start == body.count("\n"), seg
    rows = segment_rows(chain_ids(scheme(1)), "nrm_test", normalized)
    for claim, evidence in extract_claims(chain_ids(scheme(1)), "src_test", normalized, rows):
        excerpt = text[evidence.start : evidence.end]
        assert claim.statement == unicodedata.normalize("NFC", " ".join(excerpt.split()))
        seg = next(r for r in rows if r.id == evidence.segment_id)
        assert seg.start <= evidence.start < evidence.end <= seg.end
    for symbol in normalized.symbols:
        assert 0 <= symbol.start < symbol.end <= len(text), symbol
        assert symbol.line_start <= symbol.line_end, symbol
        inside = [s for s in segments if symbol.start <= s.start and s.end <= symbol.end]
        assert inside, f"{symbol.name} spans no whole segment"
    raws = raw_lines_of(path, data, normalized)
    failures = []
    for seg in segments:
        key = seg.page if seg.page is not None else seg.cell if None not in raws else None
        raw = raws[key]
        assert 1 <= seg.line_start <= seg.line_end <= len(raw), (seg, len(raw))
        for k, line in enumerate(text[seg.start : seg.end].split("\n")):
            target = line_forms(raw[seg.line_start - 1 + k])
            missing = [w for w in _WORD.findall(line.casefold()) if w not in target]
            if missing:
                failures.append(
                    f"{path}:{seg.line_start + k} (page {seg.page}, cell {seg.cell}): "
                    f"{missing[:4]} not in {raw[seg.line_start - 1 + k][:100]!r}"
                )
                break
    return failures


# --- golden fixtures ---------------------------------------------------------------------------


def describe(path: Path) -> dict[str, Any]:
    adapter = adapter_for(media_type_for(path.name))
    try:
        normalized = adapter.normalize(path.read_bytes())
    except AdapterRefused as exc:
        return {"adapter": adapter.label, "refused": exc.code}
    text = normalized.text
    segments = []
    for seg in normalized.segments:
        entry: dict[str, Any] = {
            "kind": seg.kind,
            "heading_path": list(seg.heading_path),
            "text": text[seg.start : seg.end],
            "lines": [seg.line_start, seg.line_end],
        }
        if seg.page is not None:
            entry["page"] = seg.page
        if seg.cell is not None:
            entry["cell"] = seg.cell
        if seg.protected:
            entry["protected"] = [list(p) for p in seg.protected]
        segments.append(entry)
    rows = segment_rows(chain_ids(scheme(1)), "nrm_golden", normalized)
    return {
        "adapter": adapter.label,
        "findings": [f.code for f in normalized.findings],
        "segments": segments,
        "symbols": [
            {
                "name": s.name,
                "kind": s.kind,
                "lines": [s.line_start, s.line_end],
                "text": text[s.start : s.end],
            }
            for s in normalized.symbols
        ],
        "claims": [
            c.statement
            for c, _ in extract_claims(chain_ids(scheme(1)), "src_golden", normalized, rows)
        ],
    }


def dump(expected: dict[str, Any]) -> str:
    """One segment, symbol and claim per line, so diffs are easy to review."""

    def one(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    lines = ["{"]
    for key, value in expected.items():
        if isinstance(value, list) and value and key != "findings":
            lines.append(f"  {one(key)}: [")
            lines.extend(f"    {one(item)}," for item in value)
            lines[-1] = lines[-1].rstrip(",")
            lines.append("  ],")
        else:
            lines.append(f"  {one(key)}: {one(value)},")
    lines[-1] = lines[-1].rstrip(",")
    lines.append("}")
    return "\n".join(lines) + "\n"


def expectation(name: str) -> Path:
    return FIXTURES / (name.rsplit(".", 1)[0] + ".json")


@pytest.mark.parametrize("name", CASES)
def test_golden_fixture(name: str) -> None:
    actual = describe(FIXTURES / name)
    target = expectation(name)
    if UPDATE:
        target.write_text(dump(actual), encoding="utf-8")
    assert target.exists(), f"{target.name} is missing: run with UPDATE_GOLDEN=1 and review it"
    assert actual == json.loads(target.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", [n for n in CASES if "refused" not in describe(FIXTURES / n)])
def test_fixture_keeps_the_invariants(name: str) -> None:
    path = FIXTURES / name
    assert check_invariants(path, normalize(path)) == []


def test_fixtures_cover_every_format_kind_and_field() -> None:
    described = [describe(FIXTURES / n) for n in CASES]
    adapters = {d["adapter"] for d in described}
    assert {a.label for a in ADAPTERS.values()} - {"markdown@1", "text@1"} <= adapters
    segments = [s for d in described for s in d.get("segments", [])]
    assert {s["kind"] for s in segments} >= {
        "heading",
        "paragraph",
        "list_item",
        "quote",
        "table_header",
        "table_row",
        "footnote",
        "code",
        "docstring",
        "comment",
    }
    assert any("page" in s for s in segments) and any("cell" in s for s in segments)
    assert any(s.get("protected") for s in segments)
    assert {"code_unparsable", "notebook_lines_in_cells", "unclosed_code_fence"} <= {
        code for d in described for code in d.get("findings", [])
    }
    refused = {d["refused"] for d in described if "refused" in d}
    assert refused == set()  # refusals are tested below, on inputs made from the fixtures


# --- what each format must get right, beyond the golden output ---------------------------------


def test_html_reads_the_main_content_only() -> None:
    normalized = normalize(FIXTURES / "sphinx_page.html")
    text = normalized.text
    for outside in ("Navigation", "Search this site", "Copyright", "Built with", "DOCUMENTATION"):
        assert outside not in text
    assert "¶" not in text  # permalinks are decoration
    assert "Retry policy" in text and "Quoted advice" in text


def test_rst_tolerates_sphinx_and_reads_nothing_outside_the_text(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET CONTENT\n", encoding="utf-8")
    source = tmp_path / "doc.rst"
    source.write_text(
        f"Title\n=====\n\n.. include:: {secret}\n\n.. raw:: html\n\n   <b>raw</b>\n\n"
        f".. csv-table::\n   :file: {secret}\n\nText after.\n",
        encoding="utf-8",
    )
    normalized = normalize(source)
    assert "SECRET" not in normalized.text and "raw" not in normalized.text
    assert "Text after." in normalized.text


def test_notebook_heading_path_carries_across_cells() -> None:
    normalized = normalize(FIXTURES / "jupyter_layout.ipynb")
    code = [s for s in normalized.segments if s.kind == "code" and s.cell == 1]
    assert code and code[0].heading_path == ("Retry analysis",)


def test_python_symbols_cover_the_quote_a_note_would_cite() -> None:
    normalized = normalize(FIXTURES / "payments.py")
    symbols = {s.name: s for s in normalized.symbols}
    assert {"RetryPolicy", "RetryPolicy.max_attempts", "RetryPolicy.run.attempt", "retry"} <= set(
        symbols
    )
    span = symbols["RetryPolicy.max_attempts"]
    assert "max_attempts = 5" in normalized.text[span.start : span.end]
    assert "self.attempts" not in symbols  # instance attributes are not definitions


# --- bad input ---------------------------------------------------------------------------------


def _pdf_variants(tmp_path: Path) -> dict[str, bytes]:
    import pypdf

    data = (FIXTURES / "retry.pdf").read_bytes()
    encrypted = pypdf.PdfWriter(clone_from=io.BytesIO(data))
    encrypted.encrypt(user_password="secret", owner_password="owner", algorithm="AES-256")
    locked = io.BytesIO()
    encrypted.write(locked)
    blank = pypdf.PdfWriter()
    blank.add_blank_page(width=612, height=792)
    blank.add_blank_page(width=612, height=792)
    scanned = io.BytesIO()
    blank.write(scanned)
    return {
        "encrypted": locked.getvalue(),
        "scanned": scanned.getvalue(),
        "truncated": data[: len(data) // 3],
        "not_a_pdf": b"%PDF-1.7\nthis is not a PDF at all\n",
        "empty": b"",
    }


@pytest.mark.parametrize(
    ("variant", "code"),
    [
        ("encrypted", "pdf_encrypted"),
        ("scanned", "pdf_no_text"),
        ("truncated", "pdf_unreadable"),
        ("not_a_pdf", "pdf_unreadable"),
        ("empty", "pdf_unreadable"),
    ],
)
def test_bad_pdf_is_refused_with_its_code(tmp_path: Path, variant: str, code: str) -> None:
    data = _pdf_variants(tmp_path)[variant]
    with pytest.raises(AdapterRefused) as refused:
        ADAPTERS["application/pdf"].normalize(data)
    assert refused.value.code == code


def test_pdf_with_an_owner_password_only_is_read() -> None:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=FIXTURES / "retry.pdf")
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    normalized = ADAPTERS["application/pdf"].normalize(out.getvalue())
    assert "Refunds are never retried." in normalized.text


def test_pdf_outline_gives_the_heading_path() -> None:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=FIXTURES / "retry.pdf")
    top = writer.add_outline_item(title="DESCRIPTION", page_number=0)
    writer.add_outline_item(title="SEE ALSO", page_number=1, parent=top)
    out = io.BytesIO()
    writer.write(out)
    normalized = ADAPTERS["application/pdf"].normalize(out.getvalue())
    last = normalized.segments[-1]
    assert last.page == 2 and last.heading_path == ("DESCRIPTION", "SEE ALSO")


@pytest.mark.parametrize(
    ("suffix", "content", "code"),
    [
        (".ipynb", b"this is not JSON", "notebook_invalid"),
        (".ipynb", b'{"cells": [', "notebook_invalid"),
        (".ipynb", b"[1, 2, 3]", "notebook_invalid"),
        (".ipynb", b'{"metadata": {}}', "notebook_invalid"),
        (".rst", b"Title\n=====\n\n" + b"x" * 10_001 + b"\n", "rst_unreadable"),
    ],
)
def test_bad_input_is_refused_with_its_code(suffix: str, content: bytes, code: str) -> None:
    with pytest.raises(AdapterRefused) as refused:
        adapter_for(media_type_for("f" + suffix)).normalize(content)
    assert refused.value.code == code


@pytest.mark.parametrize("media_type", sorted(ADAPTERS))
@pytest.mark.parametrize(
    "content",
    [b"", b"\n\n  \n", "ünïcödé – 日本語 ".encode(), b"<<<>>>{{{[[[(((", b"\xef\xbb\xbf# x\n"],
)
def test_odd_input_never_raises_anything_but_a_refusal(media_type: str, content: bytes) -> None:
    with contextlib.suppress(AdapterRefused):
        ADAPTERS[media_type].normalize(content)


def test_deep_nesting_is_a_refusal_or_a_result_not_a_crash() -> None:
    for media_type, content in [
        ("text/html", b"<div>" * 5000 + b"deep" + b"</div>" * 5000),
        ("text/x-python", b"x = " + b"[" * 2000 + b"]" * 2000 + b"\n"),
        ("application/x-ipynb+json", b"[" * 5000 + b"]" * 5000),
        ("text/x-rst", b"".join(b"  " * k + b"- item\n\n" for k in range(300))),
    ]:
        with contextlib.suppress(AdapterRefused):
            ADAPTERS[media_type].normalize(content)


# --- the registry ------------------------------------------------------------------------------


def test_registry_names_and_media_types() -> None:
    labels = [a.label for a in ADAPTERS.values()]
    assert len(labels) == len(set(labels))
    assert set(MEDIA_TYPES.values()) <= set(ADAPTERS)
    assert ADAPTERS["application/pdf"].reads == "bytes"
    assert all(a.reads == "text" for t, a in ADAPTERS.items() if t != "application/pdf")
    assert media_type_for("docs/a.HTML") == "text/html"
    assert media_type_for("src/a.d.ts") == "text/x-typescript"
    assert media_type_for("notebooks/a.ipynb") == "application/x-ipynb+json"
    assert media_type_for("html/_sources/library/os.rst.txt") == "text/x-rst"  # Sphinx's copy
    assert media_type_for("notes.txt") == "text/plain"
    assert media_type_for("docs/a.md") == "text/markdown"


def test_importing_the_adapters_imports_no_parser_library() -> None:
    code = (
        "import sys, raytsystem.model.adapters, raytsystem.model.claims\n"
        "heavy = {'lxml', 'docutils', 'pypdf', 'tree_sitter', 'tree_sitter_javascript',\n"
        "         'tree_sitter_typescript', 'tree_sitter_go', 'tree_sitter_rust', 'markdown_it'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- real documents installed on the machine ---------------------------------------------------


def _installed(root: str, pattern: str, package: str) -> list[Path]:
    base = Path(root)
    files = sorted(p for p in base.rglob(pattern) if p.is_file()) if base.is_dir() else []
    if not files:
        pytest.skip(f"no {pattern} under {root}: install Debian's {package}")
    return files


def _run_corpus(files: list[Path], media_type: str, max_failing_lines: int = 0) -> None:
    adapter = ADAPTERS[media_type]
    failures: list[str] = []
    segments = 0
    for path in files:
        try:
            normalized = adapter.normalize(path.read_bytes())
        except AdapterRefused as exc:
            failures.append(f"{path}: refused {exc.code}")
            continue
        segments += len(normalized.segments)
        linked = path if media_type_for(path.name) == media_type else None
        if linked is None:  # `.rst.txt` sources: check them under the suffix of their format
            suffix = next(s for s, t in MEDIA_TYPES.items() if t == media_type)
            linked = Path(str(path) + suffix)
            failures.extend(_check_as(path, linked, normalized))
        else:
            failures.extend(check_invariants(path, normalized))
    print(f"\n{len(files)} files, {segments} segments, {len(failures)} failing lines")
    assert segments > len(files)
    assert len(failures) <= max_failing_lines, "\n".join(failures[:30])


def _check_as(path: Path, named: Path, normalized: Normalized) -> list[str]:
    """check_invariants on a file whose suffix does not name its format."""
    link = named.parent / named.name
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"raytsystem-{os.getpid()}-{link.name}"
    shutil.copyfile(path, tmp)
    try:
        return check_invariants(tmp, normalized)
    finally:
        tmp.unlink()


@pytest.mark.slow
def test_every_sphinx_html_page_of_python3_doc() -> None:
    files = _installed("/usr/share/doc/python3-doc/html", "*.html", "python3-doc")
    _run_corpus(files, "text/html")


@pytest.mark.slow
def test_every_rst_source_of_python3_doc() -> None:
    files = _installed("/usr/share/doc/python3-doc/html/_sources", "*.rst.txt", "python3-doc")
    # Text that is not on its raw line by design: an escaped space joining two words
    # (`*a*\ b`), a substitution's text, section numbers. Fewer than one line in a thousand.
    _run_corpus(files, "text/x-rst", max_failing_lines=60)


@pytest.mark.slow
def test_docutils_own_documentation() -> None:
    files = _installed("/usr/share/doc/docutils-doc", "*.txt", "docutils-doc")
    # As above, and the footnotes `target-notes` makes of a document's links.
    _run_corpus(files, "text/x-rst", max_failing_lines=20)


def test_nbsphinx_notebooks() -> None:
    files = _installed("/usr/share/doc/python-nbsphinx", "*.ipynb", "python-nbsphinx-doc")
    _run_corpus(files, "application/x-ipynb+json")


@pytest.mark.slow
def test_man_pages_printed_to_pdf_by_groff(tmp_path: Path) -> None:
    if shutil.which("groff") is None or not Path("/usr/share/man/man1").is_dir():
        pytest.skip("needs groff with its PDF device: install Debian's groff")
    pages = sorted(Path("/usr/share/man/man1").glob("*.1.gz"))[:12]
    files = []
    for page in pages:
        import gzip

        pdf = tmp_path / (page.name.removesuffix(".1.gz") + ".pdf")
        made = subprocess.run(
            ["groff", "-man", "-Tpdf"],
            input=gzip.decompress(page.read_bytes()),
            capture_output=True,
        )
        if made.returncode == 0 and made.stdout.startswith(b"%PDF"):
            pdf.write_bytes(made.stdout)
            files.append(pdf)
    if not files:
        pytest.skip("groff made no PDF: install Debian's groff (groff-base has no PDF device)")
    _run_corpus(files, "application/pdf")


@pytest.mark.parametrize(
    ("root", "pattern", "package", "media_type"),
    [
        ("/usr/lib/python3.11/json", "*.py", "libpython3.11-stdlib", "text/x-python"),
        ("/usr/lib/python3.11/email", "*.py", "libpython3.11-stdlib", "text/x-python"),
        ("/usr/share/gocode/src", "*.go", "golang-github-pkg-errors-dev", "text/x-go"),
        ("/usr/share/cargo/registry", "*.rs", "librust-semver-dev", "text/x-rust"),
        (
            "/usr/share/nodejs/mj-context-menu",
            "*.d.ts",
            "node-mj-context-menu",
            "text/x-typescript",
        ),
        ("/usr/share/nodejs/mj-context-menu", "*.js", "node-mj-context-menu", "text/javascript"),
    ],
)
def test_installed_source_code(root: str, pattern: str, package: str, media_type: str) -> None:
    files = _installed(root, pattern, package)
    _run_corpus(files, media_type)
