"""The flow every worker of the topology test serves: the ledger tools, and images read from S3.

Worker processes load it by reference (`topology_flow.py:make_flow`) and take
their settings from the environment: `TOPOLOGY_LEDGER`, `TOPOLOGY_GATES`,
`TOPOLOGY_S3_ENDPOINT` and `TOPOLOGY_BUCKET` (with the usual `AWS_*` variables).
Whatever stops at a gate first writes `<gate>.pid`, so the test knows which
worker process to SIGKILL.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from dex_agents.s3 import S3MediaStore
from dex_agents.session import (
    AgentSessionOptions,
    RunModelContext,
    ToolCallsRequested,
    TurnCompleted,
)
from dex_agents.session._json import JsonObject
from dex_agents.session._media import ImageReference
from dex_agents.session._records import DeferredToolExecution
from dex_agents.temporal import create_agent_session_flow
from dex_agents.temporal._flow import AgentSessionFlow
from dex_agents.testing import Ledger, ScriptedRunner
from dex_agents.testing._ledger_flow import (
    LEDGER_INPUT_SCHEMAS,
    LEDGER_TOOL_POLICIES,
    ledger_tools,
)
from dex_agents.testing._scripted_runner import ToolHandler

FLOW_TYPE = "TopologySession"


def _pid_at(
    gate_dir: Path, args: JsonObject, execution: DeferredToolExecution | None
) -> None:
    gate = args.get("gate")
    if isinstance(gate, str) and (execution is None or execution.attempt == 1):
        (gate_dir / f"{gate}.pid").write_text(str(os.getpid()))


def _with_pid(
    name: str, inner: ToolHandler, gate_dir: Path, ledger: Ledger
) -> ToolHandler:
    async def handler(args: JsonObject, execution: DeferredToolExecution | None) -> str:
        ledger.record("tool_ran", tool=name, pid=os.getpid())
        _pid_at(gate_dir, args, execution)
        return await inner(args, execution)

    return handler


class TopologyRunner(ScriptedRunner):
    """The ledger runner, plus: a prompt with images answers each image's digest.

    The digest is of the bytes this worker read back from the S3 media store,
    so an answer proves the image a client uploaded reached the worker whole.
    """

    def __init__(
        self, tools: dict[str, ToolHandler], gate_dir: Path, media: S3MediaStore
    ) -> None:
        super().__init__(tools, input_schemas=LEDGER_INPUT_SCHEMAS, gate_dir=gate_dir)
        self.media = media

    def build_user_message_with_images(
        self, text: str, images: Sequence[ImageReference]
    ) -> JsonObject:
        return {
            **self.build_user_message(text),
            "images": [i.to_wire() for i in images],
        }

    async def run_model(
        self, context: RunModelContext
    ) -> TurnCompleted | ToolCallsRequested:
        for item in context.pending:
            images = item.get("images")
            if (
                item.get("kind") == "user_prompt"
                and isinstance(images, list)
                and images
            ):
                digests = [
                    hashlib.sha256(
                        await self.media.get_image(ImageReference.from_wire(wire))
                    ).hexdigest()
                    for wire in images
                    if isinstance(wire, dict)
                ]
                return self._answer(context, "images: " + " ".join(digests), [])
        return await super().run_model(context)

    async def _pause(self, suffix: str) -> None:
        words = suffix.split()
        if len(words) == 2 and words[0] == "pause" and self.gate_dir is not None:
            (self.gate_dir / f"{words[1]}.pid").write_text(str(os.getpid()))
        await super()._pause(suffix)


def make_flow() -> AgentSessionFlow:
    """The topology flow, configured from the environment."""
    gate_dir = Path(os.environ["TOPOLOGY_GATES"])
    media = S3MediaStore(
        os.environ["TOPOLOGY_BUCKET"], endpoint_url=os.environ["TOPOLOGY_S3_ENDPOINT"]
    )
    ledger = Ledger(os.environ["TOPOLOGY_LEDGER"])
    tools = {
        name: _with_pid(name, handler, gate_dir, ledger)
        for name, handler in ledger_tools(ledger, gate_dir).items()
    }
    return create_agent_session_flow(
        TopologyRunner(tools, gate_dir, media),
        FLOW_TYPE,
        AgentSessionOptions(
            tool_policies=LEDGER_TOOL_POLICIES,
            heartbeat_timeout=timedelta(seconds=2),
            retry_interval=timedelta(seconds=0.2),
        ),
    )
