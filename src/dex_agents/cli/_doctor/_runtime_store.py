"""The runtime store, by a write that is rolled back: nothing is left behind."""

from __future__ import annotations

import sqlite3
import tempfile
import uuid
from pathlib import Path

from ..._errors import UserError
from ...stores._open import is_database_url, open_runtime_store, redacted_store
from .._context import Target, store_label
from .._errors import one_line
from ._check import Check, Subject, failed_check, in_thread

_STORE_FIX = "pass `--store` (or `--state-dir`) a place the worker can write"
_PROBE_TABLE = "event_cursors"
"""The PostgreSQL store's simplest table; the probe's row never commits."""


async def check_store(target: Target, timeout: float) -> Check:
    location = target.store
    if is_database_url(location):
        return await _check_database(location, timeout)
    if "://" in location:
        # Opening refuses an unknown scheme before it connects anywhere.
        try:
            await (await open_runtime_store(location)).close()
        except UserError as err:
            return failed_check("runtime_store", f"runtime store {location}", str(err))
    path = Path(location)
    return await in_thread(lambda: _probe_sqlite(path, timeout), timeout)


def _probe_sqlite(path: Path, timeout: float) -> Check:
    """Whether the worker can write the SQLite store at `path` (or create it there)."""
    about = Subject(
        name="runtime_store",
        title=f"runtime store {path}",
        details={"location": str(path), "kind": "sqlite"},
    )

    def failed(text: str, fix: str = _STORE_FIX) -> Check:
        return about.outcome("fail", text, fix)

    try:
        if path.exists():
            if not path.is_file():
                return failed("it is a directory, not a SQLite file")
            try:
                _rolled_back_write(path, timeout)
            except (OSError, sqlite3.Error) as err:
                if "not a database" in str(err):
                    return failed(
                        "it is not a dex-agents SQLite store (the file is not an "
                        "SQLite database)",
                        "pass `--store` the runtime store's file, or `--state-dir` "
                        "the directory whose runtime.sqlite it is",
                    )
                return failed(
                    f"cannot write it: {os_reason(err)}",
                    f"fix the permissions of it and of {path.parent} (SQLite writes a "
                    f"journal next to it), or {_STORE_FIX}",
                )
            about.details["exists"] = True
            return about.outcome("pass", "writable (SQLite)")
        existing = path.parent
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            return failed(f"cannot be created: {existing} is a file, not a directory")
        try:
            with tempfile.TemporaryDirectory(
                prefix=".dex-agents-doctor-", dir=existing
            ) as probe:
                _rolled_back_write(Path(probe) / "probe.sqlite", timeout)
        except (OSError, sqlite3.Error) as err:
            return failed(
                f"cannot be created: cannot write {existing}: {os_reason(err)}",
                f"fix the permissions of {existing}, or {_STORE_FIX}",
            )
    except OSError as err:
        return failed(f"cannot be reached: {os_reason(err)}")
    about.details["exists"] = False
    return about.outcome(
        "pass", f"not there yet; the worker creates it ({existing} can be written)"
    )


def _rolled_back_write(path: Path, timeout: float) -> None:
    """Write a table and a row into the SQLite file `path`, read it, and roll it back.

    Raises:
        sqlite3.Error: the file cannot be written (or read back).
    """
    table = f"dex_agents_doctor_{uuid.uuid4().hex[:12]}"
    token = uuid.uuid4().hex
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(f"CREATE TABLE {table} (token TEXT)")
            conn.execute(f"INSERT INTO {table} VALUES (?)", (token,))
            row = conn.execute(f"SELECT token FROM {table}").fetchone()
        finally:
            conn.execute("ROLLBACK")
    finally:
        conn.close()
    if row != (token,):
        raise sqlite3.DatabaseError(f"read back {row!r} instead of what was written")


def os_reason(err: OSError | sqlite3.Error) -> str:
    if isinstance(err, OSError):
        where = f" ({err.filename})" if err.filename else ""
        return f"{err.strerror or err}{where}"
    return str(err)


async def _check_database(dsn: str, timeout: float) -> Check:
    """Open the PostgreSQL store as a worker does, then write a row that never commits."""
    about = Subject(
        name="runtime_store",
        title=f"runtime store {redacted_store(dsn)}",
        details={"location": redacted_store(dsn), "kind": "postgresql"},
    )
    try:
        store = await open_runtime_store(dsn)
    except ImportError:
        return about.outcome(
            "fail",
            "the `postgres` extra is not installed",
            "pip install 'dex-agents[postgres]'",
        )
    except UserError as err:
        return about.failed(str(err))
    try:
        about.title = f"runtime store {store_label(store)}"
    finally:
        await store.close()
    import psycopg

    probe = f"dex-agents-doctor-{uuid.uuid4().hex}"
    try:
        conn = await psycopg.AsyncConnection.connect(
            dsn, connect_timeout=max(1, round(timeout))
        )
        async with conn, conn.transaction(force_rollback=True):
            await conn.execute(
                "INSERT INTO dex_agents_event_cursors (session_id, last_cursor) "
                "VALUES (%s, 0)",
                (probe,),
            )
            cursor = await conn.execute(
                "SELECT session_id FROM dex_agents_event_cursors WHERE session_id = %s",
                (probe,),
            )
            row = await cursor.fetchone()
    except psycopg.Error as err:
        return about.outcome(
            "fail",
            f"cannot write: {one_line(str(err))}",
            "GRANT this role SELECT, INSERT, UPDATE and DELETE on the "
            f"dex_agents_* tables, or {_STORE_FIX}",
        )
    if row is None or row[0] != probe:
        return about.outcome("fail", "a written row did not read back", _STORE_FIX)
    return about.outcome("pass", "writable (PostgreSQL)")
