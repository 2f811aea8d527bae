"""JavaScript, TypeScript (and TSX), Go and Rust through tree-sitter, with the grammars packaged
on PyPI (`tree-sitter-javascript`, `-typescript`, `-go`, `-rust`): the same output as the Python
adapter (module `code`).

Each language is a table: which node types define a symbol and of what kind, which only give a
prefix to what they hold (a Rust `impl`), which are comments. A symbol's name is its `name`
field (a class field's `property`), qualified by the symbols around it: `Store.get` for a
method, `Server.Handle` for a Go method (by its receiver's type), `Point.x` for a struct
field. Variables and constants are symbols at the top level only, not inside functions.

A comment is prose when it stands on lines of its own; comment markers (`//`, `///`, `//!`,
`/* */` and the `*` that starts a block comment's lines) are removed. A comment block right
above a definition is its documentation (JSDoc, Go and Rust doc comments). A comment block that
parses as code of the same language (code commented out) is code. Tree-sitter always makes a
tree: where the file has syntax errors, a `code_unparsable` finding names the first one.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Final

from ..text import Finding
from .base import Adapter, Normalized
from .code import Definition, Prose, segments_of_code


@dataclass(frozen=True)
class Language:
    name: str
    module: str  # the grammar's Python package
    function: str  # its function that returns the grammar
    definitions: dict[str, str]  # node type -> symbol kind
    prefixes: frozenset[str] = frozenset()  # node types that only qualify what they hold
    comments: frozenset[str] = frozenset({"comment"})
    functions: frozenset[str] = frozenset()  # bodies in which variables are not symbols
    top_level_only: frozenset[str] = frozenset()  # kinds that count outside functions only
    name_fields: tuple[str, ...] = ("name",)
    extra: dict[str, Any] = field(default_factory=dict)


_JS_DEFS: Final = {
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "class_declaration": "class",
    "class": "class",
    "method_definition": "method",
    "field_definition": "attribute",
    "variable_declarator": "variable",
}
_TS_DEFS: Final = _JS_DEFS | {
    "abstract_class_declaration": "class",
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
    "internal_module": "namespace",
    "module": "namespace",
    "function_signature": "function",
    "method_signature": "method",
    "abstract_method_signature": "method",
    "property_signature": "attribute",
    "public_field_definition": "attribute",
}
_JS_FUNCTIONS: Final = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "method_definition",
        "function_expression",
        "function",
        "arrow_function",
        "generator_function",
    }
)

LANGUAGES: Final = {
    "javascript": Language(
        "javascript",
        "tree_sitter_javascript",
        "language",
        _JS_DEFS,
        functions=_JS_FUNCTIONS,
        top_level_only=frozenset({"variable", "attribute"}),
        name_fields=("name", "property"),
    ),
    "typescript": Language(
        "typescript",
        "tree_sitter_typescript",
        "language_typescript",
        _TS_DEFS,
        functions=_JS_FUNCTIONS,
        top_level_only=frozenset({"variable", "attribute"}),
        name_fields=("name", "property"),
    ),
    "tsx": Language(
        "tsx",
        "tree_sitter_typescript",
        "language_tsx",
        _TS_DEFS,
        functions=_JS_FUNCTIONS,
        top_level_only=frozenset({"variable", "attribute"}),
        name_fields=("name", "property"),
    ),
    "go": Language(
        "go",
        "tree_sitter_go",
        "language",
        {
            "function_declaration": "function",
            "method_declaration": "method",
            "type_spec": "type",
            "type_alias": "type",
            "field_declaration": "attribute",
            "method_elem": "method",
            "const_spec": "constant",
            "var_spec": "variable",
        },
        functions=frozenset({"function_declaration", "method_declaration", "func_literal"}),
        top_level_only=frozenset({"constant", "variable"}),
    ),
    "rust": Language(
        "rust",
        "tree_sitter_rust",
        "language",
        {
            "function_item": "function",
            "function_signature_item": "function",
            "struct_item": "struct",
            "enum_item": "enum",
            "union_item": "union",
            "trait_item": "trait",
            "type_item": "type",
            "const_item": "constant",
            "static_item": "static",
            "mod_item": "module",
            "macro_definition": "macro",
            "field_declaration": "attribute",
            "enum_variant": "variant",
        },
        prefixes=frozenset({"impl_item"}),
        comments=frozenset({"line_comment", "block_comment"}),
        functions=frozenset({"function_item", "closure_expression"}),
    ),
}

# Attributes and decorators written before a definition belong to it (Rust, TypeScript).
_ATTRIBUTES: Final = frozenset({"attribute_item", "decorator"})
_IDENT: Final = re.compile(r"[A-Za-z_$][\w$]*")
_LINE_MARK: Final = re.compile(r"^\s*//+!?")
_BLOCK_OPEN: Final = re.compile(r"^\s*/\*+!?")
_BLOCK_CLOSE: Final = re.compile(r"\*+/\s*$")
_BLOCK_STAR: Final = re.compile(r"^\s*\*(?!/)")


@functools.cache
def _parser(language: str) -> Any:
    import importlib

    from tree_sitter import Language as TSLanguage
    from tree_sitter import Parser

    spec = LANGUAGES[language]
    grammar = getattr(importlib.import_module(spec.module), spec.function)()
    return Parser(TSLanguage(grammar))


def _text(node: Any) -> str:
    return bytes(node.text or b"").decode("utf-8", "replace")


def _end_line(node: Any) -> int:
    row, column = int(node.end_point[0]), int(node.end_point[1])
    return row + 1 if column > 0 or row == node.start_point[0] else row


class _Collector:
    def __init__(self, spec: Language, raw: list[str]) -> None:
        self.spec = spec
        self.raw = raw
        self.definitions: list[Definition] = []
        self.comments: list[Any] = []
        self.first_error: int | None = None

    def name_of(self, node: Any) -> str | None:
        if node.type == "method_declaration":  # Go: qualified by the receiver's type
            receiver = node.child_by_field_name("receiver")
            name = node.child_by_field_name("name")
            types = _IDENT.findall(_text(receiver).replace("*", " ")) if receiver else []
            if name is None:
                return None
            return f"{types[-1]}.{_text(name)}" if types else _text(name)
        for field_name in self.spec.name_fields:
            found = node.child_by_field_name(field_name)
            if found is not None:
                return _text(found)
        if node.type == "field_declaration":  # Go: several names share a type
            names = [c for c in node.named_children if c.type == "field_identifier"]
            return _text(names[0]) if names else None
        return None

    def walk(self, node: Any, prefix: str, in_function: bool) -> None:
        spec = self.spec
        attributes: int | None = None  # first line of the attributes right before a child
        for child in node.children:
            kind = child.type
            if kind in _ATTRIBUTES:
                if attributes is None:
                    attributes = child.start_point[0] + 1
                continue
            first_line = min(attributes or child.start_point[0] + 1, child.start_point[0] + 1)
            if kind not in spec.comments:
                attributes = None
            if (child.is_error or child.is_missing) and self.first_error is None:
                self.first_error = child.start_point[0] + 1
            if kind in spec.comments:
                self.comments.append(child)
                continue
            qualified = prefix
            symbol_kind = spec.definitions.get(kind)
            if symbol_kind == "variable" and child.child_by_field_name("value") is not None:
                value = child.child_by_field_name("value")
                if value.type in spec.functions:
                    symbol_kind = "function"
            if symbol_kind and not (in_function and symbol_kind in spec.top_level_only):
                name = self.name_of(child)
                if name and _IDENT.match(name.split(".")[-1]):
                    qualified = f"{prefix}{name}."
                    self.definitions.append(
                        Definition(
                            qualified[:-1],
                            _kind(symbol_kind, child),
                            first_line,
                            _end_line(child),
                        )
                    )
            elif kind in spec.prefixes:
                target = child.child_by_field_name("type")
                names = _IDENT.findall(re.sub(r"<.*", "", _text(target))) if target else []
                if names:
                    qualified = f"{prefix}{names[-1]}."
            self.walk(child, qualified, in_function or kind in spec.functions)


def _kind(kind: str, node: Any) -> str:
    if node.type == "type_spec":  # Go: what the type is
        body = node.child_by_field_name("type")
        if body is not None and body.type in ("struct_type", "interface_type"):
            return str(body.type).removesuffix("_type")
    return kind


def _comment_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if text.lstrip().startswith("/*"):
        lines[0] = _BLOCK_OPEN.sub("", lines[0])
        lines[-1] = _BLOCK_CLOSE.sub("", lines[-1])
        return [_BLOCK_STAR.sub("", line).removeprefix(" ").rstrip() for line in lines]
    return [_LINE_MARK.sub("", line).removeprefix(" ").rstrip() for line in lines]


def normalize_code(language: str, text: str) -> Normalized:
    spec = LANGUAGES[language]
    raw = text.split("\n")
    tree = _parser(language).parse(text.encode("utf-8"))
    collector = _Collector(spec, raw)
    collector.walk(tree.root_node, "", False)
    findings: list[Finding] = []
    if tree.root_node.has_error:
        line = collector.first_error
        findings.append(
            Finding(
                "code_unparsable",
                f"line {line}" if line else "document",
                f"{language} has syntax errors there: symbols past it may be missing",
            )
        )
    prose: list[Prose] = []
    for node in collector.comments:
        first, last = node.start_point[0] + 1, _end_line(node)
        before = raw[first - 1][: _column(raw[first - 1], node.start_point[1])]
        after = (
            raw[last - 1][_column(raw[last - 1], node.end_point[1]) :]
            if last == node.end_point[0] + 1
            else ""
        )
        if before.strip() or after.strip():
            continue  # shares its line with code
        body = _comment_lines(_text(node).rstrip("\n"))  # a Rust line comment holds its newline
        if prose and prose[-1].line_end == first - 1:
            prose[-1].lines.extend(body)
        else:
            prose.append(Prose("comment", first, body, leading=True))
    return segments_of_code(
        text, collector.definitions, prose, findings, functools.partial(_is_code, language)
    )


def _column(line: str, byte_column: int) -> int:
    """A tree-sitter column (UTF-8 bytes) as a character index into `line`."""
    return len(line.encode("utf-8")[:byte_column].decode("utf-8", "ignore"))


def _is_code(language: str, text: str) -> bool:
    """A comment block that is code of the language (commented out), not prose."""
    if not any(c in text for c in ";{}=()"):
        return False
    tree = _parser(language).parse(text.encode("utf-8"))
    root = tree.root_node
    if root.has_error or not root.named_children:
        return False
    return not all(
        c.type == "expression_statement"
        and c.named_children
        and c.named_children[0].type in ("identifier", "string", "number")
        for c in root.named_children
    )


def _adapter(language: str) -> Adapter:
    spec = LANGUAGES[language]
    return Adapter(
        name=language,
        version=1,
        run=functools.partial(normalize_code, language),
        config={"parser": "tree-sitter", "grammar": spec.module, "language": spec.function},
    )


JAVASCRIPT: Final = _adapter("javascript")
TYPESCRIPT: Final = _adapter("typescript")
TSX: Final = _adapter("tsx")
GO: Final = _adapter("go")
RUST: Final = _adapter("rust")
