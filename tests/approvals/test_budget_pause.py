"""A spend limit that pauses the session and asks for a new one, on the dev server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from support.session_harness import make_config
from temporalio.client import Client

from dex_agents import InvalidArgumentError
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing._ledger_flow import ledger_flow

pytestmark = pytest.mark.timeout(120)


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def sessions(
    client: Client, tmp_path: Path, flow_type: str
) -> AsyncIterator[SessionClient]:
    """A ledger flow whose sessions may spend 0.0015 USD (a scripted segment: 0.001)."""
    flow = ledger_flow(make_config(tmp_path, flow_type, spend_limit=0.0015))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    async with create_worker(client, [flow], store=store):
        yield SessionClient(client, flow, store)
    await store.close()


async def test_a_session_that_reaches_its_limit_waits_and_goes_on_under_a_new_one(
    sessions: SessionClient,
) -> None:
    sid = "budget-pauses-and-goes-on"
    await sessions.start(sid, initial_message="say one")
    await sessions.send_and_wait(sid, "say two")  # 0.002 USD spent now

    snap = await sessions.send_and_wait(sid, "say three")

    assert snap.status == "budget_reached"
    (interrupt,) = snap.pending_interrupts
    assert (interrupt.kind, interrupt.tool_name) == ("budget", "spend_limit")
    assert interrupt.arguments == {"spent_usd": 0.002, "spend_limit_usd": 0.0015}
    with pytest.raises(InvalidArgumentError) as too_low:
        await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True, new_spend_limit=0.001
        )
    assert too_low.value.argument == "new_spend_limit"
    assert "0.0020 USD spent" in str(too_low.value)
    with pytest.raises(InvalidArgumentError):
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
    assert (await sessions.snapshot(sid)).status == "budget_reached"

    assert await sessions.resolve_interrupt(
        sid,
        interrupt.interrupt_id,
        approved=True,
        new_spend_limit=0.01,
        resolved_by="ana",
    )

    snap = await sessions.wait_for_idle(sid)
    assert snap.turns[-1].status == "completed"
    assert snap.turns[-1].final_text == "said: three"
    assert snap.usage.cost_usd == pytest.approx(0.003)
    events = await sessions.events(sid)
    (resolved,) = [e for e in events if e.type == "interrupt_resolved"]
    assert (resolved.data["new_spend_limit"], resolved.data["resolved_by"]) == (
        0.01,
        "ana",
    )
    # The new limit holds for the rest of the session.
    snap = await sessions.send_and_wait(sid, "say four")
    assert snap.turns[-1].final_text == "said: four"


async def test_a_declined_budget_fails_the_turn_and_the_session_waits_again(
    sessions: SessionClient,
) -> None:
    sid = "budget-declined"
    await sessions.start(sid, initial_message="say one")
    await sessions.send_and_wait(sid, "say two")
    (interrupt,) = (await sessions.send_and_wait(sid, "say three")).pending_interrupts

    assert await sessions.resolve_interrupt(
        sid, interrupt.interrupt_id, approved=False, rejection_message="enough"
    )

    snap = await sessions.wait_for_idle(sid)
    assert snap.turns[-1].status == "failed"
    assert "spend limit reached" in (snap.turns[-1].error or "")
    assert "enough" in (snap.turns[-1].error or "")
    # The next message meets the same limit: it asks again.
    snap = await sessions.send_and_wait(sid, "say four")
    assert snap.status == "budget_reached"
