"""The package's layers, checked on the source (ARCHITECTURE.md): imports point one way, front
ends reach the rest only through the service layer, no import cycle (imports inside functions
count), no private name used across modules, no module-level `global`, no module over 500
lines and no function over 80.

Layers, top to bottom; each may import the layers below it and the ground floor:

    front ends   cli (+ cli_common, cli_servers, cli_render), mcp_server, universe,
                 __main__   -> api only
    api          the service layer
    pipeline     the operations
    storage      the ledger, the blobs, the index files
    model        pure functions over text and rows
    ground       errors, canonical, ids, sentences, config, workspace, progress, faults, ...
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "raytsystem"
FRONT_ENDS = {
    "cli",
    "cli_common",
    "cli_render",
    "cli_servers",
    "mcp_server",
    "universe",
    "__main__",
}
ORDER = ["ground", "model", "storage", "pipeline", "api", "front"]
# What a front end may import besides the service layer: the shared errors, the package's
# version, the progress bar it draws, and other front-end modules.
FRONT_MAY_USE = {"errors", "raytsystem", "progress"}


def modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = modules()


def layer(name: str) -> str:
    parts = name.split(".")
    top = parts[1] if len(parts) > 1 else "raytsystem"
    if top in FRONT_ENDS:
        return "front"
    if top in ("model", "storage", "pipeline", "api"):
        return top
    return "ground"


def imports(name: str) -> Iterator[tuple[str, list[str], int]]:
    """(imported module, the names taken from it, line) of every import in `name`, inside
    functions and `TYPE_CHECKING` blocks too."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            names = [a.name for a in node.names]
            submodules = [f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES]
            yield base, [n for n in names if f"{base}.{n}" not in MODULES], node.lineno
            for sub in submodules:
                yield sub, [], node.lineno


def internal_edges() -> Iterator[tuple[str, str, list[str], int]]:
    for name in MODULES:
        for target, names, line in imports(name):
            if target in MODULES and target != name:
                yield name, target, names, line


def test_there_are_modules_in_every_layer() -> None:
    assert {layer(m) for m in MODULES} == set(ORDER)


def test_imports_point_down_the_layers() -> None:
    wrong = [
        f"{src}:{line} imports {dst} ({layer(src)} -> {layer(dst)})"
        for src, dst, _names, line in internal_edges()
        if layer(src) != layer(dst) and ORDER.index(layer(dst)) > ORDER.index(layer(src))
    ]
    assert not wrong, "\n".join(wrong)


def test_front_ends_reach_the_rest_only_through_the_service_layer() -> None:
    wrong = []
    for src, dst, _names, line in internal_edges():
        if layer(src) != "front" or layer(dst) in ("front", "api"):
            continue
        if dst.split(".")[-1] not in FRONT_MAY_USE:
            wrong.append(f"{src}:{line} imports {dst}")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for src, dst, _names, _line in internal_edges():
        graph[src].add(dst)
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            pytest.fail("import cycle: " + " -> ".join([*path[path.index(node) :], node]))
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, [*path, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])


def test_no_private_name_is_used_across_modules() -> None:
    wrong = [
        f"{src}:{line} takes {', '.join(n for n in names if n.startswith('_'))} from {dst}"
        for src, dst, names, line in internal_edges()
        if any(n.startswith("_") and not n.startswith("__") for n in names)
    ]
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and any(name_imports(name, node.value.id))
            ):
                wrong.append(f"{name}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not wrong, "\n".join(wrong)


def name_imports(name: str, local: str) -> Iterator[str]:
    """The internal modules that `name` imports under the local name `local`."""
    path = MODULES[name]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == local:
                    for target, _names, _line in imports(name):
                        if target.endswith("." + alias.name) and target in MODULES:
                            yield target


def test_no_global_statement() -> None:
    found = [
        f"{name}:{node.lineno}"
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Global)
    ]
    assert not found, found


MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def test_modules_and_functions_stay_short() -> None:
    """A unit a newcomer reads at once: no module over 500 lines, no function over 80
    (decorators not counted)."""
    long = []
    for name, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        if (lines := text.count("\n")) > MAX_MODULE_LINES:
            long.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {size} lines")
    assert not long, long


def test_the_checks_see_a_violation() -> None:
    """The layer rule itself: storage above model, a front end beside the service layer."""
    assert ORDER.index(layer("raytsystem.storage.db")) > ORDER.index(
        layer("raytsystem.model.claims")
    )
    assert layer("raytsystem.universe.server") == "front"
    assert layer("raytsystem.cli") == "front" and layer("raytsystem.api") == "api"
    assert layer("raytsystem.errors") == "ground"
