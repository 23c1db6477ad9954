"""The adapter's PreToolUse decision and its `can_use_tool` fallback.

Every tool call of a segment reaches `ToolPermissions.pre_tool_use` once (CLI
2.1.327 runs PreToolUse for every call, subagents included), and the answer is:

- allow: a custom read without approval, or an approval-free CLI tool call; it
  runs inside the segment;
- defer: the first other call; the CLI ends the segment and the session runs or
  approves it in its own Step;
- deny: every later deferrable call of the segment ("Call again by itself."),
  a deferrable call inside a subagent, and what the application denies;
- deny, too: a call under a tool use ID whose result the transcript already
  holds (only the pending deferred call replays);
- replay: the resumed segment's pending call, answered from its final record
  (allow with the recorded input, or `ask` for a CLI tool that must not run, so
  that `can_use_tool` denies it with text the model reads without a prefix);
  a parked segment's approved custom call may be allowed before its record
  exists (primed: a custom call replays as `allow` with its recorded input,
  whatever the record says), and the tool server waits for the record.

The application's own PreToolUse hooks run first, inside this hook (see
`_app_hooks`), except for a resumed call with a final record: it passed them
when it was deferred, and a later deny would hide its recorded result.

A custom call that would defer is checked against its tool's input schema
first: one that does not fit never reaches an approval or a Step. Its hook
answers `ask` and `can_use_tool` denies it, so the model reads the validation
error at once and as an inline call's (a hook's denial would reach it behind a
"PreToolUse:<tool> hook error:" prefix).

Events: an allowed call writes `tool_call_started` here (its result writes
`tool_call_finished` in the segment). A call the application refuses (its
PreToolUse hook, `claude_code_tool_permission`), a custom call whose input
fails its schema and a source call its source refuses write both events here,
`rejected` or `failed`, since no Step or result ever reports them. The adapter's
own flow-control denials (one deferrable call per reply, a subagent's call, a
reused tool use ID) write none: the model calls again, and that call reports.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Literal, assert_never, cast

from claude_agent_sdk import (
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)

from .._errors import SessionError
from ..session import (
    AgentEvent,
    RunModelContext,
    ToolCall,
    ToolCallFinishedEvent,
    ToolPolicy,
)
from ..session._events import agent_event
from ..session._policy import ToolEffect, resolve_policy
from ..session._state import clip
from ..session._tool_sources import source_call_policy
from ._app_hooks import AppHookOutcome, matchers_timeout, run_app_hooks
from ._definition import ClaudeCodeToolDenial, ClaudeCodeToolPermission
from ._gate import Decision, ToolCallGate
from ._pending_call import AwaitedCall, PendingCall, PrimedCall
from ._sources import (
    SOURCE_CALL_KIND,
    source_one_reply_text,
    step_fields,
    vanished_text,
)
from ._tools import CustomTool


def one_reply_text(name: str) -> str:
    """What the model reads for a deferrable call that must wait for a later reply."""
    return (
        f"{name} did not run: only one call that needs its own step can run per "
        "reply. Call again by itself."
    )


def subagent_text(name: str) -> str:
    """What the model reads for a deferrable call made inside a subagent."""
    return (
        f"{name} did not run: a subagent cannot make a call that needs its own "
        f"step. Call {name} from the main conversation instead."
    )


class ToolPermissions:
    """Decides every tool call of one segment and writes it into the gate."""

    def __init__(
        self,
        *,
        context: RunModelContext,
        gate: ToolCallGate,
        tools: Mapping[str, CustomTool],
        server_name: str,
        policies: Mapping[str, ToolPolicy],
        default_effect: ToolEffect,
        app_matchers: Sequence[HookMatcher],
        permission: ClaudeCodeToolPermission | None,
        pending: PendingCall | AwaitedCall | None,
        answered: frozenset[str] = frozenset(),
        hook_timeout: float = 0.0,
    ) -> None:
        self._context = context
        self._gate = gate
        self._tools = tools
        self._prefix = f"mcp__{server_name}__"
        self._policies = policies
        self._default_effect: ToolEffect = default_effect
        self._app_matchers = list(app_matchers)
        self._permission = permission
        self._pending = pending
        self._answered = answered
        self._hook_timeout = hook_timeout
        self._primed: tuple[str, str, PrimedCall] | None = None
        """The primed call: its tool use ID, its CLI tool name, its input."""
        self._refusals: dict[str, str] = {}
        """What `can_use_tool` denies an `ask`ed call with, by tool use ID (see `_refuse`)."""
        # Decisions are made one at a time, in the order the CLI asks, so "the
        # first deferrable call" is well defined even while hooks await.
        self._lock = asyncio.Lock()

    def hook_matcher(self) -> HookMatcher:
        """The one PreToolUse matcher the CLI gets, for every tool."""
        return HookMatcher(
            matcher=None,
            hooks=[self.pre_tool_use],
            # A parked segment's hook waits for the decision: its timeout outlasts
            # the park (CLI 2.1.327 cancels a hook at its timeout, and the call
            # would not run).
            timeout=max(matchers_timeout(self._app_matchers), self._hook_timeout),
        )

    def adopt(self, context: RunModelContext) -> None:
        """A parked segment's calls from now on belong to `context`'s attempt."""
        self._context = context

    def settle_primed(self, pending: PendingCall) -> None:
        """Decide a primed call from its record, which must replay as it was allowed.

        Raises:
            SessionError: (retryable) the record replays otherwise than the
                primed call was allowed: the adoption fails and the segment
                runs cold.
        """
        if self._primed is None:
            return
        call_id, tool_name, primed = self._primed
        if (
            pending.kind != "custom"
            or pending.tool_use_id != call_id
            or pending.tool_name != tool_name
            or self._replay_name(pending) != tool_name
            or dict(pending.record.arguments) != dict(primed.arguments)
        ):
            raise SessionError(
                f"the parked segment allowed {tool_name} with another input than "
                "its record's; the segment resumes cold"
            )
        self._replay(call_id, tool_name, pending)

    async def _pending_for(
        self, call_id: str, tool_name: str
    ) -> PendingCall | PrimedCall | Literal["closed"] | None:
        """The pending call if `call_id` is it; a parked one is waited for."""
        pending = self._pending
        if not isinstance(pending, AwaitedCall):
            return (
                pending
                if pending is not None and pending.tool_use_id == call_id
                else None
            )
        if call_id != pending.tool_use_id:
            return None
        call = await pending.wait()
        if isinstance(call, PrimedCall):
            if tool_name == f"{self._prefix}{call.tool_name}":
                self._gate.prime(call_id)
                self._primed = (call_id, tool_name, call)
                return call
            call = await pending.adopted()  # not the primed tool: wait for the record
        return "closed" if call is None else call

    async def pre_tool_use(
        self, hook_input: HookInput, tool_use_id: str | None, _context: HookContext
    ) -> HookJSONOutput:
        """Answer one PreToolUse callback; see the module docstring."""
        data = cast(Mapping[str, Any], hook_input)
        tool_name = str(data.get("tool_name", ""))
        call_id = str(data.get("tool_use_id") or tool_use_id or "")
        async with self._lock:
            if self._gate.decision(call_id) is not None:
                return _deny(f"{tool_name} did not run: this call was already decided.")
            pending = await self._pending_for(call_id, tool_name)
            if pending == "closed":
                # The park was closed: end the CLI with the same deferral.
                return _output("defer", "")
            if isinstance(pending, PrimedCall):
                return _output("allow", "", updated_input=dict(pending.arguments))
            if pending is not None:
                return self._replay(call_id, tool_name, pending)
            if call_id in self._answered:
                # A reused ID must not run again, nor replay a record again.
                self._gate.decide(call_id, Decision(kind="deny", tool_name=tool_name))
                return _deny(
                    f"{tool_name} did not run: this call already has a result."
                )
            outcome = await run_app_hooks(self._app_matchers, data, call_id)
            if outcome.decision == "deny":
                self._refuse(
                    call_id,
                    tool_name,
                    outcome.tool_input,
                    "rejected",
                    outcome.reason
                    or f"{self._display(tool_name)} was denied by a PreToolUse hook",
                )
                return _output("deny", outcome.reason, outcome=outcome)
            return await self._decide(call_id, tool_name, data, outcome)

    async def can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        """Answer the CLI's permission request for a call no hook allowed.

        It denies with the record's text a resumed CLI call that the hook
        answered with `ask`, and answers a resumed call whose hook did not run
        (CLI 2.1.327 skips PreToolUse for it when the SDK's initialize lands
        late) once, from its record. The input the CLI passes is never used.
        """
        del tool_input  # What runs is the recorded input, never this one.
        call_id = context.tool_use_id or ""
        async with self._lock:
            asked = self._gate.take_ask(call_id)
            if asked is not None and asked.record is not None:
                return PermissionResultDeny(message=asked.record.model_text)
            if asked is not None and call_id in self._refusals:
                return PermissionResultDeny(message=self._refusals.pop(call_id))
            if self._gate.decision(call_id) is not None:
                return PermissionResultDeny(
                    message=f"{tool_name} did not run: this call was already decided."
                )
            pending = await self._pending_for(call_id, tool_name)
            if pending == "closed":
                return PermissionResultDeny(
                    message=f"{tool_name} did not run: its session stopped waiting here."
                )
            if isinstance(pending, PrimedCall):
                return PermissionResultAllow(updated_input=dict(pending.arguments))
            if pending is not None:
                self._replay(call_id, tool_name, pending)
                decision = self._gate.decision(call_id)
                if decision is not None and decision.kind == "replay":
                    return PermissionResultAllow(updated_input=dict(decision.arguments))
                if self._gate.take_ask(call_id) is not None:
                    return PermissionResultDeny(message=pending.record.model_text)
                return PermissionResultDeny(
                    message=f"{tool_name} did not run: this call was recorded as "
                    f"{pending.tool_name}."
                )
            self._gate.decide(call_id, Decision(kind="deny", tool_name=tool_name))
            return PermissionResultDeny(
                message=f"{tool_name} did not run: the session did not authorize it."
            )

    def _replay(
        self, call_id: str, tool_name: str, pending: PendingCall
    ) -> HookJSONOutput:
        record = pending.record
        if tool_name != pending.tool_name or tool_name != self._replay_name(pending):
            self._gate.decide(call_id, Decision(kind="deny", tool_name=tool_name))
            return _deny(
                f"{tool_name} did not run: this call was recorded as "
                f"{pending.tool_name}."
            )
        arguments = dict(record.arguments)
        if pending.kind == "custom":
            # The custom tool server returns the record; the handler never runs.
            decision = Decision(
                kind="replay",
                tool_name=tool_name,
                custom_name=record.tool_name,
                arguments=arguments,
                record=record,
            )
            self._gate.decide(call_id, decision)
            return _output("allow", "", updated_input=arguments)
        if record.status == "finished":
            # An approved CLI tool runs now, with the input that was approved.
            decision = Decision(
                kind="replay", tool_name=tool_name, arguments=arguments, record=record
            )
            self._gate.decide(call_id, decision)
            # An edited input runs; the model reads that a person changed it.
            return _output(
                "allow", "", updated_input=arguments, context=record.edited_note
            )
        # A hook denial would reach the model as "PreToolUse:<tool> hook error:";
        # `ask` sends the call to can_use_tool, whose denial text arrives as is.
        decision = Decision(kind="ask", tool_name=tool_name, record=record)
        self._gate.decide(call_id, decision)
        return _output("ask", record.model_text)

    def _replay_name(self, pending: PendingCall) -> str | None:
        """The one CLI tool name the pending record may replay as, from the record.

        The run state says how the call was deferred, but the record says what
        ran or was approved: a custom record replays only as this server's tool
        of that name, never as a tool inside the CLI (a Bash call replaying a
        custom record would run Bash with the custom tool's arguments), and a
        CLI record never as a served tool. A record named like a served tool is
        a custom or source record whatever the run state says, so it never
        replays as a CLI tool either. None when the two disagree.
        """
        name = pending.record.tool_name
        match pending.kind:
            case "custom":
                return None if name.startswith("mcp__") else f"{self._prefix}{name}"
            case "cli":
                served = name.startswith(self._prefix) or name in self._tools
                return None if served else name
            case _:
                assert_never(pending.kind)

    async def _decide(
        self,
        call_id: str,
        tool_name: str,
        data: Mapping[str, Any],
        outcome: AppHookOutcome,
    ) -> HookJSONOutput:
        final_input = outcome.tool_input
        changed = final_input != dict(data.get("tool_input") or {})
        custom: CustomTool | None = None
        if tool_name.startswith(self._prefix):
            custom = self._tools.get(tool_name.removeprefix(self._prefix))
            if custom is None:
                self._gate.decide(call_id, Decision(kind="deny", tool_name=tool_name))
                return _deny(f"{tool_name} did not run: this agent has no such tool.")
            if custom.source is not None:
                return await self._decide_source(
                    call_id, tool_name, custom, final_input, data, outcome
                )
            policy = custom.policy(self._policies, self._default_effect)
            display = custom.name
            deferrable = policy.effect != "read" or policy.needs_approval
        else:
            policy = resolve_policy(
                tool_name, dict(self._policies), self._default_effect
            )
            if self._permission is not None:
                try:
                    answer = self._permission(self._context, tool_name, final_input)
                    if inspect.isawaitable(answer):
                        answer = await answer
                except Exception as e:
                    reason = str(e) or type(e).__name__
                    self._refuse(call_id, tool_name, final_input, "rejected", reason)
                    return _output("deny", reason, outcome=outcome)
                if isinstance(answer, ClaudeCodeToolDenial):
                    self._refuse(
                        call_id, tool_name, final_input, "rejected", answer.reason
                    )
                    return _output("deny", answer.reason, outcome=outcome)
                if isinstance(answer, ToolPolicy):
                    policy = answer
            display = tool_name
            # An approval-free write inside the CLI runs in the segment:
            # deferring it would not make it durable.
            deferrable = policy.needs_approval
        asks = outcome.decision == "ask"
        if not (deferrable or asks or outcome.decision == "defer"):
            decision = Decision(
                kind="allow",
                tool_name=tool_name,
                custom_name=custom.name if custom is not None else None,
                arguments=final_input,
            )
            self._gate.decide(call_id, decision)
            self._emit_started(call_id, display, final_input)
            return _output(
                "allow",
                "",
                updated_input=final_input if changed else None,
                outcome=outcome,
            )
        if data.get("agent_id"):
            self._gate.decide(call_id, Decision(kind="deny", tool_name=tool_name))
            return _output("deny", subagent_text(display), outcome=outcome)
        problem = custom.validation_error(final_input) if custom is not None else None
        if problem is not None:
            # Checked before the call waits for anyone: a person would approve an
            # input its tool refuses (its Step would fail with this text), and the
            # model would learn of it only after the approval. An inline call's
            # tool server checks the same schema before its handler runs.
            text = f"{display} did not run: {problem}"
            self._refuse(call_id, tool_name, final_input, "failed", text, ask=True)
            return _output("ask", text, outcome=outcome)
        requires_approval = policy.requires_approval or asks
        call = ToolCall(
            tool_call_id=call_id,
            tool_name=display,
            arguments=final_input,
            policy=ToolPolicy(
                effect=policy.effect, requires_approval=requires_approval
            ),
            reason=_reason(display, policy, outcome),
            metadata={
                "kind": "cli" if custom is None else "custom",
                "claude_tool_name": tool_name,
            },
        )
        decision = Decision(
            kind="defer",
            tool_name=tool_name,
            custom_name=custom.name if custom is not None else None,
            arguments=final_input,
        )
        if not self._gate.defer(call_id, decision, call):
            self._gate.decide(call_id, Decision(kind="deny", tool_name=tool_name))
            return _output("deny", one_reply_text(display), outcome=outcome)
        return _output("defer", "", outcome=outcome)

    async def _decide_source(
        self,
        call_id: str,
        tool_name: str,
        tool: CustomTool,
        final_input: dict[str, Any],
        data: Mapping[str, Any],
        outcome: AppHookOutcome,
    ) -> HookJSONOutput:
        """Defer a source tool call, built by its source from the final input.

        Every source call defers, reads included: the source needs its tool
        Step. A call the source refuses, or of a tool it no longer lists, is
        denied here and never reaches a tool Step.
        """
        source = tool.source
        assert source is not None
        if tool.replay_only:
            self._gate.decide(call_id, Decision(kind="deny", tool_name=tool_name))
            return _output("deny", vanished_text(tool.name), outcome=outcome)
        if data.get("agent_id"):
            self._gate.decide(call_id, Decision(kind="deny", tool_name=tool_name))
            return _output("deny", subagent_text(tool.name), outcome=outcome)
        if self._gate.deferral is not None:
            # Checked before the source builds the call: a later call of the
            # reply must wait for the earlier one's result anyway.
            self._gate.decide(call_id, Decision(kind="deny", tool_name=tool_name))
            return _output("deny", source_one_reply_text(tool.name), outcome=outcome)
        try:
            built = await source.build_call(tool.name, final_input)
        except Exception as e:
            text = f"{tool.name} did not run: {e or type(e).__name__}"
            self._refuse(call_id, tool_name, final_input, "failed", text)
            return _output("deny", text, outcome=outcome)
        policy = source_call_policy(built, self._policies.get(tool.name))
        asks = outcome.decision == "ask"
        call = ToolCall(
            tool_call_id=call_id,
            tool_name=tool.name,
            arguments=dict(built.arguments),
            policy=ToolPolicy(
                effect=policy.effect,
                requires_approval=policy.requires_approval or asks,
            ),
            reason=(outcome.reason if asks and outcome.reason else built.reason)
            or _reason(tool.name, policy, outcome),
            metadata={
                "kind": SOURCE_CALL_KIND,
                "claude_tool_name": tool_name,
                "source_name": source.source_name,
                "source": built.metadata,
            },
            **step_fields(source, tool.name),  # pyright: ignore[reportArgumentType]
        )
        decision = Decision(
            kind="defer",
            tool_name=tool_name,
            custom_name=tool.name,
            arguments=dict(built.arguments),
        )
        if not self._gate.defer(call_id, decision, call):
            self._gate.decide(call_id, Decision(kind="deny", tool_name=tool_name))
            return _output("deny", source_one_reply_text(tool.name), outcome=outcome)
        return _output("defer", "", outcome=outcome)

    def _display(self, tool_name: str) -> str:
        """The name events give a call: a custom tool's own name, else the CLI's."""
        name = tool_name.removeprefix(self._prefix)
        return name if name != tool_name and name in self._tools else tool_name

    def _emit_started(
        self, call_id: str, display: str, arguments: Mapping[str, Any]
    ) -> None:
        self._context.events.emit(
            AgentEvent(
                type="tool_call_started",
                data={
                    "tool_call_id": call_id,
                    "tool_name": display,
                    "arguments": dict(arguments),
                },
            )
        )

    def _refuse(
        self,
        call_id: str,
        tool_name: str,
        arguments: Mapping[str, Any],
        status: Literal["rejected", "failed"],
        text: str,
        *,
        ask: bool = False,
    ) -> None:
        """Deny `call_id` and write its outcome: nothing else ever reports it.

        The call never reaches the session (no interrupt, Step or record) and
        its denial's result is not reported by the segment, so without these
        two events a refused call would leave no trace in the event log.
        `rejected` is the application's refusal (its hook or its
        `claude_code_tool_permission`), with `text` as the rejection message;
        `failed` is a call that could not be built (an input its schema
        refuses, a source's refusal), with `text` as the error.

        With `ask`, the hook answers `ask` and `can_use_tool` denies with
        `text`: the model then reads `text` as it is, as it reads an inline
        call's error, where a hook's denial reaches it behind a
        "PreToolUse:<tool> hook error:" prefix.
        """
        if ask:
            self._gate.decide(call_id, Decision(kind="ask", tool_name=tool_name))
            self._refusals[call_id] = text
        else:
            self._gate.decide(call_id, Decision(kind="deny", tool_name=tool_name))
        display = self._display(tool_name)
        self._emit_started(call_id, display, arguments)
        rejected = status == "rejected"
        finished = ToolCallFinishedEvent(
            tool_call_id=call_id,
            tool_name=display,
            status=status,
            output="" if rejected else text,
            error=None if rejected else clip(text),
            rejection_message=clip(text) if rejected else None,
        )
        self._context.events.emit(agent_event(finished))


def _reason(name: str, policy: ToolPolicy, outcome: AppHookOutcome) -> str:
    if outcome.decision == "ask" and outcome.reason:
        return outcome.reason
    if policy.needs_approval:
        return f"{name} is {policy.effect.replace('_', ' ')} and needs approval"
    return f"{name} is {policy.effect.replace('_', ' ')} and runs in its own step"


def _deny(reason: str) -> HookJSONOutput:
    return _output("deny", reason)


def _output(
    decision: Literal["allow", "ask", "defer", "deny"],
    reason: str,
    *,
    updated_input: dict[str, Any] | None = None,
    outcome: AppHookOutcome | None = None,
    context: str = "",
) -> HookJSONOutput:
    specific: dict[str, Any] = {
        "hookEventName": "PreToolUse",
        "permissionDecision": decision,
    }
    if reason:
        specific["permissionDecisionReason"] = reason
    if updated_input is not None:
        specific["updatedInput"] = updated_input
    output: dict[str, Any] = {}
    if outcome is not None:
        output.update(outcome.common)
        if outcome.additional_context:
            specific["additionalContext"] = "\n".join(outcome.additional_context)
    if context:
        specific["additionalContext"] = context
    output["hookSpecificOutput"] = specific
    return cast(HookJSONOutput, output)
