"""Tests share one dev server, so a literal session ID may belong to one test only.

Two tests starting the same ID would meet one workflow: the second attaches to
the first's session, whose worker has stopped. `SessionClient.start` refuses
that when the flow types differ, but the test would still fail for a reason
that has nothing to do with what it names.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

_STARTS = {"start": 0}
"""Calls that start a session, and the position of their session ID."""


def _literal_ids(path: Path) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        names = {
            node.targets[0].id: node.value.value
            for node in ast.walk(fn)
            if isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        }
        for node in ast.walk(fn):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute | ast.Name)
            ):
                continue
            name = (
                node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            )
            position = _STARTS.get(name)
            if position is None or len(node.args) <= position:
                continue
            arg = node.args[position]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((arg.value, fn.name))
            elif isinstance(arg, ast.Name) and arg.id in names:
                found.append((names[arg.id], fn.name))
    return found


def test_no_two_tests_start_the_same_literal_session_id() -> None:
    owners: defaultdict[str, set[str]] = defaultdict(set)
    root = Path(__file__).parent
    for path in root.rglob("*.py"):
        for session_id, test in _literal_ids(path):
            owners[session_id].add(f"{path.relative_to(root)}::{test}")
    assert len(owners) > 50, "the scan found the suite's session IDs"
    shared = {sid: sorted(tests) for sid, tests in owners.items() if len(tests) > 1}
    assert shared == {}, f"give each test its own session ID: {shared}"
