"""The Claude agent every fake-CLI suite runs, with its side effects in a ledger.

A worker subprocess rebuilds the same agent from `DEX_FAKE_SUITE_CONFIG` (see
`flow_from_env`, the `flow_ref` of `WorkerProcess`), so this module imports
nothing from the tests but the fake CLI (`support.fake_cli`, which the rig puts
on the worker's `PYTHONPATH`): a SIGKILLed worker and its replacement count into
the same JSON-lines `Ledger`, and the test reads it to prove what ran how often.

The tools:

- `lookup_order` is a read (its `readOnlyHint`), so it runs inside the segment;
  order `"unreachable"` raises;
- `create_refund` is a non-idempotent write: it waits for approval and runs once
  in its own Step. With `"gate"` in its input it stops there after it started,
  so a test can SIGKILL the worker mid-write; order `"invalid"` returns an MCP
  error result, and order `"expired"` raises `ToolExecutionError`;
- `send_email` is an idempotent write, retried under one idempotency key; its
  first `fail_attempts` attempts raise.

Bash has no policy: every call waits for approval and runs in the resumed
segment. Application PreToolUse hooks are switched on by name in `hooks`.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookCallback,
    HookMatcher,
    ToolAnnotations,
    tool,
)

from dex_agents import (
    AgentSessionOptions,
    ToolExecutionError,
    ToolPolicy,
    current_deferred_tool_execution,
)
from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    create_claude_agent_session_flow,
)
from dex_agents.temporal._flow import AgentSessionFlow
from dex_agents.testing import Ledger
from support.fake_cli import (
    FAKE_CLAUDE_GATE_DIR_ENV,
    FAKE_CLAUDE_RESUME_WITHOUT_HOOKS_ENV,
    fake_claude_cli_path,
)

CONFIG_ENV = "DEX_FAKE_SUITE_CONFIG"
"""The JSON `SuiteConfig` a worker subprocess builds its flow from."""
DENY_MARKER = "deny-refunds"
"""A file in the session's cwd that makes the `deny_marked_refunds` hook deny."""
BASH_LOG = "bash.log"
"""Where the suites' Bash commands append, in the session's cwd."""


@dataclass(frozen=True, kw_only=True)
class SuiteConfig:
    """Everything that decides the agent; JSON, so a worker process can rebuild it."""

    flow_type: str
    ledger_path: str
    gate_dir: str
    workdir: str
    hooks: tuple[str, ...] = ()
    """Names of application PreToolUse hooks to install, see `APP_HOOKS`."""
    resume_without_hooks: bool = False
    """Make the fake CLI resume a deferred call without PreToolUse hooks."""
    run_model_attempts: int = 2
    heartbeat_seconds: float = 2.0
    extra_env: dict[str, str] = field(default_factory=lambda: {})

    def to_json(self) -> str:
        """The config as `CONFIG_ENV` carries it."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> SuiteConfig:
        """Parse what `to_json` wrote."""
        raw = json.loads(text)
        raw["hooks"] = tuple(raw["hooks"])
        return cls(**raw)


def _ledger(config: SuiteConfig) -> Ledger:
    return Ledger(config.ledger_path)


def build_tools(config: SuiteConfig) -> list[Any]:
    """The custom tools, each side effect a ledger row."""
    ledger = _ledger(config)
    gate_dir = Path(config.gate_dir)

    @tool(
        "lookup_order",
        "Look up an order",
        {"orderId": str},
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def lookup_order(args: dict[str, Any]) -> dict[str, Any]:
        ledger.record("lookup_order", order_id=args["orderId"])
        if args["orderId"] == "unreachable":
            raise ConnectionError("the order service is unreachable")
        return _text(f"order {args['orderId']}: arrived broken")

    @tool("create_refund", "Refund an order", {"orderId": str})
    async def create_refund(args: dict[str, Any]) -> dict[str, Any]:
        execution = current_deferred_tool_execution()
        key = None if execution is None else execution.idempotency_key
        ledger.record("create_refund_started", order_id=args["orderId"], key=key)
        gate = args.get("gate")
        if isinstance(gate, str):
            # Stop mid-write so the test can SIGKILL the worker here.
            gate_dir.mkdir(parents=True, exist_ok=True)
            (gate_dir / f"{gate}.reached").touch()
            while not (gate_dir / gate).exists():
                await asyncio.sleep(0.02)
        if args["orderId"] == "invalid":
            return {**_text("order invalid cannot be refunded"), "is_error": True}
        if args["orderId"] == "expired":
            raise ToolExecutionError("card expired: order expired cannot be refunded")
        ledger.record("create_refund", order_id=args["orderId"], key=key)
        return _text(f"refunded order {args['orderId']}")

    @tool(
        "send_email",
        "Send an email",
        {
            "type": "object",
            "properties": {
                "to": {"type": "string"},
                "fail_attempts": {"type": "integer"},
            },
            "required": ["to"],
        },
    )
    async def send_email(args: dict[str, Any]) -> dict[str, Any]:
        execution = current_deferred_tool_execution()
        attempt = 0 if execution is None else execution.attempt
        key = None if execution is None else execution.idempotency_key
        ledger.record("send_email_attempt", attempt=attempt, key=key)
        if attempt <= int(args.get("fail_attempts", 0)):
            raise ConnectionError(f"mail server unavailable (attempt {attempt})")
        ledger.record("send_email", to=args["to"], key=key)
        return _text(f"sent to {args['to']}")

    return [lookup_order, create_refund, send_email]


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _hook_output(
    *, updated_input: dict[str, Any] | None = None, deny: str | None = None
) -> dict[str, Any]:
    specific: dict[str, Any] = {"hookEventName": "PreToolUse"}
    if updated_input is not None:
        specific["updatedInput"] = updated_input
    if deny is not None:
        specific["permissionDecision"] = "deny"
        specific["permissionDecisionReason"] = deny
    return {"hookSpecificOutput": specific}


def app_hooks(config: SuiteConfig) -> dict[str, tuple[str, HookCallback]]:
    """Application PreToolUse hooks by name: (matcher, callback).

    Every hook counts its calls as `app_hook` rows, so a test proves which
    calls the application's hooks saw.
    """
    ledger = _ledger(config)

    def seen(name: str, hook_input: Any, tool_use_id: str | None) -> None:
        ledger.record(
            "app_hook",
            hook=name,
            tool=hook_input["tool_name"],
            tool_use_id=tool_use_id,
            input=hook_input["tool_input"],
        )

    async def rewrite_refund(
        hook_input: Any, tool_use_id: str | None, _context: Any
    ) -> Any:
        seen("rewrite_refund", hook_input, tool_use_id)
        order = str(hook_input["tool_input"]["orderId"])
        return _hook_output(updated_input={"orderId": f"{order}-checked"})

    async def break_refund_schema(
        hook_input: Any, tool_use_id: str | None, _context: Any
    ) -> Any:
        seen("break_refund_schema", hook_input, tool_use_id)
        return _hook_output(updated_input={"orderId": 7})

    async def deny_marked_refunds(
        hook_input: Any, tool_use_id: str | None, _context: Any
    ) -> Any:
        seen("deny_marked_refunds", hook_input, tool_use_id)
        if (Path(hook_input["cwd"]) / DENY_MARKER).exists():
            return _hook_output(deny="refunds are frozen")
        return {}

    async def rewrite_bash(
        hook_input: Any, tool_use_id: str | None, _context: Any
    ) -> Any:
        # Numbered by how often it ran, so a rerun on resume would show.
        number = ledger.count("app_hook") + 1
        seen("rewrite_bash", hook_input, tool_use_id)
        return _hook_output(
            updated_input={"command": f"echo rewritten-{number} >> {BASH_LOG}"}
        )

    return {
        "rewrite_refund": ("mcp__tools__create_refund", rewrite_refund),
        "break_refund_schema": ("mcp__tools__create_refund", break_refund_schema),
        "deny_marked_refunds": ("mcp__tools__create_refund", deny_marked_refunds),
        "rewrite_bash": ("Bash", rewrite_bash),
    }


def build_flow(config: SuiteConfig) -> AgentSessionFlow:
    """The session flow of the suite's agent under `config.flow_type`."""
    hooks = app_hooks(config)
    matchers = [
        HookMatcher(matcher=hooks[name][0], hooks=[hooks[name][1]])
        for name in config.hooks
    ]
    env = {FAKE_CLAUDE_GATE_DIR_ENV: config.gate_dir, **config.extra_env}
    if config.resume_without_hooks:
        env[FAKE_CLAUDE_RESUME_WITHOUT_HOOKS_ENV] = "1"
    cli_path = fake_claude_cli_path()

    def options(context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        # One cwd per session, the same for every segment: the transcript's
        # project key and Bash's files depend on it.
        cwd = Path(config.workdir) / context.flow_id
        cwd.mkdir(parents=True, exist_ok=True)
        return ClaudeAgentOptions(
            cli_path=cli_path,
            cwd=str(cwd.resolve()),
            tools=["Bash"],
            setting_sources=[],
            env=dict(env),
            hooks={"PreToolUse": list(matchers)} if matchers else None,
        )

    return create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=options,
            custom_tools=build_tools(config),
            tool_policies={
                "create_refund": ToolPolicy(effect="non_idempotent_write"),
                "send_email": ToolPolicy(effect="idempotent_write"),
            },
        ),
        config.flow_type,
        AgentSessionOptions(
            heartbeat_timeout=timedelta(seconds=config.heartbeat_seconds),
            retry_interval=timedelta(seconds=0.2),
            run_model_attempts=config.run_model_attempts,
        ),
    )


def flow_from_env() -> AgentSessionFlow:
    """The flow a worker subprocess serves: `build_flow` of `DEX_FAKE_SUITE_CONFIG`."""
    return build_flow(SuiteConfig.from_json(os.environ[CONFIG_ENV]))
