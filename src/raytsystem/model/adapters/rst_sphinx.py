"""A docutils reStructuredText parser that reads Sphinx's directives and roles as Sphinx would.

docutils reports a directive or role it does not know as an error and drops its content;
Sphinx documents are full of them. This parser keeps docutils' own states and adds three
kinds of directive for the unknown ones: those named in `OBJECT_DIRECTIVES` (object
descriptions such as `function` or `py:class`) hold prose under their signature (a heading
segment), those in `PROSE_DIRECTIVES` (`versionchanged`, `seealso`, ...) hold prose after their
first argument line, any other (`toctree`, `testcode`, ...) keeps its content as a literal
block. An unknown interpreted-text role (`:func:`x``) shows its text as Sphinx would
(`title <target>` shows the title) as a literal.
"""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from docutils import nodes

# Directives docutils does not know whose content is prose (a `domain:` prefix is ignored):
# Sphinx's object descriptions, whose arguments are signatures (heading segments)...
OBJECT_DIRECTIVES: Final = (
    "attribute",
    "class",
    "classmethod",
    "cmdoption",
    "confval",
    "data",
    "decorator",
    "decoratormethod",
    "describe",
    "enum",
    "enumerator",
    "envvar",
    "exception",
    "function",
    "macro",
    "member",
    "method",
    "module",
    "object",
    "option",
    "property",
    "staticmethod",
    "struct",
    "type",
    "union",
    "var",
)
# ... and its paragraph-level markup, whose first argument line (a version, a condition) is a
# heading segment and whose further argument lines are prose.
PROSE_DIRECTIVES: Final = (
    "centered",
    "deprecated",
    "deprecated-removed",
    "glossary",
    "hlist",
    "only",
    "seealso",
    "todo",
    "versionadded",
    "versionchanged",
    "versionremoved",
)
_OBJECTS: Final = frozenset(OBJECT_DIRECTIVES)
_PROSE: Final = frozenset(PROSE_DIRECTIVES)
_XREF: Final = re.compile(r"(.*?)\s*<([^<>]*)>\s*$", re.DOTALL)


@functools.cache
def parser_class() -> Any:
    """A docutils rST parser whose unknown directives and roles read as Sphinx's would."""
    from docutils.parsers.rst import Parser, states

    state_classes = _state_classes(*_directive_classes())
    interpreted = _interpreted_role()

    class SphinxTolerantParser(Parser):
        def __init__(self) -> None:
            # The Inliner is not subclassed: it formats its patterns from its class's own
            # namespace, so the override is set on the instance.
            inliner = states.Inliner()
            setattr(inliner, "interpreted", types.MethodType(interpreted, inliner))  # noqa: B010
            super().__init__(inliner=inliner)
            self.state_classes = state_classes

    return SphinxTolerantParser


def _directive_classes() -> tuple[Any, Any, Any]:
    """The directives that unknown ones are read as: (object, prose, opaque)."""
    from docutils import nodes
    from docutils.parsers.rst import Directive, directives

    class AnyOption(dict[str, Any]):
        """An option spec that takes every option (their values are not needed)."""

        def __missing__(self, key: str) -> Any:
            return directives.unchanged

        def __bool__(self) -> bool:
            return True

    class ProseDirective(Directive):
        optional_arguments = 1
        final_argument_whitespace = True
        option_spec = AnyOption()
        has_content = True
        object_description = False

        def run(self) -> list[nodes.Node]:
            box = nodes.container()
            argument = self.arguments[0] if self.arguments else ""
            head, rest = (argument, "") if self.object_description else _first_line(argument)
            if head.strip():
                signature = nodes.rubric(head, head)
                signature.line = self.lineno
                box += signature
            if rest.strip():
                inline, _messages = self.state.inline_text(rest, self.lineno + 1)
                paragraph = nodes.paragraph(rest, "", *inline)
                paragraph.line = self.lineno + 1
                box += paragraph
            if self.content:
                self.state.nested_parse(self.content, self.content_offset, box)
            return [box]

    class ObjectDirective(ProseDirective):
        object_description = True

    class OpaqueDirective(Directive):
        optional_arguments = 1
        final_argument_whitespace = True
        option_spec = AnyOption()
        has_content = True

        def run(self) -> list[nodes.Node]:
            if not self.content:
                return []
            text = "\n".join(self.content)
            block = nodes.literal_block(text, text)
            block.line = self.content_offset + 1
            return [block]

    return ObjectDirective, ProseDirective, OpaqueDirective


def _state_classes(
    object_directive: Any, prose_directive: Any, opaque_directive: Any
) -> tuple[Any, ...]:
    """docutils' parser states, with unknown directives run as the given ones (by name), and
    nested parses (directive content, lists) kept on these states rather than docutils' own."""
    from docutils.parsers.rst import states

    directive_line = next(
        p for m, p in states.Body.explicit.constructs if m.__name__ == "directive"
    )

    def unknown_directive(self: Any, type_name: str) -> Any:
        match = directive_line.match(self.state_machine.line)
        if match is None:  # not expected: the line matched this pattern to get here
            return _original_unknown(self, type_name)  # type: ignore[no-untyped-call]
        short = type_name.lower().rsplit(":", 1)[-1]
        directive = (
            object_directive
            if short in _OBJECTS
            else prose_directive
            if short in _PROSE
            else opaque_directive
        )
        return self.run_directive(directive, match, type_name, {})

    _original_unknown = states.Body.unknown_directive

    def init(self: Any, state_machine: Any, debug: bool = False) -> None:
        states.RSTState.__init__(self, state_machine, debug)
        # Nested parses (directive content, lists) use these states too, not docutils' own.
        self.nested_sm_kwargs = {"state_classes": state_classes, "initial_state": "Body"}

    cache: list[Any] = []  # nested state machines made with these states, not docutils'
    state_classes = tuple(
        type(
            cls.__name__,
            (cls,),
            {"__init__": init, "nested_sm_cache": cache}
            | ({"unknown_directive": unknown_directive} if issubclass(cls, states.Body) else {}),
        )
        for cls in states.state_classes
    )
    return state_classes


def _interpreted_role() -> Callable[..., Any]:
    """The Inliner's `interpreted`, for which an unknown role shows its text as a literal."""
    from docutils import nodes
    from docutils.parsers.rst import roles

    def interpreted(self: Any, rawsource: str, text: str, role: str, lineno: int) -> Any:
        role_fn, messages = roles.role(role, self.language, lineno, self.reporter)
        if role_fn:
            made, more = role_fn(role, rawsource, text, lineno, self, {}, [])
            return made, [*messages, *more]
        shown = _xref_text(text)
        shown += "\n" * (text.count("\n") - shown.count("\n"))  # keep the line count
        return [nodes.literal(rawsource, shown)], []

    return interpreted


def _first_line(text: str) -> tuple[str, str]:
    head, _, rest = text.partition("\n")
    return head, rest


def _xref_text(text: str) -> str:
    """What Sphinx shows of a cross-reference: `title <target>` its title, `~a.b.c` c."""
    m = _XREF.match(text)
    if m and m.group(1).strip():
        return m.group(1)
    shown = m.group(2) if m else text
    shown = shown.lstrip("!")
    if shown.startswith("~"):
        shown = shown[1:].rsplit(".", 1)[-1]
    return shown
