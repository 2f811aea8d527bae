"""Sentences, titles and short phrases in English, Russian, Chinese and Japanese.

The text is word salad with a realistic shape: Zipf-distributed words, sentences of plausible
length, and the inline features a sentence splitter and an indexer must survive (decimals,
versions like 3.11, e.g./i.e., inline code, links, bold, dates, percentages). Chinese and
Japanese sentences have no spaces and end with 。 (sometimes ！ or ？).
"""

from __future__ import annotations

import random
from typing import Final, Protocol

from . import vocab

_CODE_SNIPPETS: Final = (
    "config.yaml",
    "--dry-run",
    "raytsystem ingest",
    "make test",
    "pip install -U {w}",
    "{w}.py",
    "{w}_{w2}()",
    "{w}/{w2}.json",
    "--{w}={n}",
    "{W}Error",
    "SELECT * FROM {w}",
    "v{n}.{m}",
)


def number(rng: random.Random) -> str:
    """A number as people write them: integers, decimals, versions, dates, percentages."""
    kind = rng.randrange(9)
    if kind == 0:
        return str(rng.randint(2, 999))
    if kind == 1:
        return f"{rng.randint(0, 99)}.{rng.randint(1, 99)}"
    if kind == 2:
        return f"3.{rng.randint(8, 13)}"
    if kind == 3:
        return f"v{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
    if kind == 4:
        return f"{rng.randint(1, 99)}%"
    if kind == 5:
        return f"20{rng.randint(15, 26)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if kind == 6:
        return f"{rng.randint(1, 64)},{rng.randint(0, 999):03d}"
    if kind == 7:
        return f"{rng.randint(1, 500)} ms"
    return f"{rng.randint(1, 16)} GB"


def inline_code(rng: random.Random, words: vocab.Zipf) -> str:
    w, w2 = words.one(rng), words.one(rng)
    snippet = rng.choice(_CODE_SNIPPETS).format(
        w=w, w2=w2, W=w.capitalize(), n=rng.randint(1, 99), m=rng.randint(0, 20)
    )
    return f"`{snippet}`"


def link(rng: random.Random, text: str, words: vocab.Zipf) -> str:
    a, b = words.one(rng), words.one(rng)
    kind = rng.randrange(4)
    if kind == 0:
        return f"[{text}](../{a}/{b}.md)"
    if kind == 1:
        return f"[{text}](https://docs.example.com/{a}/{b}#{words.one(rng)})"
    if kind == 2:
        return f"[{text}]({b}.md)"
    return f"<https://example.org/{a}/{b}>"


class Prose(Protocol):
    """Text in one language; `cjk` languages join words without spaces."""

    code: str
    cjk: bool

    def sentence(self, rng: random.Random) -> str: ...

    def title(self, rng: random.Random) -> str: ...

    def phrase(self, rng: random.Random, n: int) -> str: ...


class Spaced:
    """English and Russian: words separated by spaces, decorated now and then."""

    def __init__(self, code: str, words: vocab.Zipf, abbreviations: tuple[str, ...]) -> None:
        self.code = code
        self.cjk = False
        self.words = words
        self.abbreviations = abbreviations

    def sentence(self, rng: random.Random) -> str:
        out = self.words.draw(rng, rng.randint(5, 16))
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
            pos = rng.randrange(1, len(out) + 1)
            out.insert(pos, self._decoration(rng))
        out[0] = out[0][:1].upper() + out[0][1:]
        return " ".join(out) + rng.choices((".", "?", "!"), weights=(91, 6, 3))[0]

    def _decoration(self, rng: random.Random) -> str:
        kind = rng.randrange(7)
        if kind == 0:
            return number(rng)
        if kind == 1:
            return inline_code(rng, self.words)
        if kind == 2:
            return link(rng, self.phrase(rng, rng.randint(1, 3)), self.words)
        if kind == 3:
            return f"**{self.phrase(rng, rng.randint(1, 3))}**"
        if kind == 4:
            return f"*{self.words.one(rng)}*"
        if kind == 5 and self.abbreviations:
            return f"({rng.choice(self.abbreviations)} {self.phrase(rng, rng.randint(1, 3))})"
        return f"{rng.choice(self.abbreviations or ('',))} {self.words.one(rng)}".strip()

    def title(self, rng: random.Random) -> str:
        words = self.words.draw(rng, rng.randint(2, 6))
        return " ".join(
            w[:1].upper() + w[1:] if i == 0 or rng.random() < 0.4 else w
            for i, w in enumerate(words)
        )

    def phrase(self, rng: random.Random, n: int) -> str:
        return " ".join(self.words.draw(rng, n))


class Chinese:
    """Chinese: words joined without spaces, commas inside, 。 at the end."""

    code = "zh"
    cjk = True

    def __init__(self, words: vocab.Zipf, latin: vocab.Zipf) -> None:
        self.words = words
        self.latin = latin

    def sentence(self, rng: random.Random) -> str:
        parts = []
        for i in range(rng.randint(4, 12)):
            parts.append(self.words.one(rng))
            if rng.random() < 0.2:
                parts.append(rng.choice(vocab.CHINESE_FILLERS))
            if i and rng.random() < 0.1:
                parts.append("，")
        if rng.random() < 0.25:
            parts.insert(rng.randrange(len(parts)), f" {inline_code(rng, self.latin)} ")
        if rng.random() < 0.2:
            parts.insert(rng.randrange(len(parts)), f" {number(rng)} ")
        if rng.random() < 0.1:
            parts.insert(rng.randrange(len(parts)), f"**{self.words.one(rng)}**")
        body = "".join(parts).strip().strip("，")
        return body + rng.choices(("。", "！", "？"), weights=(92, 4, 4))[0]

    def title(self, rng: random.Random) -> str:
        return "".join(self.words.draw(rng, rng.randint(2, 4)))

    def phrase(self, rng: random.Random, n: int) -> str:
        return "".join(self.words.draw(rng, n))


class Japanese:
    """Japanese: noun + particle chunks ending in a polite verb form and 。."""

    code = "ja"
    cjk = True

    def __init__(self, words: vocab.Zipf, latin: vocab.Zipf) -> None:
        self.words = words
        self.latin = latin

    def sentence(self, rng: random.Random) -> str:
        parts = [
            self.words.one(rng) + rng.choice(vocab.JAPANESE_PARTICLES)
            for _ in range(rng.randint(2, 5))
        ]
        if rng.random() < 0.3:
            parts.append("、")
        if rng.random() < 0.2:
            parts.insert(rng.randrange(len(parts)), f" {inline_code(rng, self.latin)} ")
        if rng.random() < 0.15:
            parts.insert(rng.randrange(len(parts)), f"{number(rng)} ")
        parts.append(self.words.one(rng) + rng.choice(vocab.JAPANESE_ENDINGS))
        return "".join(parts).strip() + rng.choices(("。", "！", "？"), weights=(94, 3, 3))[0]

    def title(self, rng: random.Random) -> str:
        words = self.words.draw(rng, rng.randint(1, 3))
        return rng.choice(vocab.JAPANESE_PARTICLES[5:6]).join(words)

    def phrase(self, rng: random.Random, n: int) -> str:
        return "の".join(self.words.draw(rng, n))


def languages(seed: int) -> dict[str, Prose]:
    """The four languages of the corpus, keyed by code."""
    latin = vocab.english(seed)
    return {
        "en": Spaced("en", latin, ("e.g.", "i.e.", "vs.", "cf.")),
        "ru": Spaced("ru", vocab.russian(), ("т. е.", "т. к.", "и т. д.", "см.")),
        "zh": Chinese(vocab.chinese(), latin),
        "ja": Japanese(vocab.japanese(), latin),
    }
