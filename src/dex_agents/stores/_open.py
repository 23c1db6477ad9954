"""One way to name a runtime store: a SQLite file path or a PostgreSQL URL.

Workers, clients and the command line on different machines must agree on the
store, and a single string (`DEX_AGENTS_STORE`, `--store`) is what travels
between them: a `postgresql://` URL for the shared store, a file path for the
one-machine default.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._protocols import RuntimeStore
from ._sqlite import SQLiteRuntimeStore

_URL_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(location: str | os.PathLike[str]) -> bool:
    """Whether `location` names a PostgreSQL store rather than a SQLite file."""
    return isinstance(location, str) and location.startswith(_URL_SCHEMES)


async def open_runtime_store(location: str | os.PathLike[str]) -> RuntimeStore:
    """Open the store that `location` names, creating its tables or file now.

    Raises:
        UserError: The store cannot be reached or created; the message says why.
        ImportError: A PostgreSQL URL without the `[postgres]` extra installed.
    """
    if is_database_url(location):
        from ._postgres import PostgresRuntimeStore

        return await PostgresRuntimeStore.open(str(location))
    return await SQLiteRuntimeStore.open(Path(location).expanduser())
