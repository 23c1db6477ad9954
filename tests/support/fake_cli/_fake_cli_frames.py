"""Frames of the fake Claude CLI that are not model output: init, state, results.

Shapes copied from CLI 2.1.327 under claude-agent-sdk 0.2.184: a `system/init`
per turn; `session_state_changed` frames marked `sdk_host_only`, which the SDK
asks for and reads to decide when to close stdin; `command_lifecycle` around a
resumed segment's continuation; and `result` frames, whose usage fields come
from the `UsageLedger`.
"""

from __future__ import annotations

import uuid
from typing import cast

from pydantic import JsonValue

from ._fake_cli_args import JsonObject
from ._fake_cli_tools import ToolUse
from ._fake_cli_turn import Segment, TurnEnd
from ._fake_cli_usage import CLI_VERSION
from ._fake_cli_wire import Wire


class Frames:
    """Sends one session's system, lifecycle and result frames."""

    def __init__(self, wire: Wire, session_id: str) -> None:
        self._wire = wire
        self._session_id = session_id

    def init(
        self,
        *,
        cwd: str,
        tools: list[str],
        mcp_servers: list[JsonValue],
        model: str,
        permission_mode: str,
        api_key_source: str,
    ) -> None:
        """The `system/init` frame that starts every turn."""
        self._wire.send(
            {
                "type": "system",
                "subtype": "init",
                "cwd": cwd,
                "session_id": self._session_id,
                "tools": cast(JsonValue, tools),
                "mcp_servers": mcp_servers,
                "model": model,
                "permissionMode": permission_mode,
                "slash_commands": [],
                "apiKeySource": api_key_source,
                "claude_code_version": CLI_VERSION,
                "output_style": "default",
                "agents": ["general-purpose"],
                "skills": [],
                "plugins": [],
                "uuid": str(uuid.uuid4()),
            }
        )

    def state(self, state: str) -> None:
        """A `session_state_changed` frame; the SDK keeps stdin open until "idle"."""
        self._wire.send(
            {
                "type": "system",
                "subtype": "session_state_changed",
                "state": state,
                "sdk_host_only": True,
                "uuid": str(uuid.uuid4()),
                "session_id": self._session_id,
            }
        )

    def lifecycle(self, command_uuid: str, state: str) -> None:
        """A `command_lifecycle` frame for the isMeta continuation of a resume."""
        self._wire.send(
            {
                "type": "command_lifecycle",
                "command_uuid": command_uuid,
                "state": state,
                "uuid": str(uuid.uuid4()),
                "session_id": self._session_id,
            }
        )

    def result(
        self,
        seg: Segment,
        fields: JsonObject,
        usage: JsonObject,
        *,
        command: str | None = None,
    ) -> None:
        """A `result` frame, then the frames CLI 2.1.327 sends after it.

        With `command`, a `command_lifecycle` "completed" follows the result;
        after an error result that makes the SDK raise a plain `ProcessError`
        instead of a `ResultError` (reference d3).
        """
        frame: JsonObject = {
            "type": "result",
            "duration_ms": 1,
            "duration_api_ms": 1,
            "num_turns": seg.num_turns,
            "stop_reason": seg.stop_reason,
            "session_id": self._session_id,
            "permission_denials": seg.denials,
            "api_error_status": None,
            "uuid": str(uuid.uuid4()),
            **usage,
            **fields,
        }
        self._wire.send(frame)
        if command is not None:
            self.lifecycle(command, "completed")
        self.state("idle")

    def missing_session(self) -> None:
        """The result of `--resume` with no transcript; CLI 2.1.327 sends only it."""
        self._wire.send(
            {
                "type": "result",
                "subtype": "error_during_execution",
                "duration_ms": 0,
                "duration_api_ms": 0,
                "is_error": True,
                "num_turns": 0,
                "stop_reason": None,
                "session_id": self._session_id,
                "total_cost_usd": 0,
                "modelUsage": {},
                "permission_denials": [],
                "uuid": str(uuid.uuid4()),
                "errors": [
                    f"No conversation found with session ID: {self._session_id}"
                ],
            }
        )


def end_fields(seg: Segment, end: TurnEnd) -> JsonObject:
    """The result fields that say how a turn ended."""
    match end.kind:
        case "answered":
            return {
                "subtype": "success",
                "is_error": False,
                "result": end.text,
                "terminal_reason": "completed",
            }
        case "deferred":
            return {
                "subtype": "success",
                "is_error": False,
                "result": "",
                "stop_reason": "tool_deferred",
                "terminal_reason": "tool_deferred",
                "deferred_tool_use": deferred_tool_use(seg.deferred[-1]),
            }
        case "failed":
            return {
                "subtype": "error_during_execution",
                "is_error": True,
                "stop_reason": None,
                "errors": [end.text],
            }


def deferred_tool_use(use: ToolUse) -> JsonObject:
    """A result's `deferred_tool_use`: the model's call, original input."""
    return {"id": use.id, "name": use.name, "input": use.input}
