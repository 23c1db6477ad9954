"""A turn whose publish failed (the runtime store was down) reaches the store's history
once the store is back, with no further message: an idle session publishes again.

Before, a publish that failed its three attempts failed the whole session: a
local activity's last failure reaches workflow code as an `ApplicationError`,
which the publish did not catch (it caught `ActivityError` only). And had it
been caught, the turn would have waited in the workflow's state for the next
publish, which an idle session never makes.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporalio.client import Client

from dex_agents.session._json import JsonObject
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing._ledger_flow import ledger_flow
from support.history import settled_history_length
from support.session_harness import ledger_config


class _Outage(SQLiteRuntimeStore):
    """A store whose finished turns cannot be written while `down`."""

    down = False

    async def put_turn(self, session_id: str, number: int, turn: JsonObject) -> None:
        if self.down:
            raise ConnectionError("the runtime store is down (a test outage)")
        await super().put_turn(session_id, number, turn)


async def test_a_turn_whose_publish_failed_is_published_while_the_session_idles(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    store = _Outage(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = f"outage-{uuid.uuid4().hex[:8]}"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid)
        store.down = True
        # The turn completes; its publish fails (three attempts), so the answer
        # comes from the workflow's state, not from the store.
        snapshot = await sessions.send_and_wait(sid, "say hi")
        assert snapshot.turns[-1].final_text == "said: hi"
        assert await store.read_turns(sid, limit=5) == []
        store.down = False
        async with asyncio.timeout(60):
            while not (stored := await store.read_turns(sid, limit=5)):
                await asyncio.sleep(0.2)
        assert [t["final_text"] for t in stored] == ["said: hi"]
        history = [t async for t in sessions.history(sid)]
        assert [t.final_text for t in history] == ["said: hi"]
        # The failed publish did not fail the session (it did, before).
        assert (await sessions.snapshot(sid)).status == "idle"
        # Published, the session waits without timers again: its history settles.
        length = await settled_history_length(client, sid)
        await asyncio.sleep(6)
        assert await settled_history_length(client, sid) == length
    await store.close()
