"""`SessionPlugin` on a user's own Client and Worker: sandboxed, several flows, once."""

from __future__ import annotations

import asyncio
import gc
import inspect
import sys
import types
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RawValue
from temporalio.worker import Worker

from dex_agents import UserError
from dex_agents.session._lingering import linger
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import (
    SessionClient,
    SessionPlugin,
    _workflow,
    create_agent_session_flow,
    create_worker,
)
from dex_agents.temporal._plugin import (
    _WORKER_THROTTLE,  # pyright: ignore[reportPrivateUsage]
    HEARTBEAT_THROTTLE,
    session_plugin,
)
from dex_agents.testing import Ledger, ScriptedRunner
from dex_agents.testing._ledger_flow import ledger_flow
from support.session_harness import ledger_config


@activity.defn(name="plugin_test_shout")
async def shout(text: str) -> str:
    return text.upper()


@workflow.defn(name="PluginTestUserWorkflow")
class UserWorkflow:
    """A user's own workflow on the same worker: the plugin must leave it alone."""

    @workflow.run
    async def run(self, text: str) -> str:
        return await workflow.execute_activity(
            shout, text, start_to_close_timeout=timedelta(seconds=10)
        )


async def _own_client(client: Client, plugin: SessionPlugin) -> Client:
    """A client of the user's own, connected with the plugin (and no converter)."""
    config = client.service_client.config
    return await Client.connect(
        config.target_host, namespace=client.namespace, plugins=[plugin]
    )


async def test_an_own_client_and_worker_serve_two_flows_sandboxed_beside_own_workflows(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config = ledger_config(tmp_path, flow_type)
    support = ledger_flow(config)
    other = create_agent_session_flow(
        ScriptedRunner(), f"{flow_type}.other", task_queue=support.task_queue
    )
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    plugin = SessionPlugin([support, other], store=store)
    own = await _own_client(client, plugin)
    assert session_plugin(own) is plugin
    user_id = f"plugin-user-{uuid.uuid4().hex[:6]}"
    # Also on the client: temporalio warns, and the plugin applies once.
    with pytest.warns(UserWarning, match="same plugin type .*SessionPlugin"):
        worker = Worker(
            own,
            task_queue=support.task_queue,
            workflows=[UserWorkflow],
            activities=[shout],
            plugins=[plugin],
        )
    async with worker:
        sessions = SessionClient(own, support, store)
        await sessions.start(
            "plugin-support", initial_message='call create_refund {"orderId": "3"}'
        )
        waiting = await sessions.wait_for_idle("plugin-support")
        (interrupt,) = waiting.pending_interrupts
        await sessions.resolve_interrupt(
            "plugin-support", interrupt.interrupt_id, approved=True
        )
        done = await sessions.wait_for_idle("plugin-support")
        others = SessionClient(own, other, store)
        await others.start("plugin-other", initial_message="say from the other flow")
        answered = await others.wait_for_idle("plugin-other")
        info = await own.get_workflow_handle("plugin-support").query(
            "engine_info", result_type=RawValue
        )
        shouted = await own.execute_workflow(
            UserWorkflow.run, "hi", id=user_id, task_queue=support.task_queue
        )
    await store.close()
    assert done.turns[-1].final_text == "done: create_refund=refunded order 3"
    assert Ledger(config.ledger_path).count("create_refund") == 1
    assert answered.turns[-1].final_text == "said: from the other flow"
    assert shouted == "HI"
    # The session's workflow code ran in Temporal's sandbox.
    assert b'"sandboxed":true' in info.payload.data


async def test_each_sandboxed_session_runs_the_one_compiled_workflow_module(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    """The sandbox imports the workflow module for each workflow instance: each
    copy has its own globals, and all run the code compiled once (none per session)."""
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    async with create_worker(client, [flow], store=store):
        for sid in ("shared-code-1", "shared-code-2"):
            await sessions.start(sid, initial_message="say hi")
            answered = await sessions.wait_for_idle(sid)
            assert answered.turns[-1].final_text == "said: hi"
        host = sys.modules[_workflow.__name__].__dict__
        # `type`, not `isinstance`: that would read a sandbox proxy's `__class__`.
        copies = [
            f
            for f in gc.get_objects()
            if type(f) is types.FunctionType
            and f.__qualname__ == "_build"
            and f.__module__ == _workflow.__name__
            and f.__globals__ is not host
        ]
    await store.close()
    assert len(copies) >= 2, "one sandboxed copy of the module per session"
    assert len({id(f.__globals__) for f in copies}) == len(copies)
    assert len({id(f.__code__) for f in copies}) == 1


async def test_a_long_message_through_an_own_client_uses_the_plugin_s_store(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    """A `SessionClient` without a store finds the store on the client's plugin."""
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    plugin = SessionPlugin([flow], store=store)
    own = await _own_client(client, plugin)
    sessions = SessionClient(own, flow)
    text = "digest " + "x" * 100_000
    async with Worker(own, task_queue=flow.task_queue):
        await sessions.start("plugin-long")
        assert await sessions.send_user_message("plugin-long", text)
        snap = await sessions.wait_for_idle("plugin-long")
    await store.close()
    assert snap.turns[-1].final_text.startswith(f"digest: {len(text)} chars")


async def test_a_worker_plugin_without_the_session_converter_says_how_to_fix_it(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    config = client.service_client.config
    plain = await Client.connect(config.target_host, namespace=client.namespace)
    with pytest.raises(UserError) as refused:
        Worker(
            plain,
            task_queue=flow.task_queue,
            plugins=[SessionPlugin([flow], store=store)],
        )
    await store.close()
    assert "Client.connect(plugins=[...])" in str(refused.value)


def test_a_plugin_with_flows_needs_a_store(tmp_path: Path, flow_type: str) -> None:
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    with pytest.raises(UserError, match="needs `store=`"):
        SessionPlugin([flow])
    with pytest.raises(UserError, match="served once"):
        SessionPlugin([flow, flow], store=SQLiteRuntimeStore(tmp_path / "s.sqlite"))


async def test_flows_on_two_queues_are_refused_with_the_fix(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    """The advice names both queues and never sends sessions where no worker listens."""
    one = create_agent_session_flow(ScriptedRunner(), f"{flow_type}.one")
    two = create_agent_session_flow(ScriptedRunner(), f"{flow_type}.two")
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    with pytest.raises(UserError) as refused:
        create_worker(client, [one, two], store=store)
    message = str(refused.value)
    assert repr(one.task_queue) in message and repr(two.task_queue) in message
    assert "run one worker per queue" in message
    assert "starts a flow's sessions on the flow's" in message
    await store.close()


async def test_a_stopped_worker_waits_for_what_its_segments_left_running(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    # A Claude segment returns at the CLI's result and leaves the CLI exiting
    # (`linger`); a program that stops its worker right after its last turn
    # must not end with that exit still running (its subprocess transport would
    # outlive the event loop: "Event loop is closed" at exit).
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    exited = asyncio.Event()

    async def exiting() -> None:
        await asyncio.sleep(0.5)  # a CLI's exit, still under way at the stop
        exited.set()

    async with create_worker(client, [flow], store=store):
        linger(asyncio.create_task(exiting()))
    assert exited.is_set()
    await store.close()


async def test_session_workers_send_heartbeats_each_second_unless_told_otherwise(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    """A cancel reaches a Step at its next heartbeat: within about a second.

    `Worker` fills `max_heartbeat_throttle_interval` with its default of 60 s,
    so the plugin's `setdefault` never applied: heartbeats went every 8 s (80%
    of the heartbeat timeout) and a `cancel_turn` took up to 8 s to land.
    """
    default = inspect.signature(Worker.__init__).parameters[
        "max_heartbeat_throttle_interval"
    ]
    assert default.default == _WORKER_THROTTLE  # the value the plugin replaces
    # A queue each: Temporal refuses two workers of one queue on one client.
    flows = [ledger_flow(ledger_config(tmp_path, f"{flow_type}{n}")) for n in "abc"]
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    own = await _own_client(client, SessionPlugin(flows, store=store))

    def throttle(worker: Worker) -> object:
        return worker.config(active_config=True).get("max_heartbeat_throttle_interval")

    made = create_worker(client, [flows[0]], store=store)
    assert throttle(made) == HEARTBEAT_THROTTLE
    assert throttle(Worker(own, task_queue=flows[1].task_queue)) == HEARTBEAT_THROTTLE
    own_choice = Worker(
        own,
        task_queue=flows[2].task_queue,
        max_heartbeat_throttle_interval=timedelta(seconds=5),
    )
    assert throttle(own_choice) == timedelta(seconds=5)
    await store.close()
