"""A ledger of side effects, shared by processes: crash tests count, never infer."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..session._json import JsonObject


class Ledger:
    """An append-only JSON-lines file; each line is one side effect.

    Appends use `O_APPEND` and one `write` per line, so a worker killed mid-run
    leaves whole lines only, and several processes can share the file.
    """

    __test__ = False

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def record(self, kind: str, **data: object) -> None:
        """Append one entry of `kind`."""
        line = json.dumps({"kind": kind, **data}, sort_keys=True) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def entries(self, kind: str | None = None) -> list[JsonObject]:
        """Every entry (of `kind`), in write order."""
        if not self.path.exists():
            return []
        rows: list[JsonObject] = [
            json.loads(line)
            for line in self.path.read_text().splitlines()
            if line.strip()
        ]
        return [r for r in rows if kind is None or r.get("kind") == kind]

    def count(self, kind: str) -> int:
        """How many entries of `kind` exist."""
        return len(self.entries(kind))
