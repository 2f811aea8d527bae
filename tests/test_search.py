"""SEARCH through the CLI, and how the index holds prose (ADR 0021): a paragraph whose terms are
exactly its confirmed sentences' terms has no full-text row of its own, its claims stand for it;
any other segment keeps its row, so every word of every segment stays searchable."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

from conftest import run_cli, write

from raytsystem.model.terms import term_text
from raytsystem.pipeline.claim_scoring import WEIGHTS
from raytsystem.pipeline.indexing import (
    Analyzer,
    ClaimFact,
    SegmentFact,
    _tiled,
    source_rows,
)
from raytsystem.storage import index_file, index_folder

DOC = """# Payments

## Retries

Retries stop after at most five attempts. The backoff doubles each time the gateway fails.

```python
gateway_timeout = 30  # seconds
```

- Refunds take three business days.
"""
PARAGRAPH = (
    "Retries stop after at most five attempts. The backoff doubles each time the gateway fails."
)


def _cli(ws: Path, *args: str) -> Any:
    result = run_cli(*args, "--json", cwd=ws)
    assert result.code == 0, (result.stdout, result.stderr)
    return result.json()


def _search(ws: Path, text: str) -> list[dict[str, Any]]:
    return list(_cli(ws, "search", text)["hits"])


def _latest_index(ws: Path) -> sqlite3.Connection:
    return sqlite3.connect(index_folder.index_files(ws / ".raytsystem" / "indexes")[0])


def _own_rows(ws: Path, segment_id: str) -> int:
    with _latest_index(ws) as conn:
        return int(conn.execute("SELECT count(*) FROM docs WHERE object_id = ?", (segment_id,))
                   .fetchone()[0])  # fmt: skip


def _standing_for(ws: Path, segment_id: str) -> list[str]:
    with _latest_index(ws) as conn:
        rows = conn.execute(
            "SELECT text FROM docs WHERE kind = 'claim' AND stands_for = ? ORDER BY text",
            (segment_id,),
        )
        return [r[0] for r in rows]


def test_a_paragraph_is_found_by_the_words_of_any_of_its_sentences(workspace: Path) -> None:
    write(workspace, "docs/pay.md", DOC)
    _cli(workspace, "ingest")
    hits = _search(workspace, "backoff doubles")
    assert [h["kind"] for h in hits] == ["paragraph"]
    (hit,) = hits
    assert hit["text"] == PARAGRAPH
    assert hit["sha256"] == hashlib.sha256(PARAGRAPH.encode("utf-8")).hexdigest()
    assert hit["lines"] == {"start": 5, "end": 5}
    assert hit["source_path"] == "docs/pay.md"
    assert hit["heading_path"] == ["Payments", "Retries"]
    assert hit["score"] > 0
    # Its two sentences stand for it; it has no row of its own.
    assert _own_rows(workspace, hit["id"]) == 0
    assert _standing_for(workspace, hit["id"]) == [
        "Retries stop after at most five attempts.",
        "The backoff doubles each time the gateway fails.",
    ]
    # Words of the first sentence find the same segment, once; the code block has its own row.
    assert [h["id"] for h in _search(workspace, "five attempts")] == [hit["id"]]
    found = {h["kind"]: h for h in _search(workspace, "gateway")}
    assert set(found) == {"paragraph", "code"}
    assert found["code"]["text"] == "gateway_timeout = 30  # seconds"
    assert _own_rows(workspace, found["code"]["id"]) == 1
    # A heading's words find everything under it: the claims carry their segment's heading.
    under = {h["kind"] for h in _search(workspace, "retries")}
    assert {"paragraph", "code", "list_item"} <= under
    # Claims are searched as before, and QUERY answers from them.
    claims = _cli(workspace, "search", "refunds", "--claims")["hits"]
    assert [c["text"] for c in claims] == ["Refunds take three business days."]
    assert _cli(workspace, "query", "backoff doubles")["status"] == "answered"
    assert _cli(workspace, "verify")["ok"] is True


def test_a_retracted_sentence_keeps_its_paragraph_searchable(workspace: Path) -> None:
    write(workspace, "docs/pay.md", DOC)
    _cli(workspace, "ingest")
    answer = _cli(workspace, "query", "backoff doubles gateway")
    claim = answer["citations"][0]["claim"]
    assert claim["statement"] == "The backoff doubles each time the gateway fails."
    (segment_id,) = {h["id"] for h in _search(workspace, "backoff doubles")}

    write(workspace, "knowledge/manual/r.md", f"---\nretracts: [{claim['id']}]\n---\n# R\n\nNo.\n")
    _cli(workspace, "ingest")
    assert _cli(workspace, "query", "backoff doubles")["status"] == "gap"
    # The paragraph is no longer its confirmed sentences alone: it has its own row again, and
    # its retracted sentence's words still find it.
    assert _own_rows(workspace, segment_id) == 1
    assert _standing_for(workspace, segment_id) == []
    hits = _search(workspace, "backoff doubles")
    assert [(h["id"], h["text"]) for h in hits] == [(segment_id, PARAGRAPH)]
    assert _cli(workspace, "verify")["ok"] is True
    rebuilt = _cli(workspace, "index", "rebuild")
    assert rebuilt["same_as_previous"] is True


# --- which segments keep their own row (source_rows, the one function ingest and rebuild use) --


def _segment(seg_id: str, kind: str, text: str, start: int = 0) -> SegmentFact:
    return SegmentFact(seg_id, "0" * 64, kind, '["H"]', text, start)


def _claim(
    claim_id: str, seg_id: str, start: int, statement: str, status: str = "confirmed"
) -> ClaimFact:
    """A claim whose excerpt is its statement (as extracted claims' are, whitespace aside)."""
    return ClaimFact(
        claim_id,
        "1" * 64,
        status,
        "extracted",
        statement,
        '["H"]',
        seg_id,
        start,
        start + len(statement),
    )


def _rows(segments: list[SegmentFact], claims: list[ClaimFact]) -> dict[str, tuple[str, ...]]:
    rows = source_rows("src", "docs/a.md", "nrm", segments, claims, Analyzer())
    return {r[1]: r for r in rows}


def test_only_a_prose_segment_its_confirmed_claims_cover_exactly_loses_its_row() -> None:
    segments = [
        _segment("covered", "paragraph", "Cats purr. Dogs bark.", 0),
        _segment("leftover", "paragraph", "Owls hoot. and then", 22),  # text in no claim
        _segment("disputed", "paragraph", "Bees hum. Ants march.", 43),
        _segment("claimless", "table_row", "— | —", 65),
        _segment("code", "code", "Cats purr.", 70),
    ]
    claims = [
        # Out of order: the claims of a segment are matched in the order of their text.
        _claim("c2", "covered", 11, "Dogs bark."),
        _claim("c1", "covered", 0, "Cats purr."),
        _claim("c3", "leftover", 22, "Owls hoot."),
        _claim("c4", "disputed", 43, "Bees hum."),
        _claim("c5", "disputed", 53, "Ants march.", status="disputed"),
        _claim("c6", "code", 70, "Cats purr."),  # a code block is never stood for
    ]
    rows = _rows(segments, claims)
    assert {k for k, r in rows.items() if r[0] == "segment"} == {
        "leftover",
        "disputed",
        "claimless",
        "code",
    }
    stands_for = {k: r[10] for k, r in rows.items() if r[0] == "claim"}
    assert stands_for == {"c1": "covered", "c2": "covered", "c3": "", "c4": "", "c6": ""}
    # The source's own row still holds every segment's terms.
    assert (
        rows["src"][index_file.IndexRow._fields.index("terms")]
        == "cat purr dog bark owl hoot and then bee hum ant march  cat purr"
    )


def test_a_segment_is_tiled_only_by_claims_in_order_with_whitespace_between() -> None:
    seg = _segment("s", "paragraph", " Cats purr.\n Dogs  bark. ", 100)

    def tiled(*spans: tuple[int, int]) -> bool:
        return _tiled(seg, [(start, end, "") for start, end in spans])

    cats, dogs = (101, 111), (113, 124)
    assert tiled(cats, dogs)
    assert not tiled(dogs, cats)  # taken in text order: source_rows sorts them
    assert not tiled(cats)  # "Dogs bark." is in no claim
    assert not tiled((101, 105), (105, 111), dogs)  # glued, no space
    assert not tiled((101, 115), dogs)  # overlapping
    assert not tiled((99, 111), dogs)  # starts before the segment
    assert not tiled(cats, (113, 126))  # ends after it
    assert not tiled((102, 111), dogs)  # a letter before the first


def test_a_tiled_segment_has_its_claims_terms_in_text_order() -> None:
    segments = [_segment("s", "paragraph", "Cats purr. ‼ Dogs bark.", 0)]
    # Out of order, and one claim with no terms: it adds none.
    claims = [_claim("c3", "s", 13, "Dogs bark."), _claim("c2", "s", 11, "‼")]
    claims.append(_claim("c1", "s", 0, "Cats purr."))
    rows = _rows(segments, claims)
    assert "s" not in rows and {rows[c][10] for c in ("c1", "c2", "c3")} == {"s"}
    assert (
        rows["src"][index_file.IndexRow._fields.index("terms")]
        == "cat purr dog bark"
        == term_text(segments[0].text)
    )


def test_claims_that_do_not_tile_a_segment_are_compared_by_their_terms() -> None:
    """Claims glued together (no space after `。`) or overlapping are not taken for the
    segment's text: the segment is analyzed, and stood for only if the terms agree."""
    glued = "猫が鳴く。犬が吠える。"
    segments = [
        _segment("glued", "paragraph", glued, 0),
        _segment("overlap", "paragraph", "Cats purr. Dogs bark.", 20),
        _segment("gap", "paragraph", "Cats purr. ¶ Dogs bark.", 50),  # a word-less gap
    ]
    claims = [
        _claim("g1", "glued", 0, "猫が鳴く。"),
        _claim("g2", "glued", 5, "犬が吠える。"),
        _claim("o1", "overlap", 20, "Cats purr. Dogs"),
        _claim("o2", "overlap", 31, "Dogs bark."),
        _claim("p1", "gap", 50, "Cats purr."),
        _claim("p2", "gap", 63, "Dogs bark."),
    ]
    rows = _rows(segments, claims)
    # The CJK sentences' bigrams are the paragraph's: stood for, after comparing.
    assert "glued" not in rows and rows["g1"][10] == rows["g2"][10] == "glued"
    # Overlapping claims repeat "dog": not the paragraph's terms.
    assert rows["overlap"][0] == "segment" and rows["o1"][10] == ""
    # A pilcrow is no word: the terms agree although the claims do not tile.
    assert "gap" not in rows and rows["p1"][10] == "gap"
    assert rows["src"][index_file.IndexRow._fields.index("terms")] == " ".join(
        term_text(s.text) for s in segments
    )  # the source's row has every segment's terms either way


def test_claims_reaching_past_their_segment_are_compared_and_can_fail() -> None:
    """Spans that do not tile the text (one ends past it) send the segment to the comparison,
    which these claims fail: the same terms, in another order."""
    segments = [_segment("s", "paragraph", "Cats purr. Dogs bark.")]
    claims = [_claim("c1", "s", 0, "Dogs bark. "), _claim("c2", "s", 12, "Cats purr.")]
    rows = _rows(segments, claims)
    assert rows["s"][0] == "segment"
    assert rows["c1"][10] == rows["c2"][10] == ""


# --- the best segments, from the best claims only ------------------------------------------

MANY = (
    "# Walruses\n\n"
    + " ".join(f"Walrus walrus tusk number {n}." for n in range(12))
    + (
        "\n\nA walrus appears once in this much longer sentence about other animals entirely.\n\n"
        "```\nwalrus = 1\n```\n\nSeals are not walruses, said nobody.\n"
    )
)


def _every_match(ws: Path, text: str) -> list[str]:
    """Segment IDs by their best score, from every matching row (no LIMIT anywhere)."""
    best: dict[str, float] = {}
    with _latest_index(ws) as conn:
        for table, id_column, where in (
            ("segments_fts", "d.object_id", ""),
            ("claims_fts", "d.stands_for", "AND d.stands_for <> ''"),
        ):
            for seg_id, score in conn.execute(
                f"SELECT {id_column}, bm25({table}, ?, ?, ?) FROM {table} f "
                f"JOIN docs d ON d.rowid = f.rowid WHERE {table} MATCH ? {where}",
                (*WEIGHTS, text),
            ):
                best[seg_id] = min(score, best.get(seg_id, score))
    return sorted(best, key=lambda s: (best[s], s))


def test_the_best_segments_are_those_every_matching_claim_would_give(workspace: Path) -> None:
    write(workspace, "docs/walrus.md", MANY)
    _cli(workspace, "ingest")
    expected = _every_match(workspace, '"walrus"')
    # Every segment under the heading: itself, the paragraph of twelve, the long sentence, the
    # code, the seals.
    assert len(expected) == 5
    for limit in (1, 2, 3, 4, 10):
        # --limit 2 reads the best 8 claims first, all of them the first paragraph's: it must
        # read on to find the second segment.
        got = _cli(workspace, "search", "walrus", "--limit", str(limit))["hits"]
        assert [h["id"] for h in got] == expected[:limit], limit
