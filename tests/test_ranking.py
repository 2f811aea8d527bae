"""QUERY's ranking internals against a real index: the claim BM25 computed in Python is FTS5's
own, the per-source blocks stay exact through incremental patches, both ways of finding a
source's claims agree, and a rebuilt index (other rowids) chooses exactly the same claims."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli, write
from hypothesis import given, settings
from hypothesis import strategies as st

from raytsystem.errors import IntegrityError
from raytsystem.pipeline import claim_scoring, ranking, source_choice
from raytsystem.pipeline.query import parse_query
from raytsystem.storage import index_file

SQLITE = {"RAYTSYSTEM_DATABASE_URL": ""}
RESETS = "Retry backoff resets after success."
WORDS = [
    "ledger",
    "index",
    "claim",
    "source",
    "revision",
    "hash",
    "blob",
    "query",
    "answer",
    "gap",
    "retry",
    "backoff",
    "payment",
    "refund",
    "storage",
    "network",
    "cache",
    "token",
    "budget",
    "review",
    "note",
    "entity",
    "span",
    "excerpt",
    "generation",
    "chain",
    "verify",
    "manual",
    "adapter",
    "segment",
    "sentence",
    "heading",
    "table",
    "list",
    "code",
    "quote",
    "link",
]
OTHER = [
    "журнал",
    "индекс",
    "проверка",
    "источник",
    "系统",
    "文件",
    "検索",
    "設定",
    "ファイル",
    "ディレクトリ",
]
QUESTIONS = [
    "ledger",
    "storage network",
    "retry backoff payment",
    "журнал проверка",
    "系统文件",
    "claim hash verify chain span",
    "table",
    "refund",
    "検索 設定 index",
    "ファイルの設定",  # a phrase term (ファ ァイ イル) and a kanji one
    "ディレクトリ",
]


def _document(rng: random.Random, n: int) -> str:
    lines = [f"# {rng.choice(WORDS).title()} {rng.choice(WORDS)} {n}", ""]
    for section in range(rng.randint(1, 3)):
        lines += [f"## {rng.choice(WORDS).title()} {rng.choice(WORDS)}", ""]
        for _ in range(rng.randint(2, 6)):
            vocab = WORDS + (OTHER if rng.random() < 0.3 else [])
            words = [rng.choice(vocab) for _ in range(rng.randint(4, 14))]
            lines.append(" ".join(words).capitalize() + ".")
        lines.append("")
        if section == 1:
            lines += [f"- {rng.choice(WORDS)} {rng.choice(WORDS)} item." for _ in range(3)]
            lines.append("")
    return "\n".join(lines)


def _ingest(ws: Path) -> None:
    result = run_cli("ingest", "--json", cwd=ws, env=SQLITE)
    assert result.code == 0, result.stderr


def _current_index(ws: Path) -> tuple[Path, str]:
    (path,) = sorted((ws / ".raytsystem" / "indexes").glob("*.sqlite3"))[-1:]
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        meta = index_file.read_meta(conn)
    return path, meta["generation_hash"]


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory, _workspace_template: Path) -> Path:
    """A 60-file workspace ingested, then patched: files edited, one deleted, one added."""
    ws = tmp_path_factory.mktemp("ranking") / "ws"
    shutil.copytree(_workspace_template, ws, symlinks=True)
    rng = random.Random(7)
    for n in range(60):
        write(ws, f"docs/{rng.choice(WORDS)}/{n:02d}.md", _document(rng, n))
    _ingest(ws)
    files = sorted((ws / "docs").rglob("*.md"))
    for path in files[:5]:
        path.write_text(_document(rng, 100), encoding="utf-8")
    files[10].unlink()
    write(ws, "docs/new/extra.md", _document(rng, 200))
    _ingest(ws)
    return ws


@pytest.fixture
def conn(patched: Path) -> Iterator[sqlite3.Connection]:
    path, generation = _current_index(patched)
    with index_file.open_index(path, generation) as c:
        yield c


def _holds(tokens: list[str], term: str) -> bool:
    """The tokens hold the term: a word, or a phrase term's words in a row."""
    words = term.split(" ")
    return any(tokens[i : i + len(words)] == words for i in range(len(tokens)))


def test_claim_scores_are_fts5_bm25_and_only_claims_that_hold_the_question(
    conn: sqlite3.Connection,
) -> None:
    """`score_claims` scores each kind of claim once: every score must still be FTS5's own
    bm25() of that very claim, and a claim left out must be one that does not itself hold
    enough of the question's terms."""
    compared = left_out = with_phrase = 0
    for question in QUESTIONS:
        terms = parse_query(question)
        # all the terms searched, or only the first (the others too common, as QUERY decides)
        for searched in {tuple(terms), tuple(terms[:1])}:
            scorer = claim_scoring.ClaimScorer(conn, list(searched))
            rows = conn.execute(
                "SELECT rowid, bm25(claims_fts, ?, ?, ?), terms, heading, path FROM claims_fts "
                "WHERE claims_fts MATCH ?",
                (*claim_scoring.WEIGHTS, claim_scoring.match_expression(list(searched))),
            ).fetchall()
            for need in (1, 2):  # `min_terms`: the ranking asks for two, then for one
                scored = claim_scoring.score_claims(
                    conn, [r[0] for r in rows], terms, scorer, min_terms=need
                )
                for rowid, bm25, *columns in rows:
                    held = {t for t in terms if any(_holds(c.split(), t) for c in columns)}
                    if len(held) >= min(len(terms), need):
                        assert -scored[rowid] == bm25, (question, searched, columns)
                        compared += 1
                        with_phrase += any(" " in t for t in held)
                    else:
                        assert rowid not in scored, (question, searched, columns)
                        left_out += 1
    assert compared > 100 and left_out > 10
    assert with_phrase > 5  # claims holding a phrase term (a katakana word) were compared


def test_fts5_scores_claims_that_all_hold_the_question_the_same(conn: sqlite3.Connection) -> None:
    """Claims known to hold the question (`all_hold`) and many of those holding a searched
    term are scored by FTS5's bm25(): the same scores as reading them, for the same claims."""
    compared = 0
    for question in QUESTIONS:
        terms = parse_query(question)
        scorer = claim_scoring.ClaimScorer(conn, terms)
        expression = claim_scoring.match_expression(terms)
        rowids = [
            r
            for (r,) in conn.execute(
                "SELECT rowid FROM claims_fts WHERE claims_fts MATCH ?", (expression,)
            )
        ]
        assert scorer.hits < claim_scoring.FTS5_SCORING * len(rowids)  # FTS5 does score them
        read = claim_scoring.score_claims(conn, rowids, terms, scorer, min_terms=1)
        by_fts5 = claim_scoring.score_claims(
            conn, rowids, terms, scorer, min_terms=1, all_hold=True
        )
        assert by_fts5 == read
        compared += len(read)
    assert compared > 100


def test_candidates_are_the_same_whoever_scores_their_claims(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether FTS5 or this process scores the claims (`FTS5_SCORING`) changes no candidate:
    the same claims, the same relevance, the same tiers, for questions of one term, of pairs
    of terms, and of claims of one term in the sources that have no better."""

    def found(scoring: int) -> list[tuple[int, float, int, str]]:
        monkeypatch.setattr(claim_scoring, "FTS5_SCORING", scoring)
        out = []
        for question in QUESTIONS:
            got = ranking.candidates(conn, parse_query(question))
            out += sorted((c.rowid, c.score, c.tier, c.source_id) for c in got)
        return out

    here, by_fts5 = found(0), found(10**9)
    assert here == by_fts5 and len(here) > 100


def test_fts_totals_are_rows_and_tokens(conn: sqlite3.Connection) -> None:
    rows = conn.execute("SELECT terms, heading, path FROM claims_fts").fetchall()
    tokens = sum(len(column.split()) for row in rows for column in row)
    assert claim_scoring.fts_totals(conn, "claims_fts") == (len(rows), tokens)


def test_blocks_stay_exact_through_patches(conn: sqlite3.Connection) -> None:
    assert index_file.check_rows(conn) == []
    (blocks,) = conn.execute("SELECT count(*) FROM blocks").fetchone()
    (sources,) = conn.execute("SELECT count(*) FROM docs WHERE kind = 'source'").fetchone()
    assert blocks == sources == 60  # 60 files, one deleted, one added


_LAST_BLOCK = "source_rowid = (SELECT max(source_rowid) FROM blocks)"


@pytest.mark.parametrize(
    ("damage", "reported"),
    [
        (f"UPDATE blocks SET high = high - 1 WHERE {_LAST_BLOCK}", "does not span its rows"),
        (
            f"UPDATE blocks SET source_rowid = NULL WHERE {_LAST_BLOCK}",
            "does not name its source row",
        ),
        (f"DELETE FROM blocks WHERE {_LAST_BLOCK}", "have no block"),
        ("INSERT INTO blocks VALUES ('src_gone', NULL, 10000000, 10000001)", "has no rows"),
    ],
)
def test_a_broken_block_is_reported(
    patched: Path, tmp_path: Path, damage: str, reported: str
) -> None:
    path, _ = _current_index(patched)
    copy = tmp_path / "copy.sqlite3"
    shutil.copyfile(path, copy)
    with sqlite3.connect(copy) as c:
        c.execute(damage)
    with sqlite3.connect(copy) as c:
        problems = index_file.check_rows(c)
    assert len(problems) == 1 and reported in problems[0], problems


def test_a_row_moved_out_of_its_block_is_reported(patched: Path, tmp_path: Path) -> None:
    """`check_rows` reads rows in rowid order, a source's rows at a time: a row of the first
    source moved past the last block is found apart from its source's other rows."""
    path, _ = _current_index(patched)
    copy = tmp_path / "copy.sqlite3"
    shutil.copyfile(path, copy)
    with sqlite3.connect(copy) as c:
        (first,) = c.execute("SELECT min(rowid) FROM docs WHERE kind = 'claim'").fetchone()
        (end,) = c.execute("SELECT max(rowid) + 1 FROM docs").fetchone()
        (source_id,) = c.execute("SELECT source_id FROM docs WHERE rowid = ?", (first,)).fetchone()
        c.execute("UPDATE claims_fts SET rowid = ? WHERE rowid = ?", (end, first))
        c.execute("UPDATE docs SET rowid = ? WHERE rowid = ?", (end, first))
    with sqlite3.connect(copy) as c:
        problems = index_file.check_rows(c)
    assert f"rows of source {source_id} are not all in its block" in problems, problems
    assert f"the block of source {source_id} does not span its rows" in problems, problems


def test_both_ways_of_finding_claims_agree(conn: sqlite3.Connection) -> None:
    blocks = conn.execute("SELECT low, high FROM blocks ORDER BY low").fetchall()
    some = blocks[::3]
    found = 0
    for question in QUESTIONS:
        terms = parse_query(question)
        for expression in {
            claim_scoring.match_expression(terms),
            claim_scoring.claim_filter(terms, terms),
        }:
            scan = claim_scoring.claims_in(conn, expression, some, True)
            per_block = claim_scoring.claims_in(conn, expression, some, False)
            assert sorted(scan) == sorted(per_block)
            found += len(scan)
    assert found > 50


def _answers(ws: Path) -> dict[str, list[tuple[str, float]]]:
    path, generation = _current_index(ws)
    with index_file.open_index(path, generation) as c:
        return {
            q: [(x.claim_id, round(x.score, 12)) for x in ranking.choose(c, parse_query(q), 10)]
            for q in QUESTIONS
        }


def _rowids(ws: Path) -> dict[str, int]:
    path, _ = _current_index(ws)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        return dict(c.execute("SELECT object_id, rowid FROM docs"))


def _claims_in_row_order(ws: Path) -> dict[str, list[str]]:
    """Each source's claim IDs in rowid order: the order the ranking reads as text order."""
    path, _ = _current_index(ws)
    out: dict[str, list[str]] = {}
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        for source_id, object_id in c.execute(
            "SELECT source_id, object_id FROM docs WHERE kind = 'claim' ORDER BY rowid"
        ):
            out.setdefault(source_id, []).append(object_id)
    return out


def test_a_rebuilt_index_chooses_the_same_claims(patched: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(patched, ws, symlinks=True)
    before, rowids_before = _answers(ws), _rowids(ws)
    order_before = _claims_in_row_order(ws)
    # The documents are random words, which meet in a sentence only as often as chance puts
    # them there: the gap rule (`meeting.py`) makes some of the questions of several words
    # gaps, and a gap must be a gap in the rebuilt index too (compared below, as answers are).
    assert sum(1 for answers in before.values() if answers) >= len(QUESTIONS) // 2
    result = run_cli("index", "rebuild", "--json", cwd=ws, env=SQLITE)
    assert result.code == 0, result.stderr
    assert result.json()["same_as_previous"] is True
    assert _rowids(ws) != rowids_before, "the rebuild must renumber rows for this to test anything"
    assert _answers(ws) == before
    # Rows read back from the ledger are in text order, as a worker wrote them.
    assert _claims_in_row_order(ws) == order_before


@pytest.mark.parametrize("limit", [1, 3, 7, 20])
def test_best_sources_break_ties_by_source_id(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    monkeypatch.setattr(source_choice, "SOURCE_CANDIDATES", limit)
    for question in QUESTIONS:
        expression = claim_scoring.match_expression(parse_query(question))
        everything = conn.execute(
            "SELECT f.rowid, bm25(sources_fts, ?, ?, ?) AS score, d.source_id "
            "FROM sources_fts f JOIN docs d ON d.rowid = f.rowid WHERE sources_fts MATCH ?",
            (*claim_scoring.WEIGHTS, expression),
        ).fetchall()
        expected = sorted(everything, key=lambda x: (x[1], x[2]))[:limit]
        assert source_choice.best_sources(conn, expression) == expected, question


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["manual", "extracted"]),
            st.sampled_from([0.5, 1.25, 1.25 + 1e-12, 2.0]),  # ties, also after rounding
            st.sampled_from(["a b", "a c", "b c", "d"]),  # near-duplicates share terms
            st.text("0123456789abcdef", min_size=4, max_size=4),  # claim IDs, some equal
        ),
        max_size=40,
    ),
    st.integers(1, 8),
)
def test_rank_reads_ids_of_tied_runs_only_and_orders_as_by_every_key(
    rows: list[tuple[str, float, str, str]], limit: int
) -> None:
    """`rank` orders by (authority, relevance) and reads claim IDs only for the runs it gets
    to: the same claims, in the same order, as sorting every claim by all three keys."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE docs (rowid INTEGER PRIMARY KEY, object_id TEXT)")
    conn.executemany(
        "INSERT INTO docs VALUES (?, ?)",
        [(i + 1, f"clm_{cid}") for i, (*_, cid) in enumerate(rows)],
    )
    conn.execute("CREATE TABLE claims_fts_content (id INTEGER PRIMARY KEY, c0 TEXT)")
    conn.executemany(
        "INSERT INTO claims_fts_content VALUES (?, ?)",
        [(i + 1, terms) for i, (_, _, terms, _) in enumerate(rows)],
    )

    def found() -> list[ranking.Candidate]:
        # as `candidates` makes them, every other one: the terms left for `rank` to read
        return [
            ranking.Candidate(
                "",
                "src",
                score,
                None if i % 2 else terms,
                i + 1,
                ranking.AUTHORITY_RANK[authority],
            )
            for i, (authority, score, terms, _) in enumerate(rows)
        ]

    expected, seen = [], set()
    everything = found()
    for c in everything:
        c.claim_id = f"clm_{rows[c.rowid - 1][3]}"
        c.dedupe_key = rows[c.rowid - 1][2]
    everything.sort(key=lambda c: (c.tier, -round(c.score, 9), c.claim_id))
    for c in everything:
        if c.dedupe_key not in seen:
            seen.add(c.dedupe_key)
            expected.append((c.claim_id, c.rowid))
    got = [(c.claim_id, c.rowid) for c in ranking.rank(conn, found(), limit)]
    assert got == expected[:limit]


@pytest.mark.parametrize("missing", ["docs", "claims_fts_content"])
def test_rank_fails_closed_on_a_claim_with_only_some_of_its_rows(missing: str) -> None:
    """A damaged index that lost one of a candidate's rows: skipping the claim would answer
    as if it were not known (a gap, exit 0), so the query fails closed instead."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE docs (rowid INTEGER PRIMARY KEY, object_id TEXT)")
    conn.executemany("INSERT INTO docs VALUES (?, ?)", [(1, "clm_a"), (2, "clm_b"), (3, "clm_c")])
    conn.execute("CREATE TABLE claims_fts_content (id INTEGER PRIMARY KEY, c0 TEXT)")
    conn.executemany(
        "INSERT INTO claims_fts_content VALUES (?, ?)", [(1, "x"), (2, "y"), (3, "x y")]
    )
    found = [
        ranking.Candidate("", "src", 1.0 - i / 10, None, i, ranking.EXTRACTED) for i in (1, 2, 3)
    ]
    assert [c.claim_id for c in ranking.rank(conn, found, 5)] == ["clm_a", "clm_b", "clm_c"]
    conn.execute(f"DELETE FROM {missing} WHERE {'rowid' if missing == 'docs' else 'id'} = 2")
    found = [
        ranking.Candidate("", "src", 1.0 - i / 10, None, i, ranking.EXTRACTED) for i in (1, 2, 3)
    ]
    with pytest.raises(IntegrityError) as caught:
        ranking.rank(conn, found, 5)
    assert caught.value.code == "index_row_mismatch"


def test_rank_reads_ids_in_few_queries_through_many_near_duplicates() -> None:
    """A common word's best claims may all say the same thing: the walk to `limit` different
    ones reads their IDs in batches that double, not one query per claim."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE docs (rowid INTEGER PRIMARY KEY, object_id TEXT)")
    n = 5000
    conn.executemany(
        "INSERT INTO docs VALUES (?, ?)", [(i, f"clm_{i:08d}") for i in range(1, n + 1)]
    )
    found = [
        ranking.Candidate(
            "",
            "src",
            1.0 - i / n,
            "same" if i < n - 3 else f"t{i}",
            i,
            ranking.EXTRACTED,
        )
        for i in range(1, n + 1)
    ]
    reads: list[str] = []
    conn.set_trace_callback(reads.append)
    chosen = ranking.rank(conn, found, 5)
    assert [c.claim_id for c in chosen] == [f"clm_{i:08d}" for i in (1, n - 3, n - 2, n - 1, n)]
    assert len(reads) <= 12, len(reads)


def test_a_claim_counts_its_neighbours_within_its_source_only() -> None:
    w = ranking.NEIGHBOUR_WEIGHT
    assert 0 < w < 1
    spans = [(1, 3), (4, 6)]
    assert ranking.in_context({2: 1.0, 3: 2.0}, spans) == {2: 1.0 + w * 2.0, 3: 2.0 + w * 1.0}
    # Rows 3 and 4 are adjacent rowids but the last row of one source and the first of the
    # next: not each other's context.
    assert ranking.in_context({3: 1.0, 4: 5.0}, spans) == {3: 1.0, 4: 5.0}
    assert ranking.in_context({4: 1.0, 6: 1.0}, spans) == {4: 1.0, 6: 1.0}


def test_a_sentence_beside_another_on_the_question_ranks_higher(
    tmp_path: Path, _workspace_template: Path
) -> None:
    """Two sources alike in every count BM25 sees (the same words, lengths and heading), the
    question's two sentences adjacent in one and apart in the other: the adjacent ones rank
    first, each raised by the other."""
    ws = tmp_path / "ws"
    shutil.copytree(_workspace_template, ws, symlinks=True)
    other = "Alpha beta gamma delta. Epsilon zeta eta theta."
    write(ws, "docs/a.md", f"# Notes\n\nRetry backoff doubles each time. {RESETS} {other}\n")
    write(ws, "docs/b.md", f"# Notes\n\nRetry backoff doubles each round. {other} {RESETS}\n")
    _ingest(ws)
    path, generation = _current_index(ws)
    with index_file.open_index(path, generation) as conn:
        found = ranking.candidates(conn, parse_query("retry backoff"))
        ranking.read_statements(conn, found)
        paths = dict(conn.execute("SELECT source_id, source_path FROM docs WHERE kind = 'source'"))
    score = {(paths[c.source_id], c.text): c.score for c in found}
    assert len(score) == 4
    doubles_a = score["docs/a.md", "Retry backoff doubles each time."]
    doubles_b = score["docs/b.md", "Retry backoff doubles each round."]
    assert doubles_a == pytest.approx(score["docs/a.md", RESETS])
    assert doubles_b == pytest.approx(score["docs/b.md", RESETS])
    # Each of a.md's is raised by the other (an equal claim score): relevance is the source's
    # share of the best source (1 for both) plus the claim's of the best claim (a.md's).
    assert doubles_a > doubles_b
    assert doubles_a == pytest.approx(2.0)
    assert doubles_b == pytest.approx(1 + 1 / (1 + ranking.NEIGHBOUR_WEIGHT))

    answer = json.loads(run_cli("query", "retry backoff", "--json", cwd=ws, env=SQLITE).stdout)
    first = answer["citations"][0]["evidence"][0]
    assert first["source_path"] == "docs/a.md", answer["citations"]


def test_a_question_of_three_words_is_answered_by_the_lines_holding_all_three(
    tmp_path: Path, _workspace_template: Path
) -> None:
    """Lines holding two of the three words ("rotate keys", without "nightly") rank with the
    one holding all three only while no line holds all three."""
    ws = tmp_path / "ws"
    shutil.copytree(_workspace_template, ws, symlinks=True)
    two = "Rotate the signing keys by hand when a key leaks."
    write(ws, "docs/a.md", f"# Keys\n\n{two} Rotate keys before a release.\n")
    write(ws, "docs/b.md", "# Jobs\n\nA job rotates the keys nightly.\n")
    write(ws, "docs/c.md", "# Backups\n\nBackups run nightly.\n")
    _ingest(ws)

    def cited(question: str) -> list[str]:
        body = json.loads(run_cli("query", question, "--json", cwd=ws, env=SQLITE).stdout)
        return [c["claim"]["statement"] for c in body["citations"]]

    assert cited("rotate keys nightly") == ["A job rotates the keys nightly."]
    assert two in cited("rotate keys weekly")  # no line holds all three: two of them answer
    (ws / "docs/b.md").unlink()
    _ingest(ws)
    assert two in cited("rotate keys nightly")


def test_every_source_answers_only_covering_ones_are_judged(
    tmp_path: Path, _workspace_template: Path
) -> None:
    """With `every_source` (stored vectors rank, ADR 0044), a source among the best by BM25
    that holds too little of the question's weight (here "card" alone, in every source) has
    its claims ranked too, not judged; without it, it may not answer. (No line holds all
    three words, which would leave only such lines to answer.)"""
    ws = tmp_path / "ws"
    shutil.copytree(_workspace_template, ws, symlinks=True)
    write(ws, "docs/a.md", "# Refunds\n\nRefunds are paid back within a week.\n")
    write(ws, "docs/b.md", "# Reader\n\nThe card reader is broken.\n")
    write(ws, "docs/c.md", "# Wallet\n\nKeep the card in the wallet.\n")
    write(ws, "docs/d.md", "# Shop\n\nThe shop takes a card.\n")
    write(ws, "knowledge/manual/cards.md", "# Cards\n\nA card expires after five years.\n")
    _ingest(ws)
    path, generation = _current_index(ws)
    with index_file.open_index(path, generation) as conn:
        paths = dict(conn.execute("SELECT source_id, source_path FROM docs WHERE kind = 'source'"))
        terms = parse_query("refunds paid card")

        def found(every_source: bool) -> dict[str, set[tuple[bool, int]]]:
            out: dict[str, set[tuple[bool, int]]] = {}
            for c in ranking.candidates(conn, terms, word_gaps=False, every_source=every_source):
                out.setdefault(paths[c.source_id], set()).add((c.judged, c.tier))
            return out

        extracted = ranking.EXTRACTED
        assert found(False) == {"docs/a.md": {(True, extracted)}}
        # The manual note short of the coverage ranks as an extracted claim: a passing
        # mention does not go before another source's answer.
        assert found(True) == {
            "docs/a.md": {(True, extracted)},
            "docs/b.md": {(False, extracted)},
            "docs/c.md": {(False, extracted)},
            "docs/d.md": {(False, extracted)},
            "knowledge/manual/cards.md": {(False, extracted)},
        }
        # No source holds enough of the question: nothing answers, either way.
        unknown = parse_query("card zebra quokka")
        assert ranking.candidates(conn, unknown, word_gaps=False, every_source=True) == []


def test_claims_read_back_from_the_ledger_are_written_in_text_order(patched: Path) -> None:
    """`index_rows` writes a source's claim rows in text order, as the workers wrote them,
    whatever order the ledger gives its claim states in (here reversed): the ranking reads
    adjacent rows as adjacent sentences."""
    from raytsystem.api import Session
    from raytsystem.pipeline.indexing import SourceForIndex, index_rows
    from raytsystem.storage import generations, states

    written = _claims_in_row_order(patched)
    session = Session.open(patched)
    with session.ledger().reading() as conn:
        current = generations.head(conn)
        assert current is not None
        active = states.active_sources(conn, current.number).values()
        claims = states.claim_states(conn, current.number, [a.source_id for a in active])
        sources = [
            SourceForIndex(
                a.source_id,
                a.path,
                a.normalization_id,
                [c for _, c in reversed(claims.get(a.source_id, []))],
            )
            for a in active
        ]
        rows = index_rows(conn, session.blobs, sources)
    rebuilt = {
        sid: [r[1] for r in source_rows if r[0] == "claim"] for sid, source_rows in rows.items()
    }
    assert {sid: ids for sid, ids in rebuilt.items() if ids} == written
    assert sum(1 for ids in written.values() if len(ids) > 1) >= 10
