"""Golden fixtures for the Markdown adapter (`normalize_markdown`) and the claims made from it.

Each `tests/fixtures/markdown/NAME.md` is an input; `NAME.json` next to it is what the adapter
must make of it:

    {
      "front_matter": "..." | null,           # Normalized.front_matter
      "findings": ["unclosed_code_fence"],    # codes of Normalized.findings
      "segments": [                           # one per segment, in order
        {"kind": "paragraph", "heading_path": ["Title"], "text": "...", "lines": [3, 4],
         "protected": [[s, e]], "refs": [[offset, label]], "links": [[s, e, target]],
         "label": "1"}                        # the last four only when the segment has them
      ],
      "claims": ["statement", ...]            # extracted claims, in order
    }

The fixtures cover: front matter (well-formed, malformed YAML, never closed), ATX and setext
headings and the heading path they give, emphasis/strikethrough/links/autolinks/images/inline
code/escapes/entities stripped to plain text, wiki links `[[Name]]` and `[[target|alias]]`,
nested and ordered lists and loose items, nested block quotes, tables (`table_header`, then
`table_row` with cells joined by " | "), fenced (backquote and tilde) and indented code, a
paragraph that is only inline code (kind `code`), HTML blocks and inline tags, footnote
references and definitions (kind `footnote` with its `label`), hard and soft breaks, an unclosed
fence, and Cyrillic/CJK text. `test_fixtures_cover_every_segment_kind` keeps it that way.

A fixture whose JSON has an `"xfail": "BUG: ..."` key records a known adapter bug: its JSON is
the *correct* output, written by hand, and the case is a strict xfail until the bug is fixed
(then delete the key).

To regenerate the expectations after an intended change of the adapter's output:

    UPDATE_GOLDEN=1 uv run pytest tests/test_markdown_adapter.py

This rewrites every NAME.json (except the xfail ones) from the current output. Then read the
diff line by line: every changed expectation is a change of what users get as evidence, and the
adapter's version must be bumped when the output for some input changes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from raytsystem.ids import scheme
from raytsystem.model.adapters import SEGMENT_KINDS, Normalized
from raytsystem.model.adapters.markdown import normalize_markdown
from raytsystem.model.adapters.plaintext import normalize_plaintext
from raytsystem.model.claims import extract_claims, segment_rows
from raytsystem.model.objects import chain_ids
from raytsystem.model.text import decode

FIXTURES = Path(__file__).parent / "fixtures" / "markdown"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
CASES = sorted(p.stem for p in FIXTURES.glob("*.md"))


def describe(normalized: Normalized) -> dict[str, Any]:
    """The JSON form of a normalization that the fixtures record."""
    segments = []
    for seg in normalized.segments:
        entry: dict[str, Any] = {
            "kind": seg.kind,
            "heading_path": list(seg.heading_path),
            "text": normalized.text[seg.start : seg.end],
            "lines": [seg.line_start, seg.line_end],
        }
        if seg.protected:
            entry["protected"] = [list(p) for p in seg.protected]
        if seg.refs:
            entry["refs"] = [list(r) for r in seg.refs]
        if seg.links:
            entry["links"] = [list(link) for link in seg.links]
        if seg.label is not None:
            entry["label"] = seg.label
        segments.append(entry)
    ids = chain_ids(scheme(1))  # scheme 1: these made-up parents are not IDs
    rows = segment_rows(ids, "nrm_golden", normalized)
    claims = extract_claims(ids, "src_golden", normalized, rows)
    return {
        "front_matter": normalized.front_matter,
        "findings": [f.code for f in normalized.findings],
        "segments": segments,
        "claims": [claim.statement for claim, _ in claims],
    }


def dump(expected: dict[str, Any]) -> str:
    """Stable JSON with one segment and one claim per line, so diffs are easy to review."""

    def one(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    lines = ["{"]
    if "xfail" in expected:
        lines.append(f'  "xfail": {one(expected["xfail"])},')
    lines.append(f'  "front_matter": {one(expected["front_matter"])},')
    lines.append(f'  "findings": {one(expected["findings"])},')
    for key in ("segments", "claims"):
        items = expected[key]
        if not items:
            lines.append(f'  "{key}": [],')
            continue
        lines.append(f'  "{key}": [')
        lines.extend(f"    {one(item)}," for item in items)
        lines[-1] = lines[-1].rstrip(",")
        lines.append("  ],")
    lines[-1] = lines[-1].rstrip(",")
    lines.append("}")
    return "\n".join(lines) + "\n"


def load(name: str) -> dict[str, Any]:
    path = FIXTURES / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def case_params() -> list[Any]:
    params = []
    for name in CASES:
        reason = load(name).get("xfail")
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(name, id=name, marks=marks))
    return params


@pytest.mark.parametrize("name", case_params())
def test_golden_fixture(name: str) -> None:
    source = FIXTURES / f"{name}.md"
    expected = load(name)
    actual = describe(normalize_markdown(decode(source.read_bytes())))
    if UPDATE and "xfail" not in expected:
        (FIXTURES / f"{name}.json").write_text(dump(actual), encoding="utf-8")
        expected = actual
    assert expected, f"{name}.json is missing: run with UPDATE_GOLDEN=1 and review it"
    expected = {k: v for k, v in expected.items() if k != "xfail"}
    assert actual == expected


def test_every_fixture_has_an_expectation_and_every_expectation_an_input() -> None:
    inputs = {p.stem for p in FIXTURES.glob("*.md")}
    outputs = {p.stem for p in FIXTURES.glob("*.json")}
    assert len(inputs) >= 15
    assert inputs == outputs


def test_fixture_json_is_in_the_canonical_dump_format() -> None:
    # Hand edits must keep the one-item-per-line layout that makes review diffs readable.
    for name in CASES:
        text = (FIXTURES / f"{name}.json").read_text(encoding="utf-8")
        assert text == dump(json.loads(text)), name


def test_fixtures_cover_every_segment_kind() -> None:
    kinds = {seg["kind"] for name in CASES for seg in load(name)["segments"]}
    # The prose of source code, which Markdown never makes (tests/test_adapters_formats.py).
    assert kinds == set(SEGMENT_KINDS) - {"docstring", "comment"}


def test_fixtures_record_wiki_links_footnote_refs_and_protected_code() -> None:
    segments = [seg for name in CASES for seg in load(name)["segments"]]
    assert any(seg.get("links") for seg in segments)
    assert any(seg.get("refs") for seg in segments)
    assert any(seg.get("protected") for seg in segments)
    assert any(seg.get("label") for seg in segments)


def test_golden_dump_round_trips() -> None:
    sample = describe(normalize_markdown("# T\n\nA **b** [[c|d]][^1].\n\n[^1]: N.\n"))
    assert json.loads(dump(sample)) == sample
    assert json.loads(dump({**sample, "segments": [], "claims": []}))["segments"] == []


# --- the plain-text adapter, whose rules fit in a few cases -----------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("  \n\t\n", []),
        ("One line.", [("One line.", 1, 1)]),
        ("  a\n b  \n\n\n c\n", [("a\nb", 1, 2), ("c", 5, 5)]),
        ("# not a heading\n**not bold**", [("# not a heading\n**not bold**", 1, 2)]),
    ],
    ids=["empty", "whitespace", "one-line", "blocks-and-strip", "markup-is-text"],
)
def test_plaintext_blocks_are_paragraphs_with_stripped_lines(
    text: str, expected: list[tuple[str, int, int]]
) -> None:
    normalized = normalize_plaintext(text)
    got = [
        (normalized.text[s.start : s.end], s.line_start, s.line_end) for s in normalized.segments
    ]
    assert got == expected
    assert all(s.kind == "paragraph" and s.heading_path == () for s in normalized.segments)
    assert normalized.findings == () and normalized.front_matter is None
