"""One compiled copy of the workflow module for every sandboxed workflow instance.

Temporal's sandbox imports the workflow module again for each workflow
instance, so that its globals are that instance's own. The standard loader
compiles the module's source for every such import (or unmarshals its `.pyc`
where one was written): about 4 ms of CPU and 64 KB of code objects per
cached session, a quarter of what a waiting session costs its worker. Code
objects are immutable, so one compiled copy serves every instance; each
import still executes it into a fresh module, as the sandbox needs.

The finder answers only for the names it was given, and only where the normal
path search finds a source file; anything else (a zip import, a module with
only bytecode) loads as it always did.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder, SourceFileLoader
from types import CodeType, ModuleType

_lock = threading.Lock()
_compiled: dict[str, CodeType] = {}
"""Per source path: its code, compiled once per process."""


class _SharedCodeLoader(SourceFileLoader):
    """A source loader that compiles its file once and hands out that code."""

    def get_code(self, fullname: str) -> CodeType:
        code = _compiled.get(self.path)
        if code is None:
            code = super().get_code(fullname)
            if code is None:  # pragma: no cover - a source file always has code
                raise ImportError(f"no code for {fullname!r}", name=fullname)
            with _lock:
                code = _compiled.setdefault(self.path, code)
        return code


class _SharedCodeFinder(MetaPathFinder):
    """Finds the given modules as the path search does, with the sharing loader."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname not in self.names:
            return None
        spec = PathFinder.find_spec(fullname, path, target)
        if spec is None or type(spec.loader) is not SourceFileLoader:
            return spec
        assert spec.origin is not None
        spec.loader = _SharedCodeLoader(fullname, spec.origin)
        return spec


def share_compiled_code(*names: str) -> None:
    """Load the modules `names` from one compiled copy from now on (idempotent)."""
    wanted = frozenset(names)
    with _lock:
        for finder in sys.meta_path:
            if isinstance(finder, _SharedCodeFinder) and wanted <= finder.names:
                return
        sys.meta_path.insert(0, _SharedCodeFinder(wanted))


__all__ = ["share_compiled_code"]
