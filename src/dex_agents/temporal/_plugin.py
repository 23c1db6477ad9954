"""`SessionPlugin`: dex-agents as one Temporal plugin for your own Client and Worker.

Like `temporalio.contrib.openai_agents.OpenAIAgentsPlugin` and pydantic-ai's
`PydanticAIPlugin`, it is a `temporalio.plugin.SimplePlugin`:

- on the client (`Client.connect(..., plugins=[plugin])`): the session data
  converter, and the runtime store the session RPCs use for long messages and
  paged snapshots;
- on every worker of that client whose task queue serves its flows: their
  workflows and activities, and the sandbox settings they need (dex-agents'
  own modules pass through, except the workflow module, which is sandboxed);
- on a `Replayer`: the converter and the workflows.

A worker of the same client on another task queue is left alone, and a
plugin given both to the client and to the worker applies once.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

from temporalio.client import Client
from temporalio.converter import DataConverter, DefaultPayloadConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import ReplayerConfig, Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from .._errors import UserError, must_be
from ..session._lingering import settle
from ..session._runner import resume_parker
from ..stores import RuntimeStore
from ._activities import build_activities
from ._converter import SharedPydanticPayloadConverter
from ._flow import AgentSessionFlow
from ._parking import ParkingLot
from ._shared_code import share_compiled_code

_SANDBOXED_MODULE = "dex_agents.temporal._workflow"

HEARTBEAT_THROTTLE = timedelta(seconds=1)
"""The longest a Step's heartbeats are held back: how soon a cancel reaches it."""
_WORKER_THROTTLE = timedelta(seconds=60)
"""`Worker`'s own default, which it puts in a config no one set it in (a test
pins it to temporalio's)."""
LINGER_SECONDS = 12.0
"""Seconds a stopped worker waits for the CLIs its segments left exiting (each
is killed 10 s after its segment returned)."""


def passthrough_modules() -> tuple[str, ...]:
    """Every dex-agents module but the workflow module, plus pydantic.

    Listed one by one: a passthrough name also covers its submodules, so
    passing `dex_agents` whole would take the workflow module out of the
    sandbox. Passed through, the payload classes are the process's own (one
    converter cache entry each, not one per workflow run) and the flow
    registry is the one the host filled.
    """
    root = Path(__file__).resolve().parent.parent
    names: list[str] = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            continue  # packages: their names would cover the workflow module
        name = ".".join(parts)
        if name != _SANDBOXED_MODULE:
            names.append(name)
    return (*names, "pydantic", "pydantic_core", "annotated_types")


def _data_converter(existing: DataConverter | None) -> DataConverter:
    """The session converter, keeping the rest of a converter the user set."""
    base = existing or DataConverter.default
    payload = base.payload_converter_class
    if payload is DefaultPayloadConverter:
        return dataclasses.replace(
            base, payload_converter_class=SharedPydanticPayloadConverter
        )
    if issubclass(payload, SharedPydanticPayloadConverter):
        return base
    raise UserError(
        f"the client's payload converter is {payload.__name__}; dex-agents sessions "
        "need the session data converter's (pydantic JSON): leave "
        "`data_converter` unset, or subclass SharedPydanticPayloadConverter"
    )


def _with_passthrough(
    modules: Sequence[str],
) -> Callable[[WorkflowRunner | None], WorkflowRunner]:
    def workflow_runner(runner: WorkflowRunner | None) -> WorkflowRunner:
        if runner is None:
            runner = SandboxedWorkflowRunner()
        if isinstance(runner, SandboxedWorkflowRunner):
            # Each instance imports the workflow module again: from one compiled copy.
            share_compiled_code(_SANDBOXED_MODULE)
            # The user's restrictions stay; ours are added.
            return dataclasses.replace(
                runner,
                restrictions=runner.restrictions.with_passthrough_modules(*modules),
            )
        return runner  # an unsandboxed runner the user chose

    return workflow_runner


def check_flows(flows: object, *, where: str) -> list[AgentSessionFlow]:
    """`flows` as a list, refused unless it is a sequence of `AgentSessionFlow`s.

    `where` names the call for the fix (`SessionPlugin`, `create_worker`). One
    flow passed bare failed later with "not iterable" or "not subscriptable".

    Raises:
        InvalidArgumentError: what `flows` is instead, and what to pass.
    """
    what = "a list of `AgentSessionFlow`s"
    if isinstance(flows, AgentSessionFlow):
        raise must_be(
            "flows", what, flows, f"wrap the one flow in a list: `{where}([flow], ...)`"
        )
    if not isinstance(flows, Sequence) or isinstance(flows, str | bytes):
        raise must_be(
            "flows",
            what,
            flows,
            "pass the flow objects themselves in a list (what "
            "`create_claude_agent_session_flow` returns)",
        )
    for index, flow in enumerate(cast("Sequence[object]", flows)):
        if not isinstance(flow, AgentSessionFlow):
            raise must_be(
                "flows",
                "an `AgentSessionFlow`",
                flow,
                "pass the flow object itself (what `create_claude_agent_session_flow` "
                "returns), not its name",
                named=f"`flows[{index}]`",
            )
    return list(cast("Sequence[AgentSessionFlow]", flows))


def check_store(store: object) -> None:
    """Refuse a `store=` that is not a runtime store (or None).

    A location (a path, a URL) was accepted, then failed in the first Step.

    Raises:
        InvalidArgumentError: what `store` is instead, and how to open one.
    """
    if store is None:
        return
    what = "a runtime store (`SQLiteRuntimeStore`, `PostgresRuntimeStore`) or None"
    if isinstance(store, str | os.PathLike):
        raise must_be(
            "store",
            what,
            cast(object, store),
            "open the store it names first: `store = await "
            "open_runtime_store(location)` (dex_agents.stores), then pass `store=store`",
        )
    if not all(
        callable(getattr(store, method, None))
        for method in ("get_snapshot", "append_events", "read_events")
    ):
        raise must_be("store", what, store)


class SessionPlugin(SimplePlugin):
    """dex-agents sessions on your own Temporal `Client`, `Worker` and `Replayer`."""

    def __init__(
        self,
        flows: Sequence[AgentSessionFlow] = (),
        *,
        store: RuntimeStore | None = None,
        task_queue: str | None = None,
    ) -> None:
        """A plugin serving `flows` with the runtime store `store`.

        Args:
            flows: The session flows its workers serve; none for a client that
                only talks to sessions.
            store: The runtime store of the sessions (transcripts, events, long
                messages). A worker needs it; a client uses it for long
                messages and snapshots.
            task_queue: The queue whose workers serve `flows` (default: each
                flow's own `task_queue`).

        Raises:
            InvalidArgumentError: `flows` is not a list of flows, or `store`
                not a runtime store (a path or URL: open it first).
            UserError: flows without a store, or two flows of one type.
        """
        flows = check_flows(flows, where="SessionPlugin")
        check_store(store)
        types = [f.flow_type for f in flows]
        if len(set(types)) != len(types):
            raise UserError(f"each flow type may be served once, got {types}")
        if flows and store is None:
            raise UserError(
                "a SessionPlugin with flows needs `store=` (the runtime store its "
                "activities write transcripts and events to)"
            )
        self.flows = list(flows)
        self.store = store
        self.task_queue = task_queue
        self._parking: list[_Parking] = []
        # temporalio types `activities` as a bare `Sequence[Callable]` (here and in
        # WorkerConfig), so pyright sees these signatures as partially unknown.
        super().__init__(  # pyright: ignore[reportUnknownMemberType]
            "dex_agents.SessionPlugin",
            data_converter=_data_converter,
            workflow_runner=_with_passthrough(passthrough_modules()),
        )

    def _served_on(self, queue: str) -> list[AgentSessionFlow]:
        return [f for f in self.flows if (self.task_queue or f.task_queue) == queue]

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """Add the flows served on this worker's queue, once."""
        # WorkerConfig's methods are partially unknown: temporalio types its
        # `activities` as a bare `Sequence[Callable]`.
        config = super().configure_worker(config)
        flows = self._served_on(str(config.get("task_queue", "")))  # pyright: ignore[reportUnknownMemberType]
        known = {_workflow_name(w) for w in config.get("workflows", ())}  # pyright: ignore[reportUnknownMemberType]
        flows = [f for f in flows if f.flow_type not in known]
        if not flows:
            return config
        client = config.get("client")  # pyright: ignore[reportUnknownMemberType]
        if client is not None:
            payload = client.data_converter.payload_converter_class
            if not issubclass(payload, SharedPydanticPayloadConverter):
                raise UserError(
                    "this worker's client does not use the session data converter: "
                    "pass SessionPlugin to `Client.connect(plugins=[...])` (it then "
                    "reaches the client's workers)"
                )
        assert self.store is not None  # checked in __init__
        queue = str(config.get("task_queue", ""))  # pyright: ignore[reportUnknownMemberType]
        parked_queue = f"{queue}.parked.{uuid.uuid4().hex[:12]}"
        lots = {
            f.flow_type: ParkingLot(
                flow_type=f.flow_type,
                queue=parked_queue,
                limit=f.options.max_parked_segments,
                window=f.options.hot_resume_window.total_seconds(),
            )
            for f in flows
            if resume_parker(f.runner) is not None
        }
        lots = {k: lot for k, lot in lots.items() if lot.enabled}
        # A cancelled Step (`cancel_turn`) learns of it from a heartbeat's answer:
        # sent at most each second, a Stop lands within about a second, not the
        # SDK's default of 80% of the heartbeat timeout (8 s). `Worker` fills
        # every key with its default, so a default value is replaced; a worker's
        # own other setting wins.
        throttle = config.get("max_heartbeat_throttle_interval")  # pyright: ignore[reportUnknownMemberType]
        if throttle is None or throttle == _WORKER_THROTTLE:
            config["max_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
        config["workflows"] = [
            *config.get("workflows", ()),  # pyright: ignore[reportUnknownMemberType]
            *(f.workflow_class for f in flows),
        ]
        built = {
            f.flow_type: build_activities(
                f.flow_type, f.runner, f.options, self.store, lots.get(f.flow_type)
            )
            for f in flows
        }
        config["activities"] = [
            *config.get("activities", ()),  # pyright: ignore[reportUnknownMemberType]
            *(a for activities in built.values() for a in activities),
        ]
        if lots:
            # The worker's own queue serves the resumed segments it holds parked.
            hot = [
                a
                for t in lots
                for a in built[t]
                if a.__name__ in ("run_model", "release_park", "prime_park")
            ]
            self._parking.append(_Parking(queue, list(lots.values()), hot))
        return config

    async def run_worker(
        self, worker: Worker, next: Callable[[Worker], Awaitable[None]]
    ) -> None:
        """Run `worker`, with the worker of its parked segments' queue beside it.

        Once it stops, it waits for the CLIs its segments left exiting (each
        bounded, then killed), so none outlives it.
        """
        try:
            await self._run_worker(worker, next)
        finally:
            await settle(LINGER_SECONDS)

    async def _run_worker(
        self, worker: Worker, next: Callable[[Worker], Awaitable[None]]
    ) -> None:
        queue = worker.task_queue
        parking = next_parking(self._parking, queue)
        if parking is None:
            await super().run_worker(worker, next)
            return
        lots = parking.lots
        hot = Worker(
            worker.client,
            task_queue=lots[0].queue,
            activities=parking.activities,
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            graceful_shutdown_timeout=timedelta(seconds=5),
        )
        try:
            async with hot:
                await super().run_worker(worker, next)
        finally:
            for lot in lots:
                await lot.close_all()

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        """Add the flows' workflows to a `Replayer`."""
        config = super().configure_replayer(config)
        known = list(config.get("workflows", ()))
        config["workflows"] = [
            *known,
            *(f.workflow_class for f in self.flows if f.workflow_class not in known),
        ]
        return config


@dataclasses.dataclass(frozen=True, slots=True)
class _Parking:
    """The parking lots of one configured worker and its parked-queue activities."""

    home_queue: str
    lots: list[ParkingLot]
    activities: list[Callable[..., Any]]


def next_parking(parkings: list[_Parking], queue: str) -> _Parking | None:
    """Take the first parking configured for a worker on `queue`."""
    for index, parking in enumerate(parkings):
        if parking.home_queue == queue:
            return parkings.pop(index)
    return None


def _workflow_name(cls: object) -> str | None:
    defn = getattr(cls, "__temporal_workflow_definition", None)
    name = getattr(defn, "name", None)
    return name if isinstance(name, str) else None


def session_plugin(client: Client) -> SessionPlugin | None:
    """The `SessionPlugin` `client` was connected with, if any."""
    plugins: Sequence[Any] = client.config().get("plugins", ())
    return next((p for p in plugins if isinstance(p, SessionPlugin)), None)


def plugin_store(client: Client) -> RuntimeStore | None:
    """The runtime store of `client`'s `SessionPlugin`, if it has one."""
    plugin = session_plugin(client)
    return plugin.store if plugin is not None else None


def with_session_plugin(plugins: Sequence[Any] | None) -> list[Any]:
    """`plugins` with a `SessionPlugin` (converter only) unless one is there."""
    plugins = list(plugins or ())
    if not any(isinstance(p, SessionPlugin) for p in plugins):
        plugins.append(SessionPlugin())
    return plugins
