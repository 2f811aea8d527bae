"""The query set: 1-4 words drawn from the corpus's own vocabulary, plus some that match nothing.

The vocabulary is counted from the files themselves (a deterministic sample of them), so the
same code serves the synthetic corpus and `--source` folders of real files. Half of the words
are drawn by frequency (common words: many candidate rows, the expensive case) and half
uniformly from words seen at least twice (rare words: few rows). Chinese and Japanese runs have
no spaces, so they contribute 2-3 character slices. About one query in ten is made of invented
words that occur nowhere: those must come back as a gap.
"""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Final

_FENCE: Final = re.compile(r"^```.*?^```", re.S | re.M)
_URL: Final = re.compile(r"\]\([^)]*\)|<https?://[^>]*>|https?://\S+")
_WORD: Final = re.compile(r"[^\W\d_]{2,}")
_CJK: Final = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
SAMPLE_FILES: Final = 1500
NONSENSE_SHARE: Final = 0.1


def _tokens(text: str, rng: random.Random) -> list[str]:
    text = _URL.sub(" ", _FENCE.sub(" ", text))
    out: list[str] = []
    for word in _WORD.findall(text):
        if _CJK.search(word):
            for start in range(0, max(1, len(word) - 1), 3):
                out.append(word[start : start + rng.choice((2, 2, 3))])
        elif len(word) >= 3:
            out.append(word.lower())
    return out


def vocabulary(files: Sequence[Path], seed: int) -> list[tuple[str, int]]:
    """(word, count) pairs, most frequent first, ties by word: independent of dict order."""
    rng = random.Random(f"vocab:{seed}")
    ordered = sorted(files)
    step = max(1, len(ordered) // SAMPLE_FILES)
    counts: Counter[str] = Counter()
    for path in ordered[::step]:
        try:
            counts.update(_tokens(path.read_text(encoding="utf-8"), rng))
        except (OSError, UnicodeDecodeError):
            continue
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _nonsense(rng: random.Random) -> str:
    return "qz" + "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(rng.randint(5, 8)))


def make_queries(files: Sequence[Path], count: int, seed: int) -> list[str]:
    """`count` queries of 1-4 words; deterministic for the same files and seed."""
    vocab = vocabulary(files, seed)
    rng = random.Random(f"queries:{seed}")
    if not vocab:
        return [_nonsense(rng) for _ in range(count)]
    words = [w for w, _ in vocab]
    cum = list(itertools.accumulate(c for _, c in vocab))
    rare = [w for w, c in vocab if c >= 2] or words
    out = []
    for _ in range(count):
        n = rng.choice((1, 1, 2, 2, 2, 3, 3, 4))
        if rng.random() < NONSENSE_SHARE:
            picked = [_nonsense(rng) for _ in range(n)]
        else:
            picked = [
                rng.choices(words, cum_weights=cum)[0] if rng.random() < 0.5 else rng.choice(rare)
                for _ in range(n)
            ]
        out.append(" ".join(picked))
    return out
