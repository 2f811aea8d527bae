"""Tests for raytsystem.sentences: golden fixtures, the span contract, and worst-case timing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raytsystem.sentences import split_sentences
from raytsystem.sentences.split import _HARD_BREAK, _Context, _hard_breaks, _walk

FIXTURES = Path(__file__).parent / "fixtures" / "sentences"
LANGUAGES = ("en", "ru", "zh", "ja")
MIN_CASES_PER_LANGUAGE = 25


# --- golden fixtures -------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    text: str
    protected: tuple[tuple[int, int], ...]
    expected: tuple[str, ...]


_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(n)|(t)|(\\))")


def decode(raw: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """Decode escapes and backquote markup (see fixtures/sentences/README.md)."""
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    opened: int | None = None
    position = 0
    length = 0
    while position < len(raw):
        escape = _ESCAPE.match(raw, position)
        if escape is not None:
            code, newline, tab, _backslash = escape.groups()
            if code is not None:
                out.append(chr(int(code, 16)))
            else:
                out.append("\n" if newline else "\t" if tab else "\\")
            length += 1
            position = escape.end()
            continue
        ch = raw[position]
        position += 1
        if ch == "`":
            if opened is None:
                opened = length
            else:
                spans.append((opened, length))
                opened = None
            continue
        out.append(ch)
        length += 1
    if opened is not None:
        raise ValueError(f"unbalanced backquote in fixture text {raw!r}")
    return "".join(out), tuple(spans)


def load_cases(path: Path) -> list[Case]:
    cases: list[Case] = []
    title: str | None = None
    section: list[str] = []
    input_lines: list[str] | None = None

    def finish() -> None:
        if title is None:
            return
        if input_lines is None:
            raise ValueError(f"{path.name}: case {title!r} has no '----' line")
        text, protected = decode("\n".join(input_lines))
        expected = tuple(decode(line)[0] for line in section if line.strip())
        case_id = f"{path.stem}:{len(cases) + 1}"
        cases.append(Case(case_id, title, text, protected, expected))

    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith("===="):
            finish()
            title = line[4:].strip()
            section = []
            input_lines = None
        elif title is None:
            continue  # the comment header
        elif line == "----" and input_lines is None:
            input_lines = section
            section = []
        else:
            section.append(line)
    finish()
    return cases


def all_cases() -> list[Case]:
    return [case for path in sorted(FIXTURES.glob("*.txt")) for case in load_cases(path)]


CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_golden(case: Case) -> None:
    spans = split_sentences(case.text, case.protected)
    got = tuple(case.text[start:end] for start, end in spans)
    assert got == case.expected, case.title
    check_contract(case.text, spans, case.protected)


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_language_has_enough_cases(language: str) -> None:
    cases = load_cases(FIXTURES / f"{language}.txt")
    assert len(cases) >= MIN_CASES_PER_LANGUAGE
    assert len({case.text for case in cases}) == len(cases), "duplicate inputs"


def test_decode_handles_escapes_and_markup() -> None:
    assert decode(r"a\nb\t\\c\u00a0`x.y` \u0060") == ("a\nb\t\\c\u00a0x.y `", ((7, 10),))


# --- the contract ------------------------------------------------------------------------------


def check_contract(
    text: str,
    spans: list[tuple[int, int]],
    protected: tuple[tuple[int, int], ...] | list[tuple[int, int]] = (),
) -> None:
    """Assert everything `split_sentences` promises about its output for `text`."""
    previous_end = 0
    owner = [-1] * len(text)
    for index, (start, end) in enumerate(spans):
        assert isinstance(start, int)
        assert isinstance(end, int)
        assert previous_end <= start < end <= len(text), spans
        assert not text[start].isspace()
        assert not text[end - 1].isspace()
        owner[start:end] = [index] * (end - start)
        previous_end = end
    for position, ch in enumerate(text):
        if not ch.isspace():
            assert owner[position] >= 0, f"character {position} ({ch!r}) is in no span"
    for start, end in protected:
        start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
        owners = {owner[i] for i in range(start, end) if not text[i].isspace()}
        assert len(owners) <= 1, f"protected span {(start, end)} is cut: {spans}"
    if not text.strip():
        assert spans == []


def sentences(text: str, protected: tuple[tuple[int, int], ...] = ()) -> list[str]:
    return [text[start:end] for start, end in split_sentences(text, protected)]


# Characters that exercise every rule: terminators of all kinds, closers and openers, both
# cases in several scripts, caseless scripts, digits, line breaks, odd whitespace and controls.
TRICKY = (
    ".!?…。！？．｡؟।\"')]»”」』）【「(«“ \n\r\t\u00a0\u2028\u2029\u3000\x00\x1f"
    "aAzZ bB яЯ д т е г Dr e g etc No 0 7 中文日本語 ا ש ß ǅ\u0301\u200b/:@-—_`*#$"
)
tricky_text = st.text(alphabet=st.sampled_from(TRICKY), max_size=80)
any_text = st.text(max_size=80)
spans_strategy = st.lists(
    st.tuples(st.integers(-5, 90), st.integers(-5, 90)),
    max_size=4,
)


@settings(deadline=None)
@given(st.one_of(tricky_text, any_text))
def test_contract_holds_for_any_text(text: str) -> None:
    spans = split_sentences(text)
    check_contract(text, spans)
    assert split_sentences(text) == spans  # deterministic, no hidden state


# One-line ASCII, where `split_sentences` may skip the general walk (most segments).
ASCII_LINE = ".!?\"')]} \taAzZ bB Dr e g etc No 0 7 /:@-_`*#$"
ascii_line = st.text(alphabet=st.sampled_from(ASCII_LINE), max_size=80)


@settings(deadline=None, max_examples=500)
@given(st.one_of(ascii_line, ascii_line.map(lambda t: t.rstrip() + "."), tricky_text))
def test_the_one_line_shortcut_gives_the_walks_spans(text: str) -> None:
    assert split_sentences(text) == _walk(text, ())


@settings(deadline=None)
@given(tricky_text, spans_strategy)
def test_contract_holds_with_any_protected_spans(
    text: str, protected: list[tuple[int, int]]
) -> None:
    spans = split_sentences(text, protected)
    check_contract(text, spans, protected)
    assert split_sentences(text, tuple(protected)) == spans


BREAKS = "ab .\t \n\r\x85\u2028\u2029"


@settings(deadline=None, max_examples=500)
@given(st.text(alphabet=st.sampled_from(BREAKS), max_size=40), spans_strategy)
def test_hard_breaks_are_the_blank_line_pattern_s_matches(
    text: str, protected: list[tuple[int, int]]
) -> None:
    # `_hard_breaks` tries the pattern only where a line break is; `finditer` tries it everywhere.
    ctx = _Context(text, protected)
    expected = []
    for match in _HARD_BREAK.finditer(text):
        expected.extend([cut for cut in match.span() if not ctx.splits(cut)][:1])
    assert _hard_breaks(text, ctx) == expected


@settings(deadline=None)
@given(tricky_text, tricky_text)
def test_paragraph_break_always_splits(first: str, second: str) -> None:
    text = f"{first}\n\n{second}"
    spans = split_sentences(text)
    check_contract(text, spans)
    cut = len(first)
    assert not any(start < cut and end > cut + 2 for start, end in spans)


@settings(deadline=None)
@given(tricky_text)
def test_protecting_everything_gives_one_sentence(text: str) -> None:
    spans = split_sentences(text, [(0, len(text))])
    assert len(spans) == (1 if text.strip() else 0)


# Sentences built so that every boundary between them is unambiguous: each starts with a
# capital (or is CJK) and ends with a terminator; words are at least four letters long and
# drawn from consonants only, so none is an abbreviation, an initial or an enumerator.
latin_word = st.text(alphabet="bdghklmnrstwz", min_size=4, max_size=8)
cyrillic_word = st.text(alphabet="бвгджзклмнпрстфхцчшщ", min_size=4, max_size=8)
cjk_phrase = st.text(alphabet="中文日本語漢字かなカナ", min_size=1, max_size=8)


@st.composite
def spaced_sentence(draw: st.DrawFn) -> str:
    word = latin_word if draw(st.booleans()) else cyrillic_word
    words = draw(st.lists(word, min_size=2, max_size=6))
    terminator = draw(st.sampled_from([".", "!", "?", "...", "…", "?!", '."', ".)", "!»"]))
    return " ".join([words[0].capitalize(), *words[1:]]) + terminator


@st.composite
def cjk_sentence(draw: st.DrawFn) -> str:
    return draw(cjk_phrase) + draw(st.sampled_from(["。", "！", "？", "。」", "？）"]))


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(spaced_sentence(), cjk_sentence()),
            st.sampled_from([" ", "  ", "\n", " \n ", "\u3000", "\t"]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_unambiguous_sentences_are_recovered(parts: list[tuple[str, str]]) -> None:
    text = "".join(sentence + gap for sentence, gap in parts)
    assert sentences(text) == [sentence for sentence, _ in parts]


@settings(deadline=None)
@given(st.lists(spaced_sentence(), min_size=2, max_size=5))
def test_lowercase_continuation_never_splits(parts: list[str]) -> None:
    text = " ".join(part[0].lower() + part[1:] for part in parts)
    text = text[0].upper() + text[1:]
    assert sentences(text) == [text]


# --- focused examples --------------------------------------------------------------------------


def test_empty_and_whitespace_only() -> None:
    assert split_sentences("") == []
    assert split_sentences(" \n\t\u3000\u2029 ") == []


def test_spans_are_code_points_not_bytes() -> None:
    text = "Ёлка стоит. Hello 😀 world. 你好。"
    assert split_sentences(text) == [(0, 11), (12, 26), (27, 30)]


def test_protected_span_blocks_a_boundary() -> None:
    text = "Call it. Then stop."
    assert sentences(text) == ["Call it.", "Then stop."]
    assert sentences(text, ((5, 13),)) == [text]


def test_malformed_protected_spans_are_tolerated() -> None:
    text = "One. Two. Three."
    assert sentences(text, ((-3, 2), (12, 99), (7, 3), (0, 0))) == ["One.", "Two.", "Three."]
    assert sentences(text, ((2, 6), (4, 8))) == ["One. Two.", "Three."]


def test_protected_name_before_a_dot_is_not_an_abbreviation() -> None:
    text = "Set the variable X. Then restart."
    assert sentences(text) == [text]  # a lone capital reads as an initial
    assert sentences(text, ((17, 18),)) == ["Set the variable X.", "Then restart."]


def test_crlf_line_endings() -> None:
    assert sentences("First line\r\ngoes on.\r\n\r\nNext") == ["First line\r\ngoes on.", "Next"]


def test_paragraph_separator_and_blank_line_with_spaces() -> None:
    assert sentences("One\u2029Two") == ["One", "Two"]
    assert sentences("One \n \t \nTwo") == ["One", "Two"]


def test_paragraph_break_inside_protected_span_does_not_split() -> None:
    text = "Run this\n\nblock now"
    assert sentences(text, ((4, 15),)) == [text]


def test_control_characters_and_combining_marks() -> None:
    text = "\x00Nul here.\u0301 Next\x07. \u0301oops. Done."
    spans = split_sentences(text)
    check_contract(text, spans)
    assert sentences(text)[-1] == "Done."


def test_lone_surrogates_do_not_raise() -> None:
    text = "\ud800. Next \udfff! \ud83d。后"
    check_contract(text, split_sentences(text))


def test_french_closer_after_a_line_break_is_not_pulled_back() -> None:
    # After a line break the guillemet opens the next line, as in German `»Hallo«`.
    assert sentences("C’est fini.\n» Puis il part.") == ["C’est fini.", "» Puis il part."]
    assert sentences("« C’est fini. » Puis il part.") == ["« C’est fini. »", "Puis il part."]


def test_url_question_mark_before_cjk_is_not_a_boundary() -> None:
    assert sentences("打开 https://example.com/wiki/?词条 查看。好!走吧") == [
        "打开 https://example.com/wiki/?词条 查看。",
        "好!",
        "走吧",
    ]


def test_russian_dialogue_dash() -> None:
    assert sentences("— Готово, — сказал он. — Запускай.") == [
        "— Готово, — сказал он.",
        "— Запускай.",
    ]


# --- performance -------------------------------------------------------------------------------

MEGABYTE = 1_000_000
PARAGRAPH = (
    "Dr. Smith ran `tar czf` on 3.11 files, e.g. config.yaml, at 2 p.m. in the U.S. office. "
    "See https://example.com/a.b?c=d. Это т. е. пример, и т. д. Готово! "
    "这是一个例子。本当ですか？「はい。」と言った。 "
)


def _megabyte(unit: str) -> str:
    return (unit * (MEGABYTE // len(unit) + 1))[:MEGABYTE]


# Speed is measured by the benchmark (bench/), not asserted here: these tests prove that
# megabyte inputs finish with correct output (a quadratic splitter would not finish).
def test_one_megabyte_line_of_prose_splits() -> None:
    text = _megabyte(PARAGRAPH)
    spans = split_sentences(text)
    assert len(spans) > 10_000
    assert all(not text[s].isspace() and not text[e - 1].isspace() for s, e in spans)


@pytest.mark.parametrize(
    "unit",
    [".", "a. ", "A. ", ". ", "x", " ", "\n \n", "中。", "a!中", "A.B.", "Ab. Cd ", "e.g. ", "`"],
    ids=repr,
)
def test_pathological_megabyte_inputs_finish(unit: str) -> None:
    text = _megabyte(unit)
    spans = split_sentences(text)
    assert all(0 <= s < e <= len(text) for s, e in spans)


def test_one_long_protected_span_and_long_url() -> None:
    text = "See https://example.com/" + "a" * MEGABYTE + "?中 now. Next."
    spans = split_sentences(text, [(4, 20)])
    assert [text[start:end] for start, end in spans][-1] == "Next."


def test_many_protected_spans_finish() -> None:
    unit = "Run x.y. Then "
    count = MEGABYTE // len(unit)
    text = unit * count
    protected = [(i * len(unit) + 4, i * len(unit) + 7) for i in range(count)]
    spans = split_sentences(text, protected)
    assert len(spans) == count + 1


def test_no_sentence_is_longer_than_the_bound() -> None:
    """A paragraph with no sentence end (a log line, a dump) becomes bounded pieces, cut at
    whitespace, that cover its words in order; prose is untouched."""
    from raytsystem.sentences.split import LONGEST_SENTENCE

    words = [f"w{i % 97}" for i in range(3000)]
    text = " ".join(words)
    spans = split_sentences(text)
    assert len(spans) > 1
    assert all(0 < end - start <= LONGEST_SENTENCE for start, end in spans)
    assert " ".join(text[s:e] for s, e in spans) == text  # cut only at single spaces
    glued = "x" * (2 * LONGEST_SENTENCE + 5)  # no whitespace at all: cut at the bound
    assert split_sentences(glued) == [
        (0, LONGEST_SENTENCE),
        (LONGEST_SENTENCE, 2 * LONGEST_SENTENCE),
        (2 * LONGEST_SENTENCE, 2 * LONGEST_SENTENCE + 5),
    ]
    prose = "Refunds take five days. " * 3
    assert split_sentences(prose.strip()) == [(0, 23), (24, 47), (48, 71)]
