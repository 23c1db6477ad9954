"""Load the session flow named by `--agent module:attr` or `path/to/file.py:attr`.

The reference is the only thing `dev`, `worker` and `chat` know about an agent, so
an application's flow plugs in unchanged: the attribute is an `AgentSessionFlow`,
or a function without arguments that returns one (for flows built from settings).
Like uvicorn's `module:app`, a dotted module is imported with the working directory
on `sys.path`, so `examples.support_agent:flow` works from a project checkout.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from .._errors import InvalidArgumentError
from ._flow import AgentSessionFlow

_FORMAT_HINT = "write `module:attr` or `path/to/file.py:attr`"


def load_flow(ref: str) -> AgentSessionFlow:
    """Import `ref` and return its flow.

    Raises:
        InvalidArgumentError: the reference is malformed, its module or
            attribute is missing, importing it failed, or it is not a flow.
    """
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr.isidentifier():
        raise _bad(ref, f"it is not a reference to a flow; {_FORMAT_HINT}")
    module = _import(ref, target)
    if not hasattr(module, attr):
        raise _bad(ref, f"module {module.__name__!r} has no attribute {attr!r}")
    value: object = getattr(module, attr)
    if isinstance(value, AgentSessionFlow):
        return value
    if callable(value) and not isinstance(value, type):
        factory: Callable[[], object] = value
        try:
            made = factory()
        except TypeError as err:
            raise _bad(ref, f"calling `{attr}()` failed: {err}") from err
        if isinstance(made, AgentSessionFlow):
            return made
        value = made
    raise _bad(
        ref,
        f"`{attr}` is of type {type(value).__name__!r}, not an `AgentSessionFlow`; point at "
        "the result of `create_agent_session_flow(...)` (or a function returning it)",
    )


def _import(ref: str, target: str) -> ModuleType:
    if target.endswith(".py") or "/" in target:
        return _import_file(ref, Path(target))
    # The working directory first, as `python -m` would: the user's own package
    # wins over an installed one of the same name.
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as err:
        if err.name is not None and target.startswith(err.name):
            raise _bad(
                ref,
                f"no module named {err.name!r} (looked in {cwd!r} and the "
                "installed packages); check the spelling, or give a file path",
            ) from err
        raise _import_failed(ref, target, err) from err
    except Exception as err:
        raise _import_failed(ref, target, err) from err


def _import_file(ref: str, path: Path) -> ModuleType:
    path = path.expanduser().resolve()
    if not path.is_file():
        raise _bad(ref, f"file {str(path)!r} does not exist")
    name = path.stem
    if not name.isidentifier():
        raise _bad(ref, f"{path.name!r} cannot be a module name; rename the file")
    # Siblings of the file are importable from it, as when run as a script.
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise _bad(ref, f"{str(path)!r} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, so dataclasses and pickling inside it find it.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise _import_failed(ref, str(path), err) from err
    return module


def _bad(ref: str, reason: str) -> InvalidArgumentError:
    return InvalidArgumentError("agent", f"bad `--agent {ref}`: {reason}")


def _import_failed(ref: str, target: str, err: Exception) -> InvalidArgumentError:
    first_line = str(err).strip().splitlines()[0] if str(err).strip() else ""
    how = (
        f"python {target}" if target.endswith(".py") else f"python -c 'import {target}'"
    )
    return _bad(
        ref,
        f"importing {target!r} raised {type(err).__name__}: {first_line}; run "
        f"`{how}` to see the traceback",
    )
