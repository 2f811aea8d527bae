"""Which writing systems a sentence-embedding model reads, and which a question is in (ADR 0044).

A model card (the `README.md` of a model folder) declares the languages the model was trained
on in its front matter (`language: en`, or a list). A model reads the scripts of those
languages; a question most of whose letters are in other scripts is one the model cannot
read, and its similarities for it are noise: all-MiniLM-L6-v2 (`language: en`) finds every
Chinese line 0.8 alike to a Chinese question. Such a question is answered by the words alone.

A letter's script is the first word of its Unicode name ("LATIN SMALL LETTER A", "CJK UNIFIED
IDEOGRAPH-4E00", "HIRAGANA LETTER A"). A model whose card names no language, or a language
this table does not know, reads every script.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Final

# The scripts of each language code: the languages of each script, inverted.
_LANGUAGES: Final = {
    ("LATIN",): "af az br bs ca cs cy da de en eo es et eu fi fo fr fy ga gd gl ha hr ht hu id "
    "is it jv ku la lb lt lv mg mi ms mt nb nl nn no oc pl pt ro sk sl so sq sv sw tl tr uz "
    "vi wo xh yo zu",
    ("CYRILLIC",): "be bg kk ky mk mn ru sr tg tt uk",
    ("ARABIC",): "ar fa ps sd ug ur",
    ("HEBREW",): "he iw yi",
    ("DEVANAGARI",): "hi mr ne sa",
    ("BENGALI",): "as bn",
    ("GREEK",): "el",
    ("ARMENIAN",): "hy",
    ("GEORGIAN",): "ka",
    ("THAI",): "th",
    ("LAO",): "lo",
    ("KHMER",): "km",
    ("MYANMAR",): "my",
    ("SINHALA",): "si",
    ("GUJARATI",): "gu",
    ("GURMUKHI",): "pa",
    ("TAMIL",): "ta",
    ("TELUGU",): "te",
    ("KANNADA",): "kn",
    ("MALAYALAM",): "ml",
    ("ORIYA",): "or",
    ("ETHIOPIC",): "am",
    ("CJK",): "zh",
    ("CJK", "HIRAGANA", "KATAKANA"): "ja",
    ("HANGUL", "CJK"): "ko",
}
_SCRIPTS: Final = {code: scripts for scripts, codes in _LANGUAGES.items() for code in codes.split()}
# A question the model reads: at least this share of its letters in scripts it reads.
READ_SHARE: Final = 0.5


def declared_languages(folder: Path) -> tuple[str, ...]:
    """The language codes a model card's front matter declares (`language: en` or a list
    under `language:`); none when the folder has no card or the card declares none."""
    try:
        text = (folder / "README.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return ()
    found: list[str] = []
    listing = False
    for line in lines[1:]:
        if line.strip() == "---":
            break
        if listing and line.lstrip().startswith("- "):
            found.append(line.lstrip()[2:].strip().strip("'\""))
            continue
        listing = False
        key, _, value = line.partition(":")
        if key.strip() == "language" and not line.startswith((" ", "\t")):
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                found += [v.strip().strip("'\"") for v in value[1:-1].split(",")]
            elif value:
                found.append(value.strip("'\""))
            else:
                listing = True
    return tuple(code.lower() for code in found if code)


def scripts_read(languages: Iterable[str]) -> frozenset[str] | None:
    """The scripts of the languages (their base codes: `pt-br` is `pt`); None, every script,
    when a language is not in the table or none is given."""
    scripts: set[str] = set()
    codes = [code.split("-")[0].split("_")[0] for code in languages]
    if not codes or any(code not in _SCRIPTS for code in codes):
        return None
    for code in codes:
        scripts.update(_SCRIPTS[code])
    return frozenset(scripts)


def reads(scripts: frozenset[str] | None, text: str) -> bool:
    """Whether a model reading `scripts` reads the text: at least `READ_SHARE` of its letters
    are in them (a text without letters is read)."""
    if scripts is None:
        return True
    counted = Counter(_script(ch) for ch in text if ch.isalpha())
    letters = sum(counted.values())
    return not letters or sum(counted[s] for s in scripts) >= READ_SHARE * letters


def _script(ch: str) -> str:
    return unicodedata.name(ch, "UNKNOWN").split(" ", 1)[0].split("-", 1)[0]
