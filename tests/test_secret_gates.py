"""The secrets screen's shortcuts find what the full scan finds (ADR 0040).

`model.regex_factors` lets a pattern be searched only in a text that holds the runs, and in the
lines that hold the literals, every match of it holds (in a whole text, and line by line:
`lines_holding`), and `model.secrets` skips detect-secrets' INI transformers on text they
cannot parse. Both are one-sided by construction; these tests hold them to it: literals or a
run that a generated match lacks, a fold that differs from the regex engine's, or a skipped
transformer that would have found something, each fail here.
"""

from __future__ import annotations

import random
import re
import string
import sys
import tempfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from raytsystem.model.regex_factors import (
    Needs,
    Probe,
    fold,
    lines_holding,
    matches_a_line,
    may_match,
    needs,
    required_literals,
)
from raytsystem.model.regex_runs import RUN_KINDS, Run, required_runs

# Patterns with the constructs the analysis must get right: case-insensitive and inline-flag
# literals, branches with an empty alternative, optional and repeated groups, lookarounds,
# classes, non-ASCII literals, anchors.
HAND_MADE = [
    re.compile(r"(?:api|auth)_?key\s*=\s*\w+", re.IGNORECASE),
    re.compile(r"(?i:token)[=:](?:x|)[0-9a-f]{4}"),
    re.compile(r"(?:(?<=\W)|(?<=^))(?:cloud|cl|)(?:_|-|)(?:key|pwd)=\w{3}", re.MULTILINE),
    re.compile(r"^ab(?:cd)*ef(?:gh)+ij$", re.MULTILINE),
    re.compile(r"contraseña\s*[:=]\s*\S+", re.IGNORECASE),
    re.compile(r"(?<![a-z])[A-Z]{2}xyzq+"),
    re.compile(r"(a|b)c\1"),
    re.compile(r"BEGIN (?:RSA|EC) PRIVATE KEY", re.IGNORECASE),
    re.compile(r"(?i:x)[a-z]{9}"),
]
# Patterns with no literal to test, only a run of characters.
IPV4 = re.compile(r"(?<![\w.])(?:(?:25[0-5]|1?[0-9]?[0-9])\.){3}[0-9]{1,3}(?::\d{1,5})?")
TOKEN_AFTER_DIGITS = re.compile(r"\d{8,10}:[0-9A-Za-z_-]{35}")
UNICODE_CLASS = re.compile(r"[MNO][a-zA-Z\d_-]{23,25}\.[a-zA-Z\d_-]{6}")
QUOTED_HEX = re.compile(r"(['\"])([0-9a-f]{7,})(\1)", re.IGNORECASE)
HAND_MADE += [IPV4, TOKEN_AFTER_DIGITS, UNICODE_CLASS, QUOTED_HEX]


def _gate_patterns() -> list[re.Pattern[str]]:
    from raytsystem.model.secret_gates import gates

    return [pattern for _, gate in gates() for pattern, _ in gate or ()]


PATTERNS = HAND_MADE + _gate_patterns()


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.pattern[:40])
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_match_holds_the_required_literals_and_runs(
    pattern: re.Pattern[str], data: st.DataObject
) -> None:
    needed = needs(pattern)
    factors = needed.factors
    match = data.draw(st.from_regex(pattern, fullmatch=False))
    # Before the match: prose, printable ASCII or any text, so that lines of non-ASCII come
    # before the one that matches (the run test maps offsets through UTF-8).
    before = data.draw(st.text(alphabet=string.printable, max_size=40) | st.text(max_size=40))
    text = before + "\n" + match
    numbers = {n for n, line in enumerate(text.split("\n"), 1) if pattern.search(line)}
    assume(numbers)  # a match within one line (the plugins read one line at a time)
    for n in numbers:
        line = text.split("\n")[n - 1]
        assert may_match(factors, fold(line)), (factors, n)
        assert all(Probe(line).has_run(run) for run in needed.runs), (needed.runs, line)
    assert matches_a_line(pattern, needed, Probe(text))
    holding = lines_holding(factors, fold(text))
    assert holding is None or numbers <= holding, (numbers, holding)


def test_the_detectors_patterns_have_literals_to_test() -> None:
    """The shortcut must apply to the costly patterns, or it saves nothing."""
    with_literals = [p for p in _gate_patterns() if required_literals(p)]
    assert len(with_literals) >= 0.7 * len(_gate_patterns())
    keyword = re.compile("password|api_?key|secret", re.IGNORECASE)
    assert required_literals(keyword) == (frozenset({"password", "apikey", "api_key", "secret"}),)


def test_the_patterns_without_literals_have_a_run() -> None:
    """The patterns searched at every position of a text, for want of a literal, are those a
    run test saves most on: each has one, of the narrowest kind its characters allow."""
    without = [p for p in _gate_patterns() if not required_literals(p)]
    assert without and all(required_runs(p) for p in without), without
    digits = frozenset("0123456789.")
    tokens = frozenset(string.ascii_letters + string.digits + "_-")
    assert {digits, tokens} <= {members for members, _ in RUN_KINDS}
    (ip,) = required_runs(IPV4)  # its port optional, its octets 1 to 3 digits: 7 of [0-9.]
    assert ip == Run(digits, 7, False)
    # \d may be a digit of any script: the narrow part after it is the better test.
    assert required_runs(TOKEN_AFTER_DIGITS) == (Run(tokens, 35, False),)
    (wide,) = required_runs(UNICODE_CLASS)
    assert wide.shortest == 24 and wide.wide
    # A back reference ends a run; under IGNORECASE a letter may be ſ or the Kelvin sign.
    (quoted,) = required_runs(QUOTED_HEX)
    assert quoted.shortest == 7 and quoted.wide
    assert required_runs(re.compile(r"ab\s+cd")) == ()  # a space may be in it: no test


def test_a_run_is_found_in_the_bytes_and_its_lines_in_the_text() -> None:
    run = Run(frozenset("0123456789."), 7, False)
    wide = Run(frozenset("0123456789."), 7, True)
    text = "Version 1.2.3 ships.\nÜber 10.0.0.1 und\n数字 1234567\nnone"
    probe = Probe(text)
    assert probe.has_run(run)
    assert [text[s:e] for s, e in probe.lines_with(run)] == ["Über 10.0.0.1 und", "数字 1234567"]
    assert not Probe("Version 1.2.3 ships. Über 10.0.0 und").has_run(run)
    # Wide: a character outside ASCII may be a member, and counts as each of its bytes.
    assert Probe("٣٣٣٣").has_run(wide) and not Probe("٣٣٣٣").has_run(run)
    pattern = re.compile(r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}")
    needed = Needs((), (run,))
    assert matches_a_line(pattern, needed, probe)
    assert not matches_a_line(pattern, needed, Probe("a 1.2.3.\n4 b 12345.6"))


def test_fold_compares_letters_as_the_regex_engine_does() -> None:
    """Two characters `re.IGNORECASE` takes as equal fold to the same character, and the fold
    keeps the text's length and lines, for every code point."""
    for code in range(sys.maxunicode + 1):
        c = chr(code)
        if unicodedata.category(c) in ("Cs", "Cn"):
            continue
        folded = fold(c)
        assert len(folded) == 1, hex(code)
        for other in {c.lower(), c.upper(), c.swapcase(), c.casefold()}:
            if len(other) == 1 and re.fullmatch(re.escape(c), other, re.IGNORECASE):
                assert fold(other) == folded, (hex(code), hex(ord(other)))
    for a, b in [("ı", "I"), ("ſ", "S"), ("\u212a", "k"), ("İ", "i"), ("ς", "Σ")]:
        assert re.fullmatch(a, b, re.IGNORECASE) and fold(a) == fold(b)


# --- the whole scan, shortcuts and all, against detect-secrets' own file scan ---------------

ALNUM = string.ascii_letters + string.digits


def _token(rnd: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rnd.choice(alphabet) for _ in range(n))


def test_lines_holding_names_the_lines_that_hold_a_member_of_every_factor() -> None:
    text = "api key here\nnothing\nthe KEY and the Api\napi alone\nkey\n\nAPIKEY"
    factors = (frozenset({"api"}), frozenset({"key", "token"}))
    assert lines_holding(factors, fold(text)) == {1, 3, 7}
    assert lines_holding((frozenset({"key"}),), fold(text)) == {1, 3, 5, 7}
    assert lines_holding((frozenset({"absent"}),), fold(text)) == set()
    assert lines_holding((), fold(text)) is None  # no literal to test: any line may match


def _line(rnd: random.Random, kind: str) -> str:
    if kind == "prose":
        return rnd.choice(["The deploy runs nightly.", "Keys rotate monthly", "See the runbook"])
    if kind == "assignment":
        key = rnd.choice(["API_KEY", "password", "db_pass", "secret", "token", "name"])
        sep = rnd.choice(["=", " = ", ": "])
        value = _token(rnd, rnd.choice([8, 24, 40]), ALNUM + "+/")
        quote = rnd.choice(["", '"', "'"])
        return f"{key}{sep}{quote}{value}{quote}"
    if kind == "aws":
        return "aws_key = AKIA" + _token(rnd, 16, string.ascii_uppercase + string.digits)
    if kind == "github":
        return "token ghp_" + _token(rnd, 36)
    if kind == "url":
        return f"https://user:{_token(rnd, 12)}@example.org/x"
    if kind == "section":
        return rnd.choice(["[default]", "[server]"])
    if kind == "comment":
        return rnd.choice(["# note", "; old", "#"])
    if kind == "indented":
        return "    " + _token(rnd, 20)
    return ""


KINDS = ["prose", "assignment", "aws", "github", "url", "section", "comment", "indented", ""]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 10**6),
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=12),
    name=st.sampled_from(["notes.md", "settings.ini", "app.env", "plain.txt", "conf.yaml"]),
)
def test_the_scan_finds_what_detect_secrets_finds(seed: int, kinds: list[str], name: str) -> None:
    from detect_secrets.core.scan import scan_file
    from detect_secrets.settings import default_settings

    from raytsystem.model.secrets import scan_text

    rnd = random.Random(seed)
    text = "\n".join(_line(rnd, k) for k in kinds) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8")
        ours = {(f.line, f.kind) for f in scan_text(str(path), text)}
        with default_settings() as config:
            config.disable_filters(
                "detect_secrets.filters.common.is_ignored_due_to_verification_policies"
            )
            theirs = {(s.line_number, s.type) for s in scan_file(str(path))}
    assert theirs <= ours, (sorted(theirs - ours), text)


def test_the_committed_gate_table_is_the_installed_detectors() -> None:
    """`model/gate_table.py` holds the gates of the detect-secrets that uv.lock installs; after
    an upgrade, `uv run python tests/test_secret_gates.py --write` makes it again."""
    from raytsystem.model import gate_table
    from raytsystem.model.secret_gates import gate_table_source

    made: dict[str, object] = {}
    exec(gate_table_source(), made)
    assert made["DETECTORS"] is not None  # every plugin has a gate: files can be cleared
    committed = (gate_table.DETECTORS, gate_table.PLAIN_SUFFIXES, gate_table.PATTERNS)
    fresh = (made["DETECTORS"], made["PLAIN_SUFFIXES"], made["PATTERNS"])
    assert fresh == committed, "stale: run `uv run python tests/test_secret_gates.py --write`"


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 10**6),
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=12),
    name=st.sampled_from(["notes.md", "settings.ini", "plain.txt", "conf.yaml", "x.ipynb", "a"]),
)
def test_a_cleared_file_is_one_the_scan_finds_nothing_in_and_the_table_is_believed(
    seed: int, kinds: list[str], name: str
) -> None:
    from raytsystem.model import gate_table
    from raytsystem.model.secret_gates import table_gates
    from raytsystem.model.secrets import scan_text

    rnd = random.Random(seed)
    text = "\n".join(_line(rnd, k) for k in kinds) + "\n"
    opened = table_gates(name, text, gate_table.DETECTORS)
    if opened == frozenset():  # cleared
        assert scan_text(name, text) == [], text
    elif opened is not None:  # the table's results, taken as known, change nothing
        assert scan_text(name, text, opened=opened) == scan_text(name, text), text


def test_prose_is_cleared_and_a_secret_never_is() -> None:
    from raytsystem.model import gate_table
    from raytsystem.model.secret_gates import table_gates

    def cleared(path: str, text: str, detectors: str | None) -> bool:
        return table_gates(path, text, detectors) == frozenset()

    prose = "# Deploys\n\nThe deploy runs nightly.\nSee the runbook for the steps.\n"
    assert cleared("docs/a.md", prose, gate_table.DETECTORS)
    assert not cleared("docs/a.md", prose, "0.0-another-version")
    assert not cleared("docs/a.md", prose, None)  # the installed version unknown
    assert not cleared("conf.yaml", prose, gate_table.DETECTORS)  # YAML is transformed
    key = "ghp_" + "a1B2c3D4e5" * 3 + "a1B2c3"
    assert not cleared("docs/a.md", prose + f"token {key}\n", gate_table.DETECTORS)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import subprocess

    from raytsystem.model import gate_table
    from raytsystem.model.secret_gates import gate_table_source

    target = Path(gate_table.__file__)
    target.write_text(gate_table_source(), encoding="utf-8")
    subprocess.run(["ruff", "format", "-q", str(target)], check=True)
    print(f"wrote {target}")
