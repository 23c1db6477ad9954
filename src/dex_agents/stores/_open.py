"""One way to name a runtime store: a SQLite file path or a PostgreSQL connection string.

Workers, clients and the command line on different machines must agree on the
store, and a single string (`DEX_AGENTS_STORE`, `--store`) is what travels
between them: a `postgresql://` URL (or a libpq `host=... dbname=...` string)
for the shared store, a file path for the one-machine default. Anything else
that looks like a URL is refused rather than taken for a file name: a worker
that silently wrote to a local file would stop sharing the store without a
word.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from .._errors import UserError
from ._protocols import RuntimeStore
from ._sqlite import SQLiteRuntimeStore

_URL_SCHEMES = ("postgresql://", "postgres://")
_CONNINFO = re.compile(r"^\s*(host|hostaddr|dbname|user|port|service)\s*=", re.I)
_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.I)


def is_database_url(location: str | os.PathLike[str]) -> bool:
    """Whether `location` names a PostgreSQL store rather than a SQLite file."""
    if not isinstance(location, str):
        return False
    return location.lower().startswith(_URL_SCHEMES) or bool(_CONNINFO.match(location))


def redacted_store(location: str) -> str:
    """`location` fit for messages: a database's password replaced by `***`."""
    if not is_database_url(location):
        return location
    if "://" not in location:
        return _PASSWORD.sub(r"\1***", location)
    parts = urlsplit(location)
    if parts.password is None:
        return location
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def without_password(location: str) -> str:
    """`location` with a database's password left out, for commands to paste.

    A pasted `***` fails to sign in; with no password in it, libpq takes one
    from PGPASSWORD or ~/.pgpass. Messages use `redacted_store`, which shows
    that a password was there.
    """
    if not is_database_url(location):
        return location
    if "://" not in location:
        return re.sub(r"\s*" + _PASSWORD.pattern, "", location, flags=re.I).strip()
    parts = urlsplit(location)
    if parts.password is None:
        return location
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}{netloc}"))


async def open_runtime_store(location: str | os.PathLike[str]) -> RuntimeStore:
    """Open the store that `location` names, creating its tables or file now.

    Raises:
        UserError: The store cannot be reached or created, or `location` is a
            URL of another kind; the message says why.
        ImportError: A PostgreSQL location without the `[postgres]` extra installed.
    """
    if is_database_url(location):
        from ._postgres import PostgresRuntimeStore

        return await PostgresRuntimeStore.open(str(location))
    if isinstance(location, str) and "://" in location:
        scheme = location.split("://", 1)[0]
        raise UserError(
            f"runtime store URL scheme {scheme!r} is not supported; use "
            "postgresql://user@host/db for PostgreSQL, or a file path for SQLite"
        )
    return await SQLiteRuntimeStore.open(Path(location).expanduser())
