"""The scripted model a `dex-agents dev` serves, shared with the workers of its state directory.

`dev --agent` without `ANTHROPIC_API_KEY` answers with the scripted Messages
API, offline. A `dex-agents worker` started beside it, on the same state
directory and also without a key, would run the real CLI with no credentials:
every turn it took would fail "not signed in" while `dev`'s own turns passed,
so about half the sessions of a shared flow failed. `dev` writes where its
scripted API listens (`scripted-model.json` in the state directory, removed
when it stops), and such a worker uses it too.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

_FILE = "scripted-model.json"


@dataclass(frozen=True)
class DevModel:
    """The scripted Messages API of a running `dex-agents dev`."""

    base_url: str
    pid: int


@contextlib.contextmanager
def shared_with_workers(directory: Path, base_url: str) -> Generator[None, None, None]:
    """Record `base_url` in `directory` until the block ends (this process is `dev`)."""
    path = directory / _FILE
    path.write_text(json.dumps({"base_url": base_url, "pid": os.getpid()}))
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def dev_model(directory: Path) -> DevModel | None:
    """The scripted model a `dev` still running on `directory` serves, or None."""
    try:
        raw = json.loads((directory / _FILE).read_text())
        model = DevModel(base_url=str(raw["base_url"]), pid=int(raw["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(model.pid, 0)
    except ProcessLookupError:
        return None  # that dev is gone (killed: its file stayed)
    except PermissionError:
        pass  # alive, another user's
    return model
