"""Deterministic, rule-based sentence splitting: every sentence of prose becomes one claim.

A claim cites an exact character span of its block, so the splitter's output is part of the
evidence trail: the same text must always give the same spans, on every machine, with no model
and no locale. That is why this is a small set of explicit rules over code points (stdlib `re`
and `unicodedata` only) rather than a statistical segmenter.

`split_sentences(text, protected)` returns `[start, end)` spans in code points. The spans are
sorted, never overlap, never start or end with whitespace (as `str.isspace` sees it), and
together hold every non-whitespace character exactly once: a splitter that dropped text would
silently lose evidence, so anything that is not clearly a boundary stays inside a sentence.

The rules, and why:

- A sentence ends after a run of terminators (`.`, `!`, `?`, `…`, `...`, `?!`, `!!`, and the
  full stops and question marks of other scripts such as `؟`, `۔`, `।`) together with the
  closing quotes and brackets glued to it (`."`, `.)`, `.»`, `!”`, German `.“`), a closing
  quote or bracket standing alone after it (French `Fini. » Puis`) and a glued footnote mark
  (`.[3]`, `.²`): they belong to the sentence they close. The run must be followed by whitespace
  and then by something that can start a sentence: an uppercase or titlecase letter, a letter
  of a script without case (CJK, Hebrew, Arabic, Thai...; Georgian counts as caseless), a digit,
  an opening quote or bracket, a currency sign, a dialogue dash followed by a capital, or the
  start of a protected span (inline code often opens a sentence in technical prose). A
  lowercase letter after the whitespace means the text goes on (`Wait... what?`), so it is
  never a boundary.
- No whitespace, no boundary: the dots in `3.11`, `v2.0.1`, `1.5x`, `config.yaml`,
  `os.path.join`, `user@example.com` and `https://example.com/a.b?c=d` are not followed by
  whitespace and so are never candidates. The final `.` of `https://example.com/a.b?c=d. Next`
  is one, as it should be.
- A single `.` after a known abbreviation is not a boundary: titles (`Dr.`, `Mr.`, `Prof.`,
  `St.`...), company and name suffixes (`Inc.`, `Ltd.`, `Jr.`, `Sr.`), reference words (`Fig.`,
  `cf.`, `vs.`, `approx.`), `No.`/`p.`/`Art.`/`Jan.` before a number only (`I said no. Then`
  splits),
  dotted initialisms of single letters (`e.g.`, `i.e.`, `a.m.`, `p.m.`, `U.S.`, `т.е.`, `т.к.`,
  also spaced: `т. е.`), single capital initials (`J. R. R. Tolkien`, `А. С. Пушкин`), and
  Russian `см.`, `рис.`, `стр.`, `им.`, `напр.`, `ул.`, `ст.`, `п.`... Where an abbreviation is
  ambiguous the splitter keeps the text together, because a claim holding two sentences is
  still true to its source while a claim cut in the middle of a sentence is not. So `e.g.` and
  `i.e.` never end a sentence, not even before a capital (`e.g. Python`).
- The exceptions are abbreviations that usually close a sentence: `etc.`, `и т. д.`, `и т. п.`,
  `и др.` end one when a sentence start follows (lowercase after them never splits anyway).
  Russian `г.`/`гг.`/`в.`/`вв.` (year, century) end a sentence only right after a number
  (`в 2020 г. Компания`), not before a name (`г. Москва`).
- A number, letter or roman numeral with a `.` at the very start of the text is an enumerator
  (`1. Install it.`), not a sentence of its own.
- A run ends a sentence only once the sentence holds a letter or digit: a leading `...` or
  `!!!` joins the sentence after it rather than becoming a claim of its own.
- CJK full stops and marks (`。！？｡．︒﹖﹗`) end a sentence with no space after them, whatever
  follows; closing brackets and quotes right after them (`」』）】”`) stay with the sentence,
  while an opening quote there (`。“好的。”`) starts the next one.
  A closing quote followed by the Japanese quotative particle `と`/`って` (`「行きます。」と言った`)
  does not end the sentence. A fullwidth `．` before a digit or a Latin letter is a decimal
  point or a name (`３．１４`). ASCII `!`/`?` directly followed by a CJK character also ends a
  sentence (`太好了!我们走吧`), except inside a URL.
- Soft line breaks are whitespace like any other, so a line without final punctuation stays in
  its sentence. A blank line (two line breaks with only spaces between, `\\r\\n` counting as
  one) and U+2029 PARAGRAPH SEPARATOR always end a sentence, abbreviation or not.
- No boundary ever falls strictly inside a protected span (inline code and the like), and
  terminators inside a protected span are not punctuation at all. Protected spans are clamped to
  the text; empty or reversed ones are ignored, overlapping ones merged. A name in code right
  before a `.` is never taken for an abbreviation.

Every scan is a single forward pass of simple regular expressions (no nested quantifiers, so no
catastrophic backtracking) plus bounded look-behind around each candidate, so the running time
is linear in the length of the text.

Known limits: a sentence that really ends with an ambiguous abbreviation or a lone capital
(`...vitamin D. The sun...`, `...Acme Inc. The company...`) is kept with the next one; scripts
that end sentences with no punctuation (Thai) are not split; an ASCII `.` glued to CJK text
(`我喜欢它.它很好`) is not a boundary, since that is far more often a file name (`文件.txt`);
`Yahoo!ニュース`-style brand names split after the `!`.

The package: `split` makes the pass, `abbreviations` decides which `.` closes an abbreviation,
`chars` holds the character sets both look at.
"""

from .split import split_sentences

__all__ = ["split_sentences"]
