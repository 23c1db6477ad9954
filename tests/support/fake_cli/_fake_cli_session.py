"""The fake Claude CLI process: start-up, prompt turns, resume, results, shutdown.

Lifecycle, as CLI 2.1.327 runs under the Python SDK:

1. Connect the `--mcp-config` servers and answer the SDK's `initialize`
   (keeping its PreToolUse hook callback IDs).
2. With `--resume=<id>`, load `projects/<key>/<id>.jsonl` from
   `CLAUDE_CONFIG_DIR`; a missing file is an `error_during_execution` result
   and exit 1. If the last `hook_deferred_tool` entry has no tool result, resume
   that call at once, without user input: it runs through PreToolUse again
   with its original input (without hooks when `--await-initialize` is missing or
   `FAKE_CLAUDE_RESUME_WITHOUT_HOOKS=1`, modelling the start-up race of reference
   d9), then an isMeta "Continue from where you left off." entry is appended and
   the model goes on. Its tool must still exist: an SDK server from
   `--mcp-config` with stdin open, an `alwaysLoad` HTTP server, or an enabled
   built-in; otherwise the result is `tool_deferred_unavailable` with exit 1.
3. Every user message from stdin is one turn: `system/init`, the loop, a result.
4. When stdin closes, append `last-prompt` (plus `mode` when resumed) and
   `cost-state`, which CLI 2.1.327 writes only then, after the last result, and
   exit. An error result ends the process at once, with status 1.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import cast

from pydantic import JsonValue

from ._fake_cli_args import CliArgs, JsonObject
from ._fake_cli_frames import Frames, deferred_tool_use, end_fields
from ._fake_cli_mcp import McpServers
from ._fake_cli_tools import AGENT_TOOLS, Caller, ToolResult, Tools, ToolUse
from ._fake_cli_transcript import (
    CONTINUE_TEXT,
    Transcript,
    content_blocks,
    now_iso,
    project_key,
    read_entries,
    text_of,
)
from ._fake_cli_turn import Context, Conversations, Segment, TurnEnd
from ._fake_cli_usage import CLI_VERSION, UsageLedger, resolve_model
from ._fake_cli_wire import Wire

FAKE_CLAUDE_RESUME_WITHOUT_HOOKS_ENV = "FAKE_CLAUDE_RESUME_WITHOUT_HOOKS"
"""`1` makes a resumed deferred call skip PreToolUse, as a late initialize does."""

_DEFAULT_TOOLS = (
    "Task",
    "Bash",
    "Glob",
    "Grep",
    "Read",
    "Edit",
    "Write",
    "NotebookEdit",
    "WebFetch",
    "TodoWrite",
    "WebSearch",
)
_UNAVAILABLE = (
    "{tool} isn't available, so its deferred call didn't run. Reconnect the tool "
    "and resume, or resume with a prompt and CLAUDE_CODE_DROP_UNAVAILABLE_DEFERRED_TOOL=1 "
    "to drop the call and continue."
)


class FakeCliSession:
    """One run of the fake CLI, from argv to exit status."""

    def __init__(self, args: CliArgs, env: Mapping[str, str], cwd: str) -> None:
        self._args = args
        self._env = env
        self._cwd = cwd
        self._model = resolve_model(args.model)
        self._session_id = args.resume or args.session_id or str(uuid.uuid4())
        config = env.get("CLAUDE_CONFIG_DIR") or str(
            Path(env.get("HOME", "~")).expanduser() / ".claude"
        )
        self._project_dir = Path(config) / "projects" / project_key(cwd)
        self._wire = Wire(self._handle_control)
        self._frames = Frames(self._wire, self._session_id)
        self._initialized = asyncio.Event()
        self._mcp = McpServers(self._wire, args.mcp_servers)
        self._builtin = args.tools if args.tools is not None else _DEFAULT_TOOLS
        self._common: JsonObject = {
            "userType": "external",
            "entrypoint": env.get("CLAUDE_CODE_ENTRYPOINT", "cli"),
            "cwd": cwd,
        }
        self._transcript = Transcript(
            path=self._project_dir / f"{self._session_id}.jsonl",
            session_id=self._session_id,
            wire=self._wire,
            mirror=args.session_mirror,
            common=self._common,
        )
        self._usage = UsageLedger()
        self._tools = Tools(
            wire=self._wire,
            args=args,
            mcp=self._mcp,
            cwd=cwd,
            builtin=self._builtin,
            hook_input=self._hook_input,
            run_agent=self._run_subagent,
        )
        self._conversations = Conversations(
            wire=self._wire,
            args=args,
            usage=self._usage,
            session_id=self._session_id,
            tools=self._tools,
            tool_names=self._tool_names,
            subagent_transcript=self._subagent_transcript,
        )
        self._started_ms = int(time.time() * 1000)
        self._ran = False
        self._resumed = False
        self._background: set[asyncio.Task[None]] = set()

    async def run(self) -> int:
        """Serve the SDK until stdin closes; returns the exit status."""
        reader = asyncio.create_task(self._wire.read_loop())
        try:
            return await self._serve()
        except Exception as e:
            # A bug in the fake, or a transcript it cannot read: report it as
            # the CLI reports a crash, so the test sees the cause.
            failure: JsonObject = {
                "subtype": "error_during_execution",
                "is_error": True,
                "errors": [f"fake Claude CLI failed: {e!r}"],
            }
            self._send_result(Segment(), failure)
            return self._finish(1)
        finally:
            reader.cancel()

    async def _serve(self) -> int:
        if self._args.resume and not self._load():
            return 1
        connecting = asyncio.create_task(self._mcp.connect())
        await _first(self._initialized.wait(), self._wire.closed.wait())
        await connecting
        pending = self._transcript.pending_deferral()
        if pending is not None and not await self._resume(pending):
            return self._finish(1)
        while (message := await self._wire.messages.get()) is not None:
            if not await self._prompt_turn(message):
                return self._finish(1)
        return self._finish(0)

    def _load(self) -> bool:
        path = self._transcript.path
        if not path.is_file():
            self._frames.missing_session()
            return False
        self._transcript.load(read_entries(path))
        cost_state = self._transcript.last_of_type("cost-state")
        if cost_state is not None:
            self._usage.restore(cost_state)
        return True

    async def _handle_control(self, subtype: str, request: JsonObject) -> JsonObject:
        match subtype:
            case "initialize":
                return self._initialize(request)
            case "set_permission_mode":
                self._tools.permission_mode = str(request.get("mode"))
            case "set_model":
                self._model = resolve_model(str(request.get("model") or ""))
            case "mcp_status":
                return {"mcpServers": self._mcp.status()}
            case _:
                pass
        return {}

    def _initialize(self, request: JsonObject) -> JsonObject:
        hooks = request.get("hooks")
        matchers = hooks.get("PreToolUse") if isinstance(hooks, dict) else None
        self._tools.hooks = (
            [cast(JsonObject, m) for m in matchers or [] if isinstance(m, dict)]
            if isinstance(matchers, list)
            else []
        )
        declared = request.get("sdkMcpServers")
        names = [str(n) for n in declared] if isinstance(declared, list) else []
        added = self._mcp.add_sdk_servers(names)
        if added:
            # Connected only now, so a resumed call cannot use them (reference
            # README: the TypeScript SDK's servers need --mcp-config too).
            task = asyncio.get_running_loop().create_task(self._mcp.connect(added))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        self._initialized.set()
        return {
            "commands": [],
            "agents": [],
            "output_style": "default",
            "available_output_styles": ["default"],
            "models": [],
            "account": {
                "apiKeySource": self._api_key_source(),
                "apiProvider": "firstParty",
            },
            "pid": os.getpid(),
            "claude_code_version": CLI_VERSION,
            "current_permission_mode": self._tools.permission_mode,
            "hook_on_failure_supported": True,
            "session_state": "idle",
        }

    async def _prompt_turn(self, frame: JsonObject) -> bool:
        message = frame.get("message")
        content: JsonValue = (
            message.get("content", "") if isinstance(message, dict) else ""
        )
        prompt_id = str(uuid.uuid4())
        self._ran = True
        self._frames.state("running")
        self._queue_operations(content if isinstance(content, str) else None)
        self._transcript.append(
            {
                "type": "user",
                "message": {"role": "user", "content": content},
                "promptId": prompt_id,
                "permissionMode": self._tools.permission_mode,
                "promptSource": "sdk",
                "turnOrigin": "sdk",
            }
        )
        self._transcript.flush()
        self._init()
        seg = Segment()
        end = await self._conversations.run(
            self._main(Caller(prompt_id=prompt_id)), seg
        )
        return self._result(seg, end)

    async def _resume(self, deferral: JsonObject) -> bool:
        """Resume the pending deferred call; False when the result is an error."""
        attachment = cast(JsonObject, deferral["attachment"])
        tool_input = attachment.get("toolInput")
        use = ToolUse(
            id=str(attachment.get("toolUseID")),
            name=str(attachment.get("toolName")),
            input=cast(dict[str, JsonValue], tool_input)
            if isinstance(tool_input, dict)
            else {},
        )
        self._ran = self._resumed = True
        seg = Segment()
        # The isMeta continuation is the command CLI 2.1.327 reports in
        # command_lifecycle frames; the one after the result makes the SDK raise
        # a plain ProcessError for an error result (reference d3).
        command = str(uuid.uuid4())
        self._frames.state("running")
        self._frames.lifecycle(command, "started")
        self._queue_operations(CONTINUE_TEXT)
        if not self._available(use.name):
            self._conversations.append_deferral(self._transcript, use)
            unavailable: JsonObject = {
                "subtype": "success",
                "is_error": True,
                "result": _UNAVAILABLE.format(tool=use.name),
                "terminal_reason": "tool_deferred_unavailable",
            }
            self._send_result(seg, unavailable, command=command)
            return False
        hooks = (
            self._args.await_initialize
            and self._env.get(FAKE_CLAUDE_RESUME_WITHOUT_HOOKS_ENV) != "1"
        )
        result = await self._tools.handle(use, Caller(), hooks=hooks)
        if result.deferred:
            # CLI 2.1.327 (reference d11): deferred again, no init, no terminal_reason.
            self._conversations.append_deferral(self._transcript, use)
            again: JsonObject = {
                "subtype": "success",
                "is_error": False,
                "result": "",
                "stop_reason": "tool_deferred",
                "deferred_tool_use": deferred_tool_use(use),
            }
            self._send_result(seg, again, command=command)
            return True
        if result.denied:
            seg.denials.append(
                {"tool_name": use.name, "tool_use_id": use.id, "tool_input": use.input}
            )
        parent = self._transcript.last_message()
        prompt_id = str(uuid.uuid4())
        main = self._main(Caller(prompt_id=prompt_id))
        self._conversations.emit_tool_result(
            self._main(Caller()), use, result, parent=parent
        )
        self._init()
        self._transcript.append(
            {
                "type": "user",
                "message": {"role": "user", "content": CONTINUE_TEXT},
                "isMeta": True,
                "uuid": command,
                "promptId": prompt_id,
                "permissionMode": self._tools.permission_mode,
                "promptSource": "system",
                "turnOrigin": "system",
            }
        )
        self._transcript.flush()
        end = await self._conversations.run(main, seg)
        return self._result(seg, end, command=command)

    def _available(self, tool_name: str) -> bool:
        """Whether a resumed call's tool exists before initialize is applied."""
        if not tool_name.startswith("mcp__"):
            return self._tools.offers(tool_name)
        server = self._mcp.server_of(tool_name)
        if server is None or not server.declared or self._mcp.find(tool_name) is None:
            return False
        if server.kind == "sdk":
            return not self._wire.closed.is_set()
        return server.config.get("alwaysLoad") is True

    def _result(
        self, seg: Segment, end: TurnEnd, *, command: str | None = None
    ) -> bool:
        self._send_result(seg, end_fields(seg, end), command=command)
        return end.kind != "failed"

    def _send_result(
        self, seg: Segment, fields: JsonObject, *, command: str | None = None
    ) -> None:
        self._transcript.flush()
        self._frames.result(seg, fields, self._usage.result_fields(), command=command)

    def _finish(self, status: int) -> int:
        """Write the entries CLI 2.1.327 writes at shutdown, then exit."""
        if not self._ran:
            return status
        prompt = self._last_prompt()
        if prompt is not None:
            self._transcript.append_plain(
                {
                    "type": "last-prompt",
                    "lastPrompt": prompt,
                    "leafUuid": self._transcript.tail,
                }
            )
            self._transcript.flush()
        if self._resumed:
            # CLI 2.1.327 wrote `mode` after a resumed deferred call only.
            self._transcript.append_plain({"type": "mode", "mode": "normal"})
            self._transcript.flush()
        cost_state = self._usage.cost_state(self._session_id, self._started_ms)
        self._transcript.append_plain(cost_state)
        self._transcript.flush()
        return status

    def _last_prompt(self) -> str | None:
        for entry in reversed(self._transcript.entries):
            message = entry.get("message")
            if (
                entry.get("type") != "user"
                or entry.get("isMeta")
                or not isinstance(message, dict)
            ):
                continue
            blocks = content_blocks(message.get("content"))
            if not any(b.get("type") == "tool_result" for b in blocks):
                return text_of(blocks)
        return None

    def _main(self, caller: Caller) -> Context:
        return Context(transcript=self._transcript, caller=caller, model=self._model)

    def _subagent_transcript(self, agent_id: str) -> Transcript:
        path = (
            self._project_dir
            / self._session_id
            / "subagents"
            / f"agent-{agent_id}.jsonl"
        )
        return Transcript(
            path=path,
            session_id=self._session_id,
            wire=self._wire,
            mirror=self._args.session_mirror,
            common=self._common | {"isSidechain": True, "agentId": agent_id},
        )

    async def _run_subagent(
        self, use: ToolUse, tool_input: dict[str, JsonValue], caller: Caller
    ) -> ToolResult:
        return await self._conversations.run_subagent(use, tool_input, caller)

    def _tool_names(self) -> list[str]:
        return [*self._builtin, *self._mcp.tool_names()]

    def _hook_input(self, caller: Caller) -> JsonObject:
        base: JsonObject = {
            "session_id": self._session_id,
            "transcript_path": str(self._transcript.path),
            "cwd": self._cwd,
            "permission_mode": self._tools.permission_mode,
            "effort": {"level": "medium"},
        }
        if caller.prompt_id is not None:
            base["prompt_id"] = caller.prompt_id
        return base

    def _api_key_source(self) -> str:
        return "ANTHROPIC_API_KEY" if self._env.get("ANTHROPIC_API_KEY") else "none"

    def _init(self) -> None:
        builtin = ["Task" if t in AGENT_TOOLS else t for t in self._builtin]
        self._frames.init(
            cwd=self._cwd,
            tools=[*builtin, *self._mcp.tool_names()],
            mcp_servers=self._mcp.status(),
            model=self._model,
            permission_mode=self._tools.permission_mode,
            api_key_source=self._api_key_source(),
        )

    def _queue_operations(self, content: str | None) -> None:
        enqueue: JsonObject = {
            "type": "queue-operation",
            "operation": "enqueue",
            "timestamp": now_iso(),
        }
        if content is not None:
            enqueue["content"] = content
        self._transcript.append_plain(enqueue)
        self._transcript.append_plain(
            {"type": "queue-operation", "operation": "dequeue", "timestamp": now_iso()}
        )
        self._transcript.flush()


async def _first(*waits: Coroutine[object, object, object]) -> None:
    tasks = [asyncio.create_task(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
