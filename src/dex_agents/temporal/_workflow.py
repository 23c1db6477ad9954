"""The session workflow: one per session ID, a small state machine over Steps.

Determinism: this module imports only the pure core, the payload models and
`temporalio.workflow`. Every branch reads workflow state or Step results; time
comes from `workflow.now()` and IDs from `workflow.uuid4()`. Any change to the
logic after a release goes behind `workflow.patched()`, and the recorded
histories in `tests/histories/` are replayed in CI.

A turn moves through phases kept in `SessionState.active`, so a session can
continue as new in the middle of a turn (waiting for approval) and pick up
exactly where it was:

    run_model ─► tool ─► await_approval ─► execute ─► tool … ─► resume ─► (run_model again)
        │                                                                    │
        └──────────── turn_completed / failure note ◄────────────────────────┘
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, ClassVar, cast

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, RetryState
from temporalio.exceptions import TimeoutError as StepTimeoutError

with workflow.unsafe.imports_passed_through():
    from ..session import (
        INLINE_TEXT_LIMIT,
        MAX_QUEUED_MESSAGES,
        AgentEvent,
        AgentEventType,
        AgentSessionOptions,
        JsonObject,
        ToolRecord,
        UserPrompt,
        failure_note,
        preview,
    )
    from . import _registry
    from ._models import (
        ActiveTurn,
        CallToolInput,
        CallToolOutput,
        EngineInfo,
        FinishedTurn,
        Interrupt,
        PublishInput,
        ResolveInterruptInput,
        ResumeInput,
        RunModelInput,
        RunModelOutput,
        SessionInput,
        SessionState,
        TurnStatus,
        UserMessageInput,
    )
    from ._snapshot import (
        AgentSnapshot,
        clip,
        migrate_carried_state,
        session_status,
        snapshot_json,
        snapshot_of,
        turn_json,
        turn_number,
        turn_summary,
    )

UNKNOWN_INTERRUPT = "UnknownInterrupt"
INVALID_MESSAGE = "InvalidUserMessage"
QUEUE_FULL = "MessageQueueFull"
TOO_LARGE = "MessageTooLargeError"
NON_RETRYABLE_ERRORS = ["UserError", "SpendLimitExceeded", "TypeError", TOO_LARGE]

_KEEP_IDS = 500
_KEEP_INTERRUPT_IDS = 200

# Patches, one per change to workflow logic since the first release (0.1.0).
_PATCH_RECORD_ATTEMPTS = "tool-record-attempts"
"""Tool records say how many attempts their Step ran (they said 0 before)."""
_PATCH_NO_START_PUBLISH = "no-turn-start-publish"
"""A turn's start is published with its next change, not in a round trip before RunModel."""


@dataclass(frozen=True, kw_only=True)
class ActivityNames:
    """The Step names of one flow type; persisted in history, never rename silently."""

    run_model: str
    call_tool: str
    call_single_attempt_tool: str
    publish: str

    @classmethod
    def for_flow(cls, flow_type: str) -> ActivityNames:
        """Names scoped by flow type, so several flows share one worker."""
        return cls(
            run_model=f"{flow_type}.run_model",
            call_tool=f"{flow_type}.call_tool",
            call_single_attempt_tool=f"{flow_type}.call_single_attempt_tool",
            publish=f"{flow_type}.publish",
        )


class AgentSessionWorkflow:
    """Base of every flow's workflow class; `create_agent_session_flow` subclasses it."""

    flow_type: ClassVar[str]
    options: ClassVar[AgentSessionOptions]
    names: ClassVar[ActivityNames]
    supports_images: ClassVar[bool]
    """Whether the runner has `build_user_message_with_images`, fixed at flow creation."""

    def _setup(self, input: SessionInput) -> None:
        info = workflow.info()
        self.state = input.state or SessionState(session_id=info.workflow_id)
        if input.state is not None:
            self.state.runs += 1
            migrate_carried_state(self.state)
        self._events: list[AgentEvent] = []

    # ----- RPCs ---------------------------------------------------------------

    @workflow.update
    async def send_user_message(self, input: UserMessageInput) -> bool:
        """Queue a user message; the next turn (or the current one's successor) sends it.

        Returns False, and queues nothing, for a message with images when the
        runner cannot send images.
        """
        if input.images and not type(self).supports_images:
            return False
        if self._seen_update():
            return True  # a retry across continue-as-new: already queued
        self.state.pending.append(
            UserPrompt(
                text=input.text, text_ref=input.text_ref, images=tuple(input.images)
            )
        )
        self.state.inbox += 1
        self.state.version += 1
        return True

    @send_user_message.validator
    def _validate_user_message(self, input: UserMessageInput) -> None:
        # A message of images alone may have empty text; a validator does no I/O,
        # so whether the runner takes images is decided in the handler.
        if not isinstance(input.text, str) or (  # pyright: ignore[reportUnnecessaryIsInstance]
            not input.text.strip() and not input.images and input.text_ref is None
        ):
            raise ApplicationError(
                f"user message text must be a non-empty string, got {input.text!r}",
                type=INVALID_MESSAGE,
                non_retryable=True,
            )
        if input.text_ref is None and len(input.text.encode()) > INLINE_TEXT_LIMIT:
            raise ApplicationError(
                f"a user message of {len(input.text.encode())} bytes must travel by "
                f"reference (more than {INLINE_TEXT_LIMIT} bytes inline); send it with "
                "`dex_agents.send_user_message` or `SessionClient`, which store it first",
                type=INVALID_MESSAGE,
                non_retryable=True,
            )
        queued = sum(i.kind == "user_prompt" for i in self.state.pending)
        if queued >= MAX_QUEUED_MESSAGES:
            raise ApplicationError(
                f"session {self.state.session_id!r} already has {queued} messages "
                "waiting for a turn (the most it queues); wait until it answers "
                "(`wait_for_idle`) and send this message again",
                type=QUEUE_FULL,
                non_retryable=True,
            )

    @workflow.update
    async def resolve_interrupt(self, input: ResolveInterruptInput) -> bool:
        """Approve or reject a pending call; a repeat returns False and changes nothing."""
        interrupt = self.state.interrupts.get(input.interrupt_id)
        if interrupt is None or interrupt.resolved:
            # A client retry across continue-as-new is the same request: it succeeded.
            return self._already_applied()
        self._seen_update()
        interrupt.resolved = True
        interrupt.approved = input.approved
        interrupt.rejection_message = input.rejection_message
        self.state.version += 1
        return True

    @resolve_interrupt.validator
    def _validate_resolve(self, input: ResolveInterruptInput) -> None:
        # A validator rejection writes no history: an unknown ID changes nothing.
        if (
            input.interrupt_id not in self.state.interrupts
            and input.interrupt_id not in self.state.resolved_interrupts
        ):
            pending = [i for i, v in self.state.interrupts.items() if not v.resolved]
            raise ApplicationError(
                f"session {self.state.session_id!r} has no interrupt "
                f"{input.interrupt_id!r}; pending interrupts: {pending}",
                type=UNKNOWN_INTERRUPT,
                non_retryable=True,
            )

    @workflow.update
    async def wait_for_idle(self) -> int:
        """Return the state version once no turn runs (answered, or waiting for approval).

        It returns a number, not the snapshot: Update results stay in history,
        and a snapshot grows with the session. Callers query the snapshot after.
        """
        await workflow.wait_condition(lambda: session_status(self.state) != "running")
        return self.state.version

    @workflow.update
    async def idle_snapshot(self) -> AgentSnapshot:
        """The live snapshot once no turn runs: one round trip, and bounded.

        Clients query first and call this only while a turn runs, so waiting on
        an idle session writes no history.
        """
        await workflow.wait_condition(lambda: session_status(self.state) != "running")
        return self._snapshot()

    @workflow.update
    async def describe(self) -> int:
        """The state version, as an Update (used to start a session without a message)."""
        return self.state.version

    @workflow.query
    def get_agent_snapshot(self) -> AgentSnapshot:
        """The live part of the snapshot: status, the active turn, approvals, usage.

        Finished turns and messages come from the runtime store (paged), so the
        answer stays the same size however old the session is.
        """
        return self._snapshot()

    @workflow.query
    def engine_info(self) -> EngineInfo:
        """Whether this code runs sandboxed, and which run of the session it is."""
        return EngineInfo(sandboxed=workflow.unsafe.in_sandbox(), runs=self.state.runs)

    def _seen_update(self) -> bool:
        """Remember the running Update's ID; True if it was applied before."""
        info = workflow.current_update_info()
        if info is None:
            return False
        if info.id in self.state.update_ids:
            return True
        self.state.update_ids = [*self.state.update_ids[-(_KEEP_IDS - 1) :], info.id]
        return False

    def _already_applied(self) -> bool:
        info = workflow.current_update_info()
        return info is not None and info.id in self.state.update_ids

    # ----- main loop ----------------------------------------------------------

    async def _run(self) -> None:
        if self.state.unpublished:
            await self._publish()  # turns a 0.1.x state carried, or a failed publish's
        while True:
            await workflow.wait_condition(
                lambda: (
                    self.state.active is not None
                    or self.state.inbox > 0
                    or self._continue_as_new_needed()
                )
            )
            if self.state.active is None and self.state.inbox == 0:
                await self._continue_as_new()
            if self.state.active is None:
                self._start_turn()
                if not workflow.patched(_PATCH_NO_START_PUBLISH):
                    await self._publish()
            await self._drive()

    async def _drive(self) -> None:
        while (active := self.state.active) is not None:
            match active.phase:
                case "run_model" | "resume":
                    await self._run_model(active)
                case "tool":
                    await self._next_call(active)
                case "await_approval":
                    await self._await_approval(active)
                case "execute":
                    await self._execute(active)

    def _start_turn(self) -> None:
        self.state.turn_counter += 1
        turn_id = f"turn-{self.state.turn_counter}"
        new_items = self.state.pending[len(self.state.pending) - self.state.inbox :]
        self.state.active = ActiveTurn(
            turn_id=turn_id,
            pending_count=len(self.state.pending),
            prompts=[i.preview for i in new_items if i.kind == "user_prompt"],
        )
        self.state.inbox = 0
        self._emit("turn_started", {"turn_id": turn_id})

    # ----- phases -------------------------------------------------------------

    async def _run_model(self, active: ActiveTurn) -> None:
        opts = type(self).options
        if (
            opts.spend_limit is not None
            and self.state.usage.cost_usd >= opts.spend_limit
        ):
            await self._fail_turn(
                active,
                f"spend limit reached: {self.state.usage.cost_usd:.4f} USD of "
                f"{opts.spend_limit:.4f} USD; raise `spend_limit` to continue",
            )
            return
        active.segment += 1
        resume = None
        if active.phase == "resume":
            resume = ResumeInput(
                run_state=active.run_state,
                partial_segment_id=active.partial_segment_id,
                records=list(active.records),
            )
        # Events not published yet (the turn's start) go with the Step: no extra round trip.
        events, self._events = self._events, []
        first_seq = self.state.event_seq
        self.state.event_seq += len(events)
        try:
            out = await workflow.execute_activity(
                type(self).names.run_model,
                RunModelInput(
                    session_id=self.state.session_id,
                    turn_id=active.turn_id,
                    step_execution_id=f"{active.turn_id}/run_model/{active.segment}",
                    transcript_head=self.state.transcript_head,
                    pending=self.state.pending[: active.pending_count],
                    resume=resume,
                    session_events=events,
                    first_seq=first_seq,
                ),
                result_type=RunModelOutput,
                activity_id=f"{active.turn_id}/run_model/{active.segment}",
                start_to_close_timeout=opts.run_model_limit,
                heartbeat_timeout=opts.heartbeat_timeout,
                retry_policy=RetryPolicy(
                    initial_interval=opts.retry_interval,
                    maximum_attempts=opts.run_model_attempts,
                    non_retryable_error_types=NON_RETRYABLE_ERRORS,
                ),
            )
        except ActivityError as err:
            reason = _failure_text(err)
            if isinstance(err.cause, StepTimeoutError):
                reason = (
                    f"the model segment exceeded `run_model_limit` ({opts.run_model_limit}) "
                    f"or stopped heartbeating ({reason}); raise the limit in the session options"
                )
            cause = err.cause
            too_large = isinstance(cause, ApplicationError) and cause.type == TOO_LARGE
            await self._fail_turn(active, reason, drop_prompts=too_large)
            return
        self.state.usage = self.state.usage + out.usage
        active.usage = active.usage + out.usage
        if out.kind == "turn_completed":
            self.state.transcript_head = out.segment_id
            del self.state.pending[: active.pending_count]
            self._end_turn(active, "completed", final_text=out.final_text)
            self._emit("turn_completed", {"turn_id": active.turn_id})
            await self._publish()
            return
        if not out.calls:
            await self._fail_turn(
                active, "the runner requested tool calls but named none"
            )
            return
        active.run_state = out.run_state
        active.partial_segment_id = out.segment_id
        active.calls = list(out.calls)
        active.call_index = 0
        active.records = []
        active.phase = "tool"

    async def _next_call(self, active: ActiveTurn) -> None:
        if active.call_index >= len(active.calls):
            active.phase = "resume"
            return
        call = active.calls[active.call_index]
        if any(r.status in ("rejected", "outcome_unknown") for r in active.records):
            self._record(
                active,
                ToolRecord(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    arguments=call.arguments,
                    status="skipped",
                ),
            )
            return
        if not call.policy.needs_approval:
            active.phase = "execute"
            return
        now = workflow.now()
        deadline = type(self).options.interrupt_deadline
        interrupt = Interrupt(
            interrupt_id=f"intr_{workflow.uuid4().hex[:16]}",
            turn_id=active.turn_id,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            arguments=call.arguments,
            effect=call.policy.effect,
            reason=call.reason or f"{call.tool_name} is {call.policy.effect}",
            created_at=now.isoformat(),
            deadline=(now + deadline).isoformat() if deadline is not None else None,
        )
        self.state.interrupts[interrupt.interrupt_id] = interrupt
        active.interrupt_id = interrupt.interrupt_id
        active.phase = "await_approval"
        self._emit(
            "interrupt_created",
            {
                "interrupt_id": interrupt.interrupt_id,
                "tool_call_id": call.tool_call_id,
                "tool_name": call.tool_name,
                "arguments": call.arguments,
                "effect": call.policy.effect,
            },
        )
        await self._publish()

    async def _await_approval(self, active: ActiveTurn) -> None:
        assert active.interrupt_id is not None
        interrupt = self.state.interrupts[active.interrupt_id]
        timeout: timedelta | None = None
        if interrupt.deadline is not None:
            timeout = max(
                datetime.fromisoformat(interrupt.deadline) - workflow.now(),
                timedelta(0),
            )
        try:
            await workflow.wait_condition(
                lambda: interrupt.resolved or self._continue_as_new_needed(),
                timeout=timeout,
            )
        except TimeoutError:
            interrupt.resolved = True
            interrupt.approved = False
            interrupt.rejection_message = "no approval arrived before the deadline"
        if not interrupt.resolved:
            await self._continue_as_new()
        call = active.calls[active.call_index]
        self._emit(
            "interrupt_resolved",
            {
                "interrupt_id": interrupt.interrupt_id,
                "approved": bool(interrupt.approved),
                "rejection_message": interrupt.rejection_message,
            },
        )
        if interrupt.approved:
            active.phase = "execute"
        else:
            self._record(
                active,
                ToolRecord(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    arguments=call.arguments,
                    status="rejected",
                    rejection_message=interrupt.rejection_message or "",
                ),
            )
        await self._publish()

    async def _execute(self, active: ActiveTurn) -> None:
        opts = type(self).options
        call = active.calls[active.call_index]
        step = call.policy.step
        attempts = opts.tool_attempts if step == "call_tool" else 1
        if step == "call_tool" and call.step_attempts is not None:
            # A tool source sets its own retry policy (a connector operation's).
            attempts = call.step_attempts
        limit = (
            opts.tool_limit
            if call.step_timeout_seconds is None
            else timedelta(seconds=call.step_timeout_seconds)
        )
        name = (
            type(self).names.call_tool
            if step == "call_tool"
            else type(self).names.call_single_attempt_tool
        )
        step_id = f"{active.turn_id}/{step}/{call.tool_call_id}"
        try:
            out = await workflow.execute_activity(
                name,
                CallToolInput(
                    session_id=self.state.session_id,
                    turn_id=active.turn_id,
                    step_execution_id=step_id,
                    call=call,
                ),
                result_type=CallToolOutput,
                activity_id=step_id,
                start_to_close_timeout=limit,
                heartbeat_timeout=opts.heartbeat_timeout,
                retry_policy=RetryPolicy(
                    initial_interval=opts.retry_interval,
                    maximum_attempts=attempts,
                    non_retryable_error_types=NON_RETRYABLE_ERRORS,
                ),
            )
            record = ToolRecord(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                arguments=call.arguments,
                status="failed" if out.is_error else "finished",
                output=out.output,
                output_ref=out.output_ref,
                finished_by_resumed_turn=out.finished_by_resumed_turn,
                images=tuple(out.images),
            )
            if workflow.patched(_PATCH_RECORD_ATTEMPTS):
                record = replace(record, attempts=out.attempt)
        except ActivityError as err:
            record = ToolRecord(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                arguments=call.arguments,
                status="outcome_unknown",
                output=_failure_text(err),
            )
            if workflow.patched(_PATCH_RECORD_ATTEMPTS):
                record = replace(record, attempts=_failed_attempts(err, attempts))
        self._record(active, record)

    async def _fail_turn(
        self, active: ActiveTurn, reason: str, *, drop_prompts: bool = False
    ) -> None:
        """End the turn failed; its items stay pending with a note for the next turn.

        `drop_prompts`: the model refused them as too large, so sending them
        again would fail every later turn; they leave, and the note says so.
        """
        note = failure_note(active.turn_id, reason, active.turn_records)
        count = active.pending_count
        if drop_prompts:
            sent = self.state.pending[:count]
            dropped = [i for i in sent if i.kind == "user_prompt"]
            kept = [i for i in sent if i.kind != "user_prompt"]
            self.state.pending[:count] = kept
            count = len(kept)
            note = replace(
                note,
                text=note.text
                + f"\nIts {len(dropped)} user message(s) were too large for the model "
                "and were not kept: "
                + "; ".join(repr(preview(p.text, 80)) for p in dropped),
            )
        self.state.pending.insert(count, note)
        self._end_turn(active, "failed", error=reason)
        self._emit("turn_failed", {"turn_id": active.turn_id, "error": reason})
        await self._publish()

    # ----- helpers ------------------------------------------------------------

    def _record(self, active: ActiveTurn, record: ToolRecord) -> None:
        active.records.append(record)
        active.turn_records.append(record)
        active.call_index += 1
        active.interrupt_id = None
        active.phase = "tool"

    def _end_turn(
        self,
        active: ActiveTurn,
        status: TurnStatus,
        *,
        final_text: str = "",
        error: str | None = None,
    ) -> None:
        """Close the active turn: its summary goes to the store's turn log, once.

        Its interrupts (all resolved by now) leave the state; their IDs stay in
        a window so a late repeat of `resolve_interrupt` still answers False.
        """
        summary = turn_summary(active, status)
        summary.final_text = clip(final_text)
        summary.error = error
        self.state.unpublished.append(
            FinishedTurn(
                number=turn_number(active.turn_id),
                summary=turn_json.dump_python(summary, mode="json"),
            )
        )
        done = [
            i for i, v in self.state.interrupts.items() if v.turn_id == active.turn_id
        ]
        for interrupt_id in done:
            del self.state.interrupts[interrupt_id]
        self.state.resolved_interrupts = [
            *self.state.resolved_interrupts,
            *done,
        ][-_KEEP_INTERRUPT_IDS:]
        self.state.active = None

    def _snapshot(self) -> AgentSnapshot:
        return snapshot_of(self.state, type(self).flow_type, "")

    def _emit(self, type_: AgentEventType, data: JsonObject) -> None:
        self._events.append(AgentEvent(type=type_, data=data))

    async def _publish(self) -> None:
        """Project the snapshot and write the session's events to the runtime store."""
        self.state.version += 1
        events, self._events = self._events, []
        first_seq = self.state.event_seq
        self.state.event_seq += len(events)
        snapshot = snapshot_of(
            self.state, type(self).flow_type, workflow.now().isoformat()
        )
        active = self.state.active
        turn_id = (
            active.turn_id
            if active is not None
            else (f"turn-{self.state.turn_counter}" if self.state.turn_counter else "")
        )
        finished = list(self.state.unpublished)
        try:
            await workflow.execute_local_activity(
                type(self).names.publish,
                PublishInput(
                    session_id=self.state.session_id,
                    snapshot=snapshot_json.dump_python(snapshot, mode="json"),
                    events=events,
                    turn_id=turn_id,
                    first_seq=first_seq,
                    finished=finished,
                ),
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
            del self.state.unpublished[: len(finished)]
        except ActivityError:
            # The projection is a cache for clients; the workflow state stays the
            # truth, and unpublished turns go with the next publish.
            workflow.logger.warning(
                "could not publish the snapshot of %s", self.state.session_id
            )

    def _continue_as_new_needed(self) -> bool:
        info = workflow.info()
        limit = type(self).options.continue_as_new_after_events
        return info.is_continue_as_new_suggested() or (
            limit is not None and info.get_current_history_length() >= limit
        )

    async def _continue_as_new(self) -> None:
        # In-flight Updates must finish first, or their callers would see them lost.
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(SessionInput(state=self.state))


def _failed_attempts(err: ActivityError, maximum: int) -> int:
    """How many attempts a failed tool Step ran; 0 when nothing says.

    The activity's own error names its attempt. A timeout (a crashed or hung
    worker) carries none, but Temporal retries timeouts, so a Step that ended
    with its attempts used up ran all of them. Any other failure without the
    activity's details (raised before the handler ran) counts as unknown.
    """
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.details:
        first = cause.details[0]
        if isinstance(first, dict):
            attempt = cast(dict[str, object], first).get("attempt")
            if isinstance(attempt, int):
                return attempt
    if err.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED:
        return maximum
    return 0


def _failure_text(err: ActivityError) -> str:
    cause: BaseException | None = err.cause
    while (
        cause is not None
        and cause.__cause__ is not None
        and not isinstance(cause, ApplicationError)
    ):
        cause = cause.__cause__
    return str(cause) if cause is not None else str(err)


WORKFLOW_BUG_TYPES: tuple[type[Exception], ...] = (
    AssertionError,
    AttributeError,
    IndexError,
    KeyError,
    TypeError,
    ValueError,
)
"""Errors in workflow code that fail the session instead of retrying its task forever.

A plain bug would otherwise leave the session RUNNING with a stuck task. A
nondeterminism error is deliberately not here: after a bad deploy it must keep
retrying, so that a fixed worker can pick the session up again. They are set on
each session workflow's definition, so a worker's other workflows keep their own.
"""


def define_workflow_class(
    flow_type: str,
    options: AgentSessionOptions,
    *,
    supports_images: bool,
    sandboxed: bool = True,
    failure_exception_types: Sequence[type[BaseException]] = WORKFLOW_BUG_TYPES,
) -> type[AgentSessionWorkflow]:
    """A workflow class registered under `flow_type` (the workflow type name).

    Temporal requires `@workflow.run` on the registered class itself, so each
    flow gets its own subclass, made here. It runs in Temporal's sandbox: the
    sandbox imports the class by name from a fresh copy of this module, where
    the module's `__getattr__` builds it again from the spec in `_registry`.
    `sandboxed=False` is for tests that patch a class's methods.
    """
    spec = _registry.register(
        flow_type,
        options,
        supports_images=supports_images,
        sandboxed=sandboxed,
        failure_exception_types=failure_exception_types,
    )
    return _build(spec)


def _build(spec: _registry.FlowSpec) -> type[AgentSessionWorkflow]:
    class_name = spec.class_name

    def __init__(self: AgentSessionWorkflow, input: SessionInput) -> None:
        self._setup(input)

    async def run(self: AgentSessionWorkflow, input: SessionInput) -> None:
        await self._run()

    # Temporal refuses functions defined in a local scope; these belong to the new class.
    __init__.__qualname__ = f"{class_name}.__init__"
    # Real types, not strings: Temporal reads them to decode the workflow input.
    __init__.__annotations__ = {"input": SessionInput, "return": None}
    run.__annotations__ = {"input": SessionInput, "return": None}
    run.__qualname__ = f"{class_name}.run"
    namespace: dict[str, Any] = {
        "__init__": workflow.init(__init__),
        "run": workflow.run(run),
        "flow_type": spec.flow_type,
        "options": spec.options,
        "names": ActivityNames.for_flow(spec.flow_type),
        "supports_images": spec.supports_images,
        "__module__": __name__,
        "__qualname__": class_name,
    }
    cls = type(class_name, (AgentSessionWorkflow,), namespace)
    cls = workflow.defn(
        name=spec.flow_type,
        sandboxed=spec.sandboxed,
        failure_exception_types=list(spec.failure_exception_types),
    )(cls)
    globals()[class_name] = cls  # later imports of this module copy find it directly
    return cls


def __getattr__(name: str) -> Any:
    """Build a flow's class in a sandbox's copy of this module (PEP 562)."""
    spec = _registry.SPECS.get(name)
    if spec is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _build(spec)


__all__ = [
    "WORKFLOW_BUG_TYPES",
    "ActivityNames",
    "AgentSessionWorkflow",
    "define_workflow_class",
]
