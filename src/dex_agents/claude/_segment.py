"""One turn segment: a CLI process from its prompt (or resume) to its result.

The segment starts `query()` with the adapter's options, streams live events,
and turns the result into `ToolCallsRequested` (the CLI deferred the one call
the hook deferred) or `TurnCompleted`. An error result, or a CLI that ends
without one, raises: the attempt fails and reruns whole, except what another
attempt would end the same way, which fails for good: a request too large for
the model (see `_limits`, which also sizes the SDK's bound on a CLI output line
for large prompts), a CLI that is not signed in, and one that reached the
application's `max_turns`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, cast

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKError,
    Message,
    ProcessError,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    ToolResultBlock,
    UserMessage,
    query,
)

from .._errors import BudgetReachedError, SessionError
from ..session import (
    AgentEvent,
    RunModelContext,
    StoredMessage,
    ToolCallsRequested,
    ToolPolicy,
    TurnCompleted,
)
from ..session._events import AgentEventType, ModelRetryEvent, agent_event
from ..session._json import JsonObject
from ..session._lingering import linger
from ..stores import MediaStore
from ._definition import ClaudeCodeToolPermission
from ._gate import ToolCallGate
from ._hooks import ToolPermissions
from ._images import TranscriptImages
from ._limits import cli_output_line_limit, too_large_error
from ._mcp_server import build_custom_tool_server
from ._options import TOOL_TIMEOUT_VARIABLE, cli_environment, resolved_cwd
from ._pending_call import AwaitedCall, PendingCall, PrimedCall
from ._process import CliProcessGroup, real_cli_path
from ._prompt import content_message, prompt_stream
from ._stderr import StderrTail
from ._tools import CustomTool
from ._transcript import (
    ClaudeTranscriptStore,
    group_messages,
    last_session_id,
    tool_result_text,
    transcript_entries,
    without_system_reminders,
)
from ._usage import SegmentObserver, cumulative_cost

_SHUTDOWN_SECONDS = 10.0
"""How long a cancelled attempt waits for the SDK to wind down after the kill."""
_EXIT_DELAY = 0.1
"""Seconds a CLI that ended its turn keeps its input open before it is told to exit.

Its exit (about 40 ms of its own work, in a process session the scheduler
gives as large a share of the CPU as the worker's and the server's) would
overlap the 20-30 ms in which the worker and Temporal carry the segment's
result to the session's answer. Put off, it runs after them: result → the
client's answer went from 30-33 ms to 21-22 ms (30 turns each, side by side,
on 2 cores). The CLI idles meanwhile, and nothing it writes after its result
is kept (see `ClaudeTranscriptStore.seal`). A CLI that deferred a call exits at
once: its session is about to wait, and holds no process while it does.
"""
MAX_TURNS_SUBTYPE = "error_max_turns"
"""The result subtype of a CLI that stopped at its `--max-turns` (CLI 2.1.332:
with terminal reason `max_turns`, after the tool results of its last turn)."""
BUDGET_SUBTYPE = "error_max_budget_usd"
"""The result subtype of a CLI that stopped at its `--max-budget-usd` (CLI 2.1.327:
after the model call that crossed it, whose cost the result still reports)."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class SegmentSetup:
    """What the runner hands one segment besides the RunModel context."""

    options: ClaudeAgentOptions
    """The application's options for this attempt, already checked."""
    tools: Mapping[str, CustomTool]
    server_name: str
    policies: Mapping[str, ToolPolicy]
    permission: ClaudeCodeToolPermission | None
    media_store: MediaStore | None = None
    """Where images live; stored entries hold references into it."""


class ParkClosedError(SessionError):
    """A parked segment ended because it was closed, not adopted."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class Segment:
    """Runs one segment; create one per RunModel attempt."""

    def __init__(
        self,
        setup: SegmentSetup,
        context: RunModelContext,
        *,
        parked: bool = False,
        hook_timeout: float = 0.0,
    ) -> None:
        """A segment for `context`'s attempt.

        With `parked`, `context` is a resume whose records are not final yet:
        the CLI starts and its hook for the deferred call waits until `adopt`
        hands over the attempt's own context (or `close` ends it); see `_park`.
        `hook_timeout` is the least timeout of the adapter's hook (seconds).
        """
        self._setup = setup
        self._context = context
        self._hook_timeout = hook_timeout
        self._awaited: AwaitedCall | None = None
        if parked:
            resume = context.resume
            if resume is None:
                raise SessionError("only a resumed segment can park", retryable=False)
            self._awaited = AwaitedCall(
                _require_str(_deferred(resume.run_state), "tool_use_id")
            )
        self._adoptable: tuple[JsonObject, frozenset[str], TranscriptImages] | None = (
            None
        )
        self._permissions: ToolPermissions | None = None
        self._group: CliProcessGroup | None = None
        self._gate = ToolCallGate()
        self._observer = SegmentObserver()
        self._pending: PendingCall | None = None
        self._pending_result_seen = False
        self._replay_images: dict[str, str] = {}
        self._stderr = StderrTail(setup.options.stderr)
        self.shutdown: asyncio.Task[None] | None = None
        """The CLI's shutdown after its result, when the segment did not wait for it."""

    async def run(self) -> TurnCompleted | ToolCallsRequested:
        """Run the segment and return the session's next step."""
        context, setup = self._context, self._setup
        resume = context.resume
        committed = await context.transcript.messages()
        run_state: JsonObject = resume.run_state if resume is not None else {}
        turn_before = transcript_entries(resume.messages) if resume is not None else []
        if resume is not None:
            session_id: str | None = _require_str(run_state, "session_id")
            cwd = _require_str(run_state, "cwd")
        else:
            session_id = last_session_id(committed)
            cwd = resolved_cwd(setup.options)
        loaded = [
            *(transcript_entries(committed, session_id) if session_id else []),
            *turn_before,
        ]
        answered = answered_tool_use_ids(loaded)
        images = TranscriptImages(setup.media_store)
        pending: PendingCall | AwaitedCall | None
        if self._awaited is not None:
            _deferred_call_id(run_state, answered)  # it has no result yet
            pending = self._awaited
            self._adoptable = (run_state, answered, images)
        else:
            self._pending = pending = _pending_call(context, run_state, answered)
            self._replay_images = await _replay_images(self._pending, images)
        store = ClaudeTranscriptStore(
            session_id=session_id, committed=await images.restore(loaded)
        )
        permissions = self._tool_permissions(pending, answered)
        prompt = None
        if resume is None:
            content = await images.prompt_content(context.pending)
            if not content:
                raise SessionError(
                    "the turn has no prompt to send: `context.pending` holds no text",
                    retryable=False,
                )
            prompt = content_message(content)
        group = CliProcessGroup(real_cli_path(setup.options.cli_path))
        with group.bound(), contextlib.ExitStack() as stack:
            stack.enter_context(group)
            self._group = group
            options = self._segment_options(
                cwd=cwd,
                store=store,
                permissions=permissions,
                group=group,
                prompt=prompt,
            )
            result, shutdown = await self._query(prompt, options, group)
            if shutdown is not None:
                store.seal()
                stack.pop_all()  # the CLI's shutdown owns its group from here
                self.shutdown = _finish_in_background(shutdown, group)
        if self._awaited is not None and self._awaited.closed:
            raise ParkClosedError("the parked segment was closed before a decision")
        if result.subtype == BUDGET_SUBTYPE:
            usage = self._observer.usage(result, previous_cost=cumulative_cost(loaded))
            raise BudgetReachedError(
                f"the segment reached the rest of the spend limit "
                f"({options.max_budget_usd} USD): {_error_text(result)}",
                usage=dataclasses.asdict(usage),
            )
        self._finish_resumed_cli_call()
        await store.rewrite_appended(images.to_references)
        return self._outcome(result, store, turn_before, loaded, cwd)

    @property
    def cli_pid(self) -> int | None:
        """The PID of the segment's CLI once it started."""
        return self._group.pid if self._group is not None else None

    @property
    def awaited(self) -> AwaitedCall | None:
        """A parked segment's deferred call (None for a cold one)."""
        return self._awaited

    async def adopt(self, context: RunModelContext) -> None:
        """Hand a parked segment its attempt: the final record answers the call.

        The records' images are read first, so a store failure fails the
        attempt before the CLI learns anything.

        Raises:
            SessionError: `context` does not resume this segment's call.
        """
        awaited, adoptable = self._awaited, self._adoptable
        if awaited is None or adoptable is None or self._permissions is None:
            raise SessionError("this segment is not parked at its deferred call")
        run_state, answered, images = adoptable
        pending = _pending_call(context, run_state, answered)
        if pending is None or pending.tool_use_id != awaited.tool_use_id:
            raise SessionError(
                f"the parked segment waits for {awaited.tool_use_id!r}; the "
                "attempt resumes another call",
                retryable=False,
            )
        # The tool server holds this dict: fill it, do not replace it.
        self._replay_images.update(await _replay_images(pending, images))
        self._context = context
        self._permissions.adopt(context)
        self._pending = pending
        self._permissions.settle_primed(pending)
        awaited.adopt(pending)

    @property
    def bounds_tool_calls(self) -> bool:
        """Whether the CLI's environment sets a timeout of its tool calls."""
        env = {**os.environ, **cli_environment(self._setup.options)}
        return bool(env.get(TOOL_TIMEOUT_VARIABLE))

    def prime(self, call: PrimedCall) -> bool:
        """Let a parked segment's hook allow its approved custom call now (see `_park`)."""
        return self._awaited is not None and self._awaited.prime(call)

    def close(self) -> None:
        """End a parked segment that no decision adopted: its hook answers `defer`."""
        if self._awaited is not None:
            self._awaited.close()

    def _tool_permissions(
        self, pending: PendingCall | AwaitedCall | None, answered: frozenset[str]
    ) -> ToolPermissions:
        """The segment's tool decisions, kept for `adopt` to hand a parked one its attempt."""
        self._permissions = ToolPermissions(
            context=self._context,
            gate=self._gate,
            tools=self._setup.tools,
            server_name=self._setup.server_name,
            policies=self._setup.policies,
            default_effect=self._context.default_tool_effect,
            app_matchers=(self._setup.options.hooks or {}).get("PreToolUse", []),
            permission=self._setup.permission,
            pending=pending,
            answered=answered,
            hook_timeout=self._hook_timeout,
        )
        return self._permissions

    def _segment_options(
        self,
        *,
        cwd: str,
        store: ClaudeTranscriptStore,
        permissions: ToolPermissions,
        group: CliProcessGroup,
        prompt: Mapping[str, Any] | None,
    ) -> ClaudeAgentOptions:
        options = self._setup.options
        hooks = {
            event: list(matchers)
            for event, matchers in (options.hooks or {}).items()
            if event != "PreToolUse"
        }
        # The application's PreToolUse matchers run inside the adapter's.
        hooks["PreToolUse"] = [permissions.hook_matcher()]
        server = build_custom_tool_server(
            self._setup.server_name,
            self._setup.tools,
            self._gate,
            replay_images=self._replay_images,
        )
        servers = cast(Mapping[str, Any], options.mcp_servers)
        return dataclasses.replace(
            options,
            cwd=cwd,
            mcp_servers={**servers, self._setup.server_name: server},
            hooks=hooks,
            can_use_tool=permissions.can_use_tool,
            session_store=store,
            resume=store.session_id,
            include_partial_messages=True,
            # CLI 2.1.327 may resume a deferred call before the SDK's initialize
            # (and so its hooks) arrives; this flag makes it wait.
            extra_args={**options.extra_args, "await-initialize": None},
            env={**cli_environment(options), **group.environment()},
            cli_path=group.cli_path,
            max_budget_usd=_budget(
                options.max_budget_usd, self._context.max_budget_usd
            ),
            # Kept for a failure's message, and passed on to the application's own.
            stderr=self._stderr,
            # The CLI echoes the prompt in one stdout line; the SDK's 1 MiB
            # default would fail any prompt above about 1 MB.
            max_buffer_size=cli_output_line_limit(options.max_buffer_size, prompt),
        )

    async def _query(
        self,
        prompt: dict[str, Any] | None,
        options: ClaudeAgentOptions,
        group: CliProcessGroup,
    ) -> tuple[ResultMessage, asyncio.Task[ResultMessage] | None]:
        """The CLI's result, and its shutdown when it still runs (see `run`)."""
        # The query runs in its own task so that a cancelled attempt can kill the
        # CLI first: the SDK's shielded shutdown would otherwise wait up to 5 s
        # for the CLI to exit on its own before it even starts to terminate it.
        answered: asyncio.Future[ResultMessage] = (
            asyncio.get_running_loop().create_future()
        )
        consumer = asyncio.create_task(self._consume(prompt, options, answered))
        consumer.add_done_callback(_retrieve)
        try:
            await asyncio.wait({consumer, answered}, return_when="FIRST_COMPLETED")
        except asyncio.CancelledError:
            group.kill()
            with contextlib.suppress(BaseException):
                async with asyncio.timeout(_SHUTDOWN_SECONDS):
                    await consumer
            consumer.cancel()
            # An approved CLI call the kill stopped has its outcome too (its
            # Step wrote its start); inline calls are ended by whoever
            # cancelled, who knows why (`cancel_turn`, a limit, a shutdown).
            self._finish_resumed_cli_call()
            raise
        if not consumer.done():
            # The CLI answered; what is left is its shutdown (`_EXIT_DELAY` idle
            # after a turn's end, then about 40 ms of exit), whose entries the
            # session does not keep (see `ClaudeTranscriptStore.seal`).
            return answered.result(), consumer
        group.kill()
        return consumer.result(), None

    async def _consume(
        self,
        prompt: dict[str, Any] | None,
        options: ClaudeAgentOptions,
        answered: asyncio.Future[ResultMessage],
    ) -> ResultMessage:
        result: ResultMessage | None = None
        result_seen = asyncio.Event()
        messages = cast(
            AsyncGenerator[Message, None],
            query(prompt=prompt_stream(prompt, result_seen), options=options),
        )
        try:
            async for message in messages:
                if answered.done():
                    continue  # the segment was taken at its result; this is shutdown
                self._observe(message)
                if isinstance(message, ResultMessage):
                    result = message
                    if not message.is_error:
                        answered.set_result(message)
                    if message.is_error or _defers(message):
                        # An error: the SDK raises once the CLI exited. A deferral:
                        # the session will wait, and holds no process meanwhile.
                        result_seen.set()
                    else:
                        asyncio.get_running_loop().call_later(
                            _EXIT_DELAY, result_seen.set
                        )
        except ClaudeSDKError as e:
            # The SDK raises after an error result; the result says more.
            if result is None or not result.is_error:
                await self._stderr.settle()
                raise SessionError(
                    f"the Claude Code CLI failed: {_sdk_error_text(e)}; "
                    f"{self._stderr.described()}"
                ) from e
        except Exception as e:
            # The SDK (0.2.184 to 0.2.189) raises a plain Exception for a CLI that never
            # answered its initialize request (one that exited without a word).
            if not str(e).startswith(_SDK_CONTROL_TIMEOUT):
                raise
            await self._stderr.settle()
            raise SessionError(
                f"the Claude Code CLI did not answer: {e}; {self._stderr.described()}"
            ) from e
        finally:
            result_seen.set()
            await messages.aclose()
        if result is None:
            raise SessionError(
                "the Claude Code CLI ended without a result; "
                f"{self._stderr.described()}"
            )
        if result.is_error and result.subtype != BUDGET_SUBTYPE:
            too_large = too_large_error(result, prompt)
            if too_large is not None:
                raise too_large
            if _not_signed_in(result):
                raise _not_signed_in_error(_error_text(result))
            if _reached_max_turns(result):
                raise _max_turns_error(options.max_turns, _error_text(result))
            raise SessionError(
                f"Claude Code returned an error result ({result.subtype}, "
                f"{result.terminal_reason}): {_error_text(result)}"
            )
        return result

    def _observe(self, message: Message) -> None:
        self._observer.observe(message)
        match message:
            case SystemMessage(subtype="api_retry", data=data) if _key_refused(
                data, self._observer.key_source
            ):
                # The CLI would retry a refused key with backoff for minutes (10
                # tries); the same key cannot pass, so the segment ends now.
                if self._group is not None:
                    self._group.kill()
                raise _not_signed_in_error(
                    f"the Messages API refused ANTHROPIC_API_KEY: HTTP "
                    f"{data.get('error_status')} {data.get('error')}"
                )
            case SystemMessage(subtype="api_retry", data=data):
                # The CLI waits and asks again (up to minutes in all): say why.
                self._context.events.emit(agent_event(_model_retry(data)))
            case StreamEvent(event=event, parent_tool_use_id=None):
                self._emit_delta(event)
            case UserMessage(content=list() as blocks):
                for block in blocks:
                    if isinstance(block, ToolResultBlock):
                        self._emit_result(block)
            case _:
                pass

    def _emit_delta(self, event: dict[str, Any]) -> None:
        if event.get("type") != "content_block_delta":
            return
        delta = event.get("delta")
        if not isinstance(delta, dict):
            return
        delta = cast(dict[str, Any], delta)
        match delta.get("type"):
            case "text_delta":
                self._emit("text_delta", {"text": str(delta.get("text", ""))})
            case "thinking_delta":
                self._emit("reasoning_delta", {"text": str(delta.get("thinking", ""))})
            case _:
                pass

    def _emit_result(self, block: ToolResultBlock) -> None:
        decision = self._gate.decision(block.tool_use_id)
        if decision is None:
            return
        pending = self._pending
        resumed_cli = (
            decision.kind == "replay"
            and pending is not None
            and pending.kind == "cli"
            and pending.tool_use_id == block.tool_use_id
        )
        if decision.kind != "allow" and not resumed_cli:
            # Deferred calls get their events from the session.
            return
        if resumed_cli:
            self._pending_result_seen = True
        text = tool_result_text({"content": block.content})
        self._emit(
            "tool_call_finished",
            {
                "tool_call_id": block.tool_use_id,
                "tool_name": decision.custom_name or decision.tool_name,
                "status": "failed" if block.is_error else "finished",
                "output": text,
            },
        )

    def _finish_resumed_cli_call(self) -> None:
        """Write `outcome_unknown` for an approved CLI call whose result never came.

        Also when the attempt was cancelled while the call ran: a Bash command
        killed midway may have acted in part.
        """
        pending = self._pending
        if pending is None or pending.kind != "cli" or self._pending_result_seen:
            return
        decision = self._gate.decision(pending.tool_use_id)
        if decision is None or decision.kind != "replay":
            return
        self._emit(
            "tool_call_finished",
            {
                "tool_call_id": pending.tool_use_id,
                "tool_name": pending.tool_name,
                "status": "outcome_unknown",
                "output": "",
            },
        )

    def _emit(self, kind: AgentEventType, data: JsonObject) -> None:
        self._context.events.emit(AgentEvent(type=kind, data=data))

    def _outcome(
        self,
        result: ResultMessage,
        store: ClaudeTranscriptStore,
        turn_before: Sequence[JsonObject],
        loaded: Sequence[JsonObject],
        cwd: str,
    ) -> TurnCompleted | ToolCallsRequested:
        session_id = result.session_id
        entries = [*turn_before, *store.segment_entries(session_id)]
        messages: tuple[StoredMessage, ...] = tuple(group_messages(session_id, entries))
        usage = self._observer.usage(result, previous_cost=cumulative_cost(loaded))
        metadata = self._observer.metadata(result, self._setup.options.model)
        # A resumed call that defers again ends with stop_reason "tool_deferred"
        # and no terminal_reason (CLI 2.1.327).
        if not _defers(result):
            return TurnCompleted(
                messages=messages,
                final_text=without_system_reminders(result.result or ""),
                usage=usage,
                metadata=metadata,
            )
        deferral = self._gate.deferral
        deferred = result.deferred_tool_use
        if (
            deferral is None
            or deferred is None
            or deferred.id != deferral.tool_use_id
            or deferred.name != deferral.decision.tool_name
        ):
            raise SessionError(
                "the Claude Code CLI deferred a call the adapter did not defer: "
                f"{None if deferred is None else (deferred.name, deferred.id)!r}"
            )
        run_state: JsonObject = {
            "session_id": session_id,
            "cwd": cwd,
            "deferred": {
                "tool_use_id": deferral.tool_use_id,
                "kind": "custom" if deferral.decision.custom_name else "cli",
                "tool_name": deferral.decision.tool_name,
            },
        }
        return ToolCallsRequested(
            calls=(deferral.call,),
            run_state=run_state,
            messages=messages,
            usage=usage,
            metadata=metadata,
        )


def _finish_in_background(
    consumer: asyncio.Task[ResultMessage], group: CliProcessGroup
) -> asyncio.Task[None]:
    """Let the CLI end on its own for a while, then kill what is left of its group."""

    async def finish() -> None:
        try:
            await asyncio.wait({consumer}, timeout=_SHUTDOWN_SECONDS)
        finally:
            consumer.cancel()
            group.__exit__(None, None, None)

    task = asyncio.create_task(finish())
    linger(task)  # its worker waits for it when it stops
    return task


def _defers(result: ResultMessage) -> bool:
    """Whether the CLI's result is a deferral (CLI 2.1.327: either field says so)."""
    return "tool_deferred" in (result.terminal_reason, result.stop_reason)


def _retrieve(task: asyncio.Task[ResultMessage]) -> None:
    """Mark a shutdown's failure as seen: the segment already has its result."""
    if not task.cancelled():
        task.exception()


def _deferred(run_state: JsonObject) -> Mapping[str, Any]:
    deferred = run_state.get("deferred")
    if not isinstance(deferred, dict):
        raise SessionError(
            "resumed without the deferred call in its run state", retryable=False
        )
    return cast(Mapping[str, Any], deferred)


def _deferred_call_id(run_state: JsonObject, answered: frozenset[str]) -> str:
    """The tool use ID of the call a resumed segment answers; it has no result yet."""
    call_id = _require_str(_deferred(run_state), "tool_use_id")
    if call_id in answered:
        # The CLI would find no pending deferral and wait for a prompt forever
        # (CLI 2.1.327), and the record must not replay twice.
        raise SessionError(
            f"the deferred call {call_id!r} already has a result in the transcript",
            retryable=False,
        )
    return call_id


def _pending_call(
    context: RunModelContext, run_state: JsonObject, answered: frozenset[str]
) -> PendingCall | None:
    """The deferred call a resumed segment answers, with its final record."""
    resume = context.resume
    if resume is None:
        return None
    deferred = _deferred(run_state)
    call_id = _deferred_call_id(run_state, answered)
    record = next((r for r in resume.records if r.tool_call_id == call_id), None)
    if record is None:
        raise SessionError(
            f"resumed without a final record of the deferred call {call_id!r}",
            retryable=False,
        )
    kind = deferred.get("kind")
    return PendingCall(
        tool_use_id=call_id,
        kind="custom" if kind == "custom" else "cli",
        tool_name=_require_str(deferred, "tool_name"),
        record=record,
    )


async def _replay_images(
    pending: PendingCall | None, images: TranscriptImages
) -> dict[str, str]:
    """The base64 of the images the resumed call's record replays, by key.

    Read before the CLI starts, so a store failure fails the attempt cleanly.
    """
    if pending is None or pending.record.status != "finished":
        return {}
    return {ref.key: await images.read(ref) for ref in pending.record.images}


def answered_tool_use_ids(entries: Sequence[JsonObject]) -> frozenset[str]:
    """Tool use IDs whose `tool_result` the transcript already holds."""
    answered: set[str] = set()
    for entry in entries:
        message = entry.get("message")
        if entry.get("type") != "user" or not isinstance(message, dict):
            continue
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                tool_use_id = block.get("tool_use_id")
                if isinstance(tool_use_id, str):
                    answered.add(tool_use_id)
    return frozenset(answered)


def _require_str(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise SessionError(f"run state lacks {key!r}", retryable=False)
    return value


def _sdk_error_text(err: ClaudeSDKError) -> str:
    """The SDK's error, without its pointer to a stderr the adapter reads itself."""
    if isinstance(err, ProcessError) and err.stderr == _SDK_STDERR_PLACEHOLDER:
        return f"it exited with code {err.exit_code}"
    return str(err)


_SDK_STDERR_PLACEHOLDER = "Check stderr output for details"
"""What the SDK (0.2.184 to 0.2.189) puts where a failed CLI's stderr would be."""
_SDK_CONTROL_TIMEOUT = "Control request timeout"
"""How the SDK's plain Exception for an unanswered control request begins."""


_NOT_SIGNED_IN = ("Not logged in", "Invalid API key")
"""How the CLI (2.1.332, bundled) starts the result of a segment it could not
authenticate: no key at all, or a key the Messages API refused."""


def _not_signed_in(result: ResultMessage) -> bool:
    """Whether an error result says the CLI has no working credentials.

    Another attempt cannot change that: without this, a worker with no key
    retried every segment and ended with the CLI's own advice ("Please run
    /login"), which is not how a worker signs in.
    """
    text = (result.result or "").strip()
    return result.api_error_status == 401 or text.startswith(_NOT_SIGNED_IN)


def _key_refused(retry: Mapping[str, Any], key_source: object) -> bool:
    """Whether an `api_retry` is the Messages API refusing a static API key.

    Only a key from `ANTHROPIC_API_KEY` is final: the CLI retries it unchanged.
    A signed-in CLI (OAuth) may refresh its token and pass on a retry, so its
    401s are left to the CLI.
    """
    return key_source == "ANTHROPIC_API_KEY" and (
        retry.get("error_status") == 401
        or retry.get("error") == "authentication_failed"
    )


def _model_retry(retry: Mapping[str, Any]) -> ModelRetryEvent:
    """The `model_retry` event of the CLI's `api_retry` notice."""

    def number(key: str) -> int:
        value = retry.get(key)
        return int(value) if isinstance(value, int | float) else 0

    status = retry.get("error_status")
    return ModelRetryEvent(
        attempt=number("attempt"),
        max_retries=number("max_retries"),
        retry_in_ms=number("retry_delay_ms"),
        error=str(retry.get("error") or "unknown")[:200],
        error_status=status if isinstance(status, int) else None,
    )


def _not_signed_in_error(detail: str) -> SessionError:
    """The turn's failure for a CLI with no working credentials: not retryable."""
    return SessionError(
        f"the Claude Code CLI is not signed in ({detail}): set ANTHROPIC_API_KEY "
        "in the worker's environment (or in the agent's `ClaudeAgentOptions.env`), "
        "and check it with `dex-agents doctor`",
        retryable=False,
    )


def _reached_max_turns(result: ResultMessage) -> bool:
    """Whether an error result is the CLI stopping at `ClaudeAgentOptions.max_turns`."""
    return result.subtype == MAX_TURNS_SUBTYPE or result.terminal_reason == "max_turns"


def _max_turns_error(max_turns: int | None, detail: str) -> SessionError:
    """The turn's failure for a segment that reached `max_turns`: not retryable.

    Another attempt makes the same model calls and stops at the same turn, so
    a rerun only ran the segment's inline tools again (once per attempt of
    `run_model_attempts`) before the turn failed anyway. The CLI counts the turns of one segment:
    a segment resumed after a deferred call (an approved write, a Bash
    command) starts a new count, so the limit bounds each segment of a turn,
    not the turn as a whole.
    """
    return SessionError(
        f"the model segment reached `max_turns` ({max_turns}) of the agent's "
        f"ClaudeAgentOptions and stopped before its answer ({detail}); each "
        "segment counts its own turns (a segment resumed after a deferred call "
        "starts a new count), so raise `max_turns` in the agent's "
        "ClaudeAgentOptions, or leave it unset for no limit, and send the "
        "message again",
        retryable=False,
    )


def _error_text(result: ResultMessage) -> str:
    if result.errors:
        return "; ".join(result.errors)
    return (result.result or "").strip() or "no details"


def _budget(own: float | None, remaining: float | None) -> float | None:
    """The segment's `max_budget_usd`: the application's, or the rest of the limit.

    The CLI counts this process's own spend (not the session's total it
    reports), so the rest of the session's limit is the right budget.
    """
    if remaining is None:
        return own
    return remaining if own is None else min(own, remaining)
