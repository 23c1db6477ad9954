"""A runtime store that is locked or down is one line naming it, not "please report it"."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dex_agents.stores import SQLiteRuntimeStore
from support.cli_harness import assert_one_line_error, invoke

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


async def test_events_of_a_locked_store_say_which_store_and_to_try_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runtime.sqlite"
    await (await SQLiteRuntimeStore.open(path)).close()
    holder = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    try:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")  # another process's long write
        result = await invoke("events", "s1", "--store", str(path))
    finally:
        holder.close()
    assert_one_line_error(
        result,
        f"the runtime store {str(path)!r} is unavailable: database is locked",
        "then try again",
    )
    assert "unexpected" not in result.stderr
    assert "please report it" not in result.stderr
