"""Text analysis for search (model/terms.py): the terms FTS5 indexes and queries look up."""

from __future__ import annotations

import contextlib
import sqlite3
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from raytsystem.model.objects import statement_of
from raytsystem.model.terms import _by_script, query_terms, term_text, terms
from raytsystem.storage import index_file as index


def test_latin_words_are_folded_and_stemmed_as_english() -> None:
    assert terms("Running RUNS ran") == ["run", "run", "ran"]


def test_cyrillic_words_are_stemmed_as_russian() -> None:
    assert terms("сжатия сжатие") == ["сжат", "сжат"]


def test_nfkc_folds_full_width_letters_and_digits() -> None:
    assert terms("ＡＢＣ １２３") == terms("abc 123") == ["abc", "123"]


def test_han_and_kana_runs_become_bigrams_and_a_lone_character_a_unigram() -> None:
    assert terms("压缩算法") == ["压缩", "缩算", "算法"]
    assert terms("数 据") == ["数", "据"]
    # Bigrams stay within one script's run: no "縮で" across kanji and hiragana.
    assert terms("gzip圧縮です") == ["gzip", "圧縮", "です"]
    assert terms("ファイルを圧縮") == ["ファ", "ァイ", "イル", "を", "圧縮"]


def test_a_question_keeps_a_katakana_word_as_one_phrase_and_drops_hiragana() -> None:
    assert query_terms("ファイルを圧縮する") == ["ファ ァイ イル", "圧縮"]
    # A kanji word in a Japanese question is one word too; Chinese (no kana) stays bigrams.
    assert query_terms("プロセスを一覧表示") == ["プロ ロセ セス", "一覧 覧表 表示"]
    assert query_terms("压缩文件") == ["压缩", "缩文", "文件"]
    assert query_terms("データ") == ["デー ータ"] and query_terms("ログ") == ["ログ"]
    assert query_terms("압축 파일") == ["압축", "파일"]
    assert query_terms("これは") == ["これ", "れは"]  # hiragana alone is kept
    assert query_terms("the compressed archives") == ["compress", "archiv"]


def test_a_question_drops_function_words_of_every_kind() -> None:
    """Auxiliaries, pronouns and quantifiers say nothing of what is asked: a line holding
    "all" and one word of the question is not a line holding two of its words."""
    assert query_terms("Show all environment variables") == ["show", "environ", "variabl"]
    assert query_terms("What year did the Berlin Wall fall?") == ["year", "berlin", "wall", "fall"]
    assert query_terms("Could he have been there?") == []


def test_compounds_meet_their_parts() -> None:
    """filenames, file names, file-name and filename are the same two terms."""
    assert terms("filenames") == terms("file names") == terms("file-name") == ["file", "name"]
    assert terms("Filename") == ["file", "name"]
    assert query_terms("which filenames") == ["file", "name"]
    # A common word is not taken apart, whatever it is made of.
    assert terms("database together therefore") == ["databas", "togeth", "therefor"]


def test_russian_noun_forms_share_a_stem() -> None:
    """Snowball cuts a bare "-ив" as a gerund ending (архив -> арх) but not from архива."""
    forms = "архив архива архиву архивом архиве архивы архивов архивами архивах"
    assert set(terms(forms)) == {"архив"}
    assert set(terms("массив массива массивы")) == {"массив"}
    assert set(terms("состав состава составы")) == {"состав"}


def test_punctuation_and_underscores_separate_terms() -> None:
    assert terms("foo_bar, baz-qux! (42)") == ["foo", "bar", "baz", "qux", "42"]


def test_stopwords_are_dropped_only_when_asked() -> None:
    assert "the" in terms("the limit")
    assert terms("the limit", drop_stopwords=True) == ["limit"]


def test_term_text_joins_terms_with_spaces() -> None:
    assert term_text("Requests per second") == "request per second"


_texts = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x52F)  # Latin to Cyrillic
    | st.sampled_from(list("ＡＢ１２ ._-\u00a0\u2003ﬁ")),
    max_size=60,
)


@given(_texts)
def test_property_the_fast_path_gives_the_terms_of_the_script_path(text: str) -> None:
    """Text without CJK skips the per-run script split; the terms must be the same."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    assert terms(text) == _by_script(folded, False)


@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=60))
def test_property_ascii_text_gets_the_terms_of_the_general_path(text: str) -> None:
    """ASCII text skips NFKC and case folding (lower() is the same there)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    assert terms(text) == _by_script(folded, False)
    assert term_text(text) == " ".join(_by_script(folded, False))


@given(st.text(max_size=40))
def test_property_terms_are_letters_and_digits_only(text: str) -> None:
    for term in terms(text):
        assert term and all(ch.isalnum() for ch in term), term


@given(st.text(max_size=60))
def test_property_the_index_tokenizes_terms_exactly_where_python_splits_them(text: str) -> None:
    """QUERY computes BM25 from a claim's stored terms split by `str.split`; FTS5 must see
    the same tokens, in the same order, or the two scores part."""
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        conn.executescript(index.SCHEMA)  # the index's own tables, tokenizer included
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(claims_fts, 'instance')")
        stored = term_text(text)
        conn.execute(
            "INSERT INTO claims_fts (rowid, terms, heading, path) VALUES (1, ?, '', '')", (stored,)
        )
        tokens = [term for (term,) in conn.execute("SELECT term FROM v ORDER BY offset")]
    assert tokens == stored.split()


_WHITESPACE = [chr(cp) for cp in range(0x110000) if chr(cp).isspace()]
_any_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",))
    | st.sampled_from(list("\u0301\u0308\u3099ᄀ\u1161ㄱ가ͺ①㈠ﬁ。．")),  # marks, jamo, compat
    max_size=30,
)


@given(_any_text, st.text(alphabet=st.sampled_from(_WHITESPACE), min_size=1, max_size=3), _any_text)
def test_property_terms_of_texts_apart_by_whitespace_are_their_terms_in_order(
    before: str, space: str, after: str
) -> None:
    """The index takes a paragraph's terms from its sentences' when whitespace alone lies
    between them (indexing._tiled): analysis must cut words at any whitespace, and no
    whitespace may combine with what is around it."""
    assert terms(before + space + after) == terms(before) + terms(after)
    joined = " ".join(t for t in (term_text(before), term_text(after)) if t)
    assert term_text(before + space + after) == joined


@given(_any_text)
def test_property_a_statement_has_the_terms_of_its_excerpt(excerpt: str) -> None:
    """A claim's statement is its excerpt with whitespace collapsed and NFC: the same terms."""
    assert terms(statement_of(excerpt)) == terms(excerpt)


def _composing() -> list[str]:
    """Every character NFKC may move or join to a neighbour: combining marks (nonzero class),
    parts of canonical decompositions, and Hangul jamo, which compose algorithmically."""
    chars: set[str] = set()
    for cp in range(0x110000):
        ch = chr(cp)
        if unicodedata.category(ch) == "Cs":
            continue
        if unicodedata.combining(ch):
            chars.add(ch)
        decomposition = unicodedata.decomposition(ch)
        if decomposition and not decomposition.startswith("<"):
            chars.update(chr(int(part, 16)) for part in decomposition.split())
    chars.update(map(chr, range(0x1100, 0x1200)))  # conjoining jamo
    chars.update(map(chr, range(0xAC00, 0xAC00 + 28 * 21, 28)))  # LV syllables, which take a T
    return sorted(chars)


def test_no_whitespace_character_combines_with_a_neighbour() -> None:
    """What the property above rests on, for every whitespace character against every
    character that can combine: NFKC of a text with whitespace in it is NFKC of its pieces
    around the whitespace (case folding works character by character)."""
    composing = _composing()
    assert len(composing) > 2000
    for space in _WHITESPACE:
        nfkc_space = unicodedata.normalize("NFKC", space)
        assert nfkc_space.isspace() and nfkc_space.casefold().isspace(), repr(space)
        for ch in composing:
            nfkc = unicodedata.normalize("NFKC", ch)
            assert unicodedata.normalize("NFKC", ch + space) == nfkc + nfkc_space, (ch, space)
            assert unicodedata.normalize("NFKC", space + ch) == nfkc_space + nfkc, (ch, space)
