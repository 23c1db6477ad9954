"""`docs/spec-coverage.md` points only at tests and modules that exist.

Every `tests/…py::name` it cites must be a test function (or class) in that
file, every `tests/…` path a file or folder of the project, and every module
path of a row a file under `src/dex_agents/`. It must not send a reader to
files a clone does not have.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "spec-coverage.md"

_TEST_REF = re.compile(r"`(tests/[\w/.-]+\.py)::(\w+)")
_TEST_PATH = re.compile(r"`(tests/[\w/.-]+)`")
_MODULE = re.compile(r"`((?:[a-z_]+/)+_?[a-z_0-9]+\.py)`")


def _defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


def test_every_cited_test_exists() -> None:
    text = DOC.read_text()
    missing: list[str] = []
    cache: dict[Path, set[str]] = {}
    refs = _TEST_REF.findall(text)
    assert len(refs) > 100, "the table cites tests as `tests/<file>.py::<test>`"
    for file, name in refs:
        path = ROOT / file
        if not path.is_file():
            missing.append(f"{file} (no such file)")
            continue
        names = cache.setdefault(path, _defined(path))
        if name not in names:
            missing.append(f"{file}::{name}")
    assert missing == []


def test_every_cited_path_exists() -> None:
    text = DOC.read_text()
    missing = sorted(
        {p for p in _TEST_PATH.findall(text) if not (ROOT / p.rstrip("/")).exists()}
    )
    assert missing == []


def test_every_cited_module_exists() -> None:
    text = DOC.read_text()
    modules = {m for m in _MODULE.findall(text) if not m.startswith("tests/")}
    assert modules, "rows name their modules as `package/_module.py`"
    missing = sorted(
        m
        for m in modules
        if not (ROOT / "src" / "dex_agents" / m).is_file() and not (ROOT / m).is_file()
    )
    assert missing == []


def test_it_needs_nothing_outside_the_project() -> None:
    text = DOC.read_text()
    assert "/work/" not in text and "../shared" not in text


_ROW = re.compile(r"^\| (C?)\d+ \|.*\| (done|differs|partial|not yet)\b[^|]* \|$")
_SUMMARY = re.compile(
    r"^\| (done|differs|partial|not yet) \| (\d+) \| (\d+) \| (\d+) \|$"
)


def test_the_summary_counts_the_rows_as_they_are() -> None:
    counted: dict[str, list[int]] = {
        s: [0, 0] for s in ("done", "differs", "partial", "not yet")
    }
    for line in DOC.read_text().splitlines():
        if not re.match(r"^\| C?\d+ \|", line):
            continue
        row = _ROW.match(line)
        assert row is not None, f"a row without a status it can count: {line[:80]}"
        counted[row.group(2)][1 if row.group(1) else 0] += 1
    summary = {
        m.group(1): [int(m.group(2)), int(m.group(3)), int(m.group(4))]
        for m in map(_SUMMARY.match, DOC.read_text().splitlines())
        if m is not None
    }
    assert summary == {s: [a, b, a + b] for s, (a, b) in counted.items()}
