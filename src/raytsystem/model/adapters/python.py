"""Python source through the standard library: `ast` for definitions and docstrings,
`tokenize` for comments.

Definitions: classes, functions and methods at any depth (`Outer.method.helper`), and names
assigned at module or class level (variables, class attributes, `self.x` is not one). A
docstring's text is taken from the raw lines (quotes and prefix removed, escapes left as
written), so its lines are the file's. A comment is prose when it stands on lines of its own;
a trailing comment stays in its code line. Comments that are tool directives (`#!`, an encoding
cookie, `# type:`, `# noqa`, `# pragma:`) and comments that parse as Python code (code commented
out) are code. A file that does not parse keeps its comments (as far as `tokenize` reads) and a
`code_unparsable` finding; its definitions are then unknown.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from ..text import Finding
from .base import Adapter, Normalized
from .code import Definition, Prose, segments_of_code

if TYPE_CHECKING:
    import ast

_DIRECTIVE: Final = re.compile(
    r"^#\s*(?:!|-\*-|(?:vim?|ex):|coding[:=]|type:|noqa|pragma|fmt:|pylint:|mypy:|isort:|ruff:)"
)
_QUOTE_START: Final = re.compile(r"[rRuUbBfF]{0,2}(\"\"\"|'''|\"|')")


def normalize_python(text: str) -> Normalized:
    import ast

    findings: list[Finding] = []
    definitions: list[Definition] = []
    prose: list[Prose] = []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        line = getattr(exc, "lineno", None)
        findings.append(
            Finding(
                "code_unparsable",
                f"line {line}" if line else "document",
                f"Python cannot parse it ({type(exc).__name__}: {getattr(exc, 'msg', exc)}): "
                "only its comments are prose",
            )
        )
    else:
        _walk(tree, "", False, definitions, prose, text.split("\n"))
    prose.extend(
        _comments(text, {line for p in prose for line in range(p.line_start, p.line_end + 1)})
    )
    prose.sort(key=lambda p: p.line_start)
    return segments_of_code(text, definitions, prose, findings, _is_code)


def _walk(
    node: ast.AST,
    prefix: str,
    in_function: bool,
    definitions: list[Definition],
    prose: list[Prose],
    raw: list[str],
) -> None:
    import ast

    body = getattr(node, "body", None)
    if (
        isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and body
    ):
        first = body[0]
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            doc = _docstring(first, raw)
            if doc is not None:
                prose.append(doc)
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{child.name}"
            start = min([child.lineno] + [d.lineno for d in child.decorator_list])
            if isinstance(child, ast.ClassDef):
                kind = "class"
            else:
                kind = "method" if isinstance(node, ast.ClassDef) else "function"
            definitions.append(Definition(name, kind, start, child.end_lineno or child.lineno))
            _walk(child, name + ".", kind != "class" or in_function, definitions, prose, raw)
        elif not in_function and isinstance(child, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = child.targets if isinstance(child, ast.Assign) else [child.target]
            kind = "attribute" if isinstance(node, ast.ClassDef) else "variable"
            for target in targets:
                for name_node in ast.walk(target):
                    if isinstance(name_node, ast.Name):
                        definitions.append(
                            Definition(
                                f"{prefix}{name_node.id}",
                                kind,
                                child.lineno,
                                child.end_lineno or child.lineno,
                            )
                        )
        elif isinstance(child, ast.If | ast.Try | ast.With | ast.For | ast.While):
            # Definitions under `if TYPE_CHECKING:`, `try: import ...` and the like.
            _walk(child, prefix, in_function, definitions, prose, raw)
        elif isinstance(child, ast.ExceptHandler | ast.match_case):
            _walk(child, prefix, in_function, definitions, prose, raw)


def _docstring(expr: ast.Expr, raw: list[str]) -> Prose | None:
    """The docstring's text as written on its raw lines, without prefix and quotes."""
    first, last = expr.lineno, expr.end_lineno or expr.lineno
    lines = raw[first - 1 : last]
    if not lines:
        return None
    head = lines[0][expr.col_offset :]
    m = _QUOTE_START.match(head)
    if m is None:  # implicit concatenation or something unusual: keep it as code
        return None
    quote = m.group(1)
    end_col = expr.end_col_offset if expr.end_col_offset is not None else len(lines[-1])
    if len(lines) == 1:
        inner = [head[m.end() : end_col - expr.col_offset - len(quote)]]
    else:
        tail = lines[-1][:end_col]
        inner = [head[m.end() :], *lines[1:-1], tail[: len(tail) - len(quote)]]
    rest = [line for line in inner[1:] if line.strip()]
    margin = min((len(line) - len(line.lstrip()) for line in rest), default=0)
    return Prose("docstring", first, [inner[0].strip(), *(line[margin:] for line in inner[1:])])


def _comments(text: str, taken: set[int]) -> list[Prose]:
    """Blocks of comments that stand on their own lines (consecutive lines, no blank between)."""
    import io
    import tokenize

    found: list[tuple[int, str]] = []
    raw = text.split("\n")
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type != tokenize.COMMENT:
                continue
            row, col = token.start
            if row in taken or raw[row - 1][:col].strip():
                continue  # a trailing comment: part of its code line
            found.append((row, token.string))
    except (tokenize.TokenError, SyntaxError):
        pass  # what was read so far still counts (a file that does not parse)
    blocks: list[Prose] = []
    for row, comment in found:
        if (row == 1 and comment.startswith("#!")) or _DIRECTIVE.match(comment):
            continue
        body = comment.lstrip("#").removeprefix(" ").rstrip()
        if blocks and blocks[-1].line_end == row - 1:
            blocks[-1].lines.append(body)
        else:
            blocks.append(Prose("comment", row, [body], leading=True))
    return blocks


def _is_code(text: str) -> bool:
    """A comment block that is Python code (commented out), not a bare word or phrase."""
    import ast

    if not any(c in text for c in "=()[]{}:"):
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return bool(tree.body) and not all(
        isinstance(s, ast.Expr) and isinstance(s.value, ast.Name | ast.Constant) for s in tree.body
    )


ADAPTER = Adapter(name="python", version=1, run=normalize_python, config={"parser": "ast"})
