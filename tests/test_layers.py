"""The package's layers point one way: the import graph of `src/dex_agents` is checked.

The layers are those of `docs/architecture.md`. A package may import itself
and the packages of lower layers, never one of its own layer or above; every
import counts (module level, inside functions, under `TYPE_CHECKING`), so a
lazy import cannot hide a cycle. Entry points (`__main__.py`) sit above all.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import dex_agents

SRC = Path(dex_agents.__file__).parent

LAYERS: list[set[str]] = [
    {"_errors"},
    {"session", "_schema"},
    {"stores", "connectors", "notify", "otel", "_scripted"},
    {"postgres", "s3", "temporal"},
    {"claude", "__init__"},
    {"testing", "examples"},
    {"web"},
    {"cli"},
]
"""Lowest first; `__init__` is the package root's facade (`import dex_agents`)."""

_LAYER = {package: i for i, layer in enumerate(LAYERS) for package in layer}


def _part(parts: tuple[str, ...]) -> str:
    """The top-level part of `dex_agents` a module path (below `dex_agents/`) is in."""
    first = parts[0].removesuffix(".py")
    return "__init__" if first == "__init__" else first


def _imports(module: tuple[str, ...], source: str) -> Iterator[tuple[str, int]]:
    """(part of dex_agents imported, line) for each import in a module's source."""
    is_package = module[-1] == "__init__.py"
    # The dotted package a relative import starts from.
    package = ("dex_agents", *module[:-1])
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "dex_agents":
                    yield (parts[1] if len(parts) > 1 else "__init__"), node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                if not is_package and node.level > len(package):
                    continue
                target = (*base, *(node.module.split(".") if node.module else ()))
            else:
                target = tuple((node.module or "").split("."))
            if target[0] != "dex_agents":
                continue
            if len(target) > 1:
                yield target[1], node.lineno
            else:  # `from dex_agents import session` or `from .. import session`
                for alias in node.names:
                    yield (
                        (alias.name if alias.name in _LAYER else "__init__"),
                        node.lineno,
                    )


def violations(sources: Mapping[tuple[str, ...], str]) -> list[str]:
    """Every import of `sources` (module path below `dex_agents/` → text) that breaks a layer."""
    found: list[str] = []
    for module, source in sorted(sources.items()):
        if module[-1] == "__main__.py":
            continue
        part = _part(module)
        if part not in _LAYER:
            found.append(
                f"{'/'.join(module)}: {part!r} is in no layer; add it to LAYERS"
            )
            continue
        for imported, line in _imports(module, source):
            if imported == part:
                continue
            if imported not in _LAYER:
                found.append(
                    f"{'/'.join(module)}:{line} imports {imported!r}, in no layer"
                )
            elif _LAYER[imported] >= _LAYER[part]:
                found.append(
                    f"{'/'.join(module)}:{line}: {part!r} (layer {_LAYER[part]}) "
                    f"imports {imported!r} (layer {_LAYER[imported]})"
                )
    return found


def _sources() -> dict[tuple[str, ...], str]:
    return {
        path.relative_to(SRC).parts: path.read_text()
        for path in SRC.rglob("*.py")
        if "__pycache__" not in path.parts
    }


def test_every_import_points_to_a_lower_layer() -> None:
    assert violations(_sources()) == []


def test_a_deliberate_violation_is_found() -> None:
    sources = _sources()
    sources[("session", "_bad.py")] = (
        "def f():\n    from ..temporal import SessionClient\n    return SessionClient\n"
    )
    sources[("cli", "_fine.py")] = "from ..temporal import SessionClient\n"
    sources[("stores", "_same_layer.py")] = "import dex_agents.connectors\n"
    assert violations(sources) == [
        "session/_bad.py:2: 'session' (layer 1) imports 'temporal' (layer 3)",
        "stores/_same_layer.py:1: 'stores' (layer 2) imports 'connectors' (layer 2)",
    ]


def test_the_command_line_does_not_import_the_test_kit() -> None:
    cli = {m: s for m, s in _sources().items() if m[0] == "cli"}
    imported = {name for m, s in cli.items() for name, _ in _imports(m, s)}
    assert "testing" not in imported
