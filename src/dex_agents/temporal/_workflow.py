"""The session workflow: one per session ID, a small state machine over Steps.

Determinism: this module imports only the pure core, the payload models (and
the pure checks of their fields, `_arguments`) and `temporalio.workflow`. Every
branch reads workflow state or Step results; time comes from `workflow.now()`
and IDs from `workflow.uuid4()`. Any change to the logic after a release goes
behind `workflow.patched()`, and the recorded histories in `tests/histories/`
are replayed in CI.

A turn's phases (run_model, tool, await_approval, execute, resume) are kept in
`SessionState.active`, so a session can continue as new in the middle of a turn
and pick up exactly where it was; `dex_agents.session._turns` draws them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar, cast

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    RetryState,
)
from temporalio.exceptions import TimeoutError as StepTimeoutError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from .._errors import BudgetReachedError, InvalidArgumentError, MessageTooLargeError
    from ..session import AgentSessionOptions, _turns
    from ..session._events import AgentEvent, stamped
    from ..session._notification import NotificationKind
    from ..session._records import ToolCall
    from ..session._reminders import interrupt_notification, next_reminder, reminded
    from ..session._state import SessionState, session_status
    from ..session._usage import Usage
    from . import _registry
    from ._arguments import (
        INVALID_ARGUMENT,
        EndSessionUpdate,
        ResolveInterruptUpdate,
        check_cancel_input,
        check_end_input,
        check_message_input,
        check_resolution_input,
    )
    from ._models import (
        ActiveTurn,
        CallToolInput,
        CallToolOutput,
        CancelTurnInput,
        CheckEditInput,
        CheckEditOutput,
        EngineInfo,
        NotifyInput,
        PrimeParkInput,
        PublishInput,
        ReleaseParkInput,
        ResolveInterruptInput,
        RunInput,
        RunModelInput,
        RunModelOutput,
        UserMessageInput,
    )
    from ._parked_route import (
        PARKED_START,
        Parked,
        Stopped,
        ignore_failure,
        never_started,
        resumes_cold,
    )
from ._snapshot import AgentSnapshot, publication, snapshot_of

UNKNOWN_INTERRUPT = "UnknownInterrupt"
INVALID_MESSAGE = "InvalidUserMessage"
QUEUE_FULL = "MessageQueueFull"
SESSION_BUSY = "SessionBusy"
SESSION_ENDED = "SessionEnded"
RECORD_RESOLUTION = "record_resolution"
"""The Signal a client sends when no worker took its `resolve_interrupt` Update."""
# A failure crosses the engine as its error type's name: these name the types.
TOO_LARGE = MessageTooLargeError.__name__
BUDGET_REACHED = BudgetReachedError.__name__
INVALID_EDIT = "InvalidEdit"
"""The failure type of an edit the runner refused; its detail names the field."""
EDIT_UNCHECKED = "EditUnchecked"
"""The failure type of an edit the worker could not check (nothing was resolved)."""
NO_IMAGES = "ImagesNotSupported"
EXPIRED = "RequestExpired"
"""The failure type of a request a worker took after its `expires_at` (nothing applied)."""

_Result = TypeVar("_Result")
_Input = TypeVar("_Input")

_ERROR_TYPES: dict[_turns.RefusalReason, str] = {
    "invalid_message": INVALID_MESSAGE,
    "queue_full": QUEUE_FULL,
    "unknown_interrupt": UNKNOWN_INTERRUPT,
    "session_busy": SESSION_BUSY,
    "session_ended": SESSION_ENDED,
    "invalid_resolution": INVALID_ARGUMENT,
}
"""The failure type clients match on for each refusal of a validator."""
NOTIFY_LIMIT = timedelta(seconds=30)
"""Limit for one attempt of a notification Step (a receiver's answer)."""

# Patches, one per change to workflow logic since the first release (0.1.0).
_PATCH_RECORD_ATTEMPTS = "tool-record-attempts"
"""Tool records say how many attempts their Step ran (they said 0 before)."""
_PATCH_NO_START_PUBLISH = "no-turn-start-publish"
"""A turn's start is published with its next change, not in a round trip before RunModel."""
_PATCH_BUDGET_PAUSE = "budget-pause"
"""A spent budget pauses the turn for a new limit (it failed the turn before)."""
_PATCH_NOTIFY = "notify-interrupts"
"""Approvals are told to `on_interrupt` (new, reminded, expired)."""
_PATCH_HOT_RESUME = "hot-resume"
"""A resumed segment goes to the worker that holds it parked (`hot_resume_window`)."""
_PATCH_AT_START = "patches-at-start"
"""The run asks this one patch as it starts, and a yes stands for every patch above.

A patch marks the history (and Temporal upserts the `TemporalChangeVersion`
search attribute) the first time a run asks it, so each patch asked on a
turn's path added two events and a visibility write to a new session's first
turns. A run started on this release or later answers every patch above from
this one marker, written in its first workflow task; a run started before it
(no marker at its start) asks each patch where it always did, so its history
replays unchanged. A patch added after this one is asked with
`workflow.patched()` as before: answering it from this one would skip its
marker in runs that began patched, and they would not replay.
"""
_PATCHES_BEFORE_START = frozenset(
    {
        _PATCH_RECORD_ATTEMPTS,
        _PATCH_NO_START_PUBLISH,
        _PATCH_BUDGET_PAUSE,
        _PATCH_NOTIFY,
        _PATCH_HOT_RESUME,
    }
)
"""The patches `_PATCH_AT_START` stands for; never add one."""
_PATCH_PARK_CARRIED = "park-crosses-continue-as-new"
"""A run takes the park its input carries (`RunInput.parked`).

Asked only when the input holds one, so runs without one replay unchanged; a
run whose first tasks an older worker ran (which drops the field, and resumes
cold) has no marker, and a later worker replaying it resumes cold too.
"""
_PATCH_APPROVAL_WITH_STEP = "approval-with-step"
"""An approved call's events go with its tool Step, not in a publish before it.

Asked only when an approval settles a call, so other runs replay unchanged.
"""
_PATCH_PRIME_PARK = "prime-park"
"""An approved call's tool Step primes the park beside it (`_prime_park`).

Asked only when a park is held for the call, so runs without one replay unchanged.
"""
_PATCH_REPUBLISH = "republish-while-idle"
"""An idle session publishes again what a failed publish left (its finished turns).

Asked only once a publish failed and the session is idle, so a history gets
its marker (and its timers) only then.
"""
_REPUBLISH_FIRST = timedelta(seconds=5)
_REPUBLISH_MOST = timedelta(minutes=5)
"""The wait before an idle session publishes again, doubling from the first."""
_PATCH_AT_START_2 = "patches-at-start-2"
"""`_PATCH_AT_START` again, for the patches after it that a turn's path asks.

The same scheme: a run that starts on this release or later answers each of
`_PATCHES_AT_START_2` from this one marker in its first workflow task, so an
approval does not pay a marker and a visibility write; a run that started
before asks each where it applies. Never add to it: a later patch on a turn's
path gets a marker of its own, or a new one of these.
"""
_PATCHES_AT_START_2 = frozenset({_PATCH_APPROVAL_WITH_STEP, _PATCH_PRIME_PARK})
_PATCH_PUBLISH_IDLE_START = "publish-idle-start"
"""A session started with no message is published at once, so lists show it.

Before, the store learned of a session at its first turn's end: one started
idle (to wait for a person's first message) was missing from `dex-agents
sessions` and the web app's lists until then. Asked only in a session's first
run when it starts with no work, so other histories replay unchanged.
"""
_PATCH_WORK_BEFORE_CONTINUE = "work-before-continue-as-new"
"""An idle session that waits to continue as new runs a turn a message brings meanwhile.

It waits for its Updates and notification Steps to finish first; a
`send_and_wait` (or a `wait_for_idle` behind a queued message) that arrived
during that wait finished only after a turn no run would start, so the session
hung until it was ended by force. Asked only when work arrives during that wait
(while a notification Step retries, a receiver down), so other histories replay
unchanged; a history without its marker waits on as before.
"""


@dataclass(frozen=True, kw_only=True)
class ActivityNames:
    """The Step names of one flow type; persisted in history, never rename silently."""

    run_model: str
    call_tool: str
    call_single_attempt_tool: str
    publish: str
    check_edit: str
    notify: str
    release_park: str
    prime_park: str

    @classmethod
    def for_flow(cls, flow_type: str) -> ActivityNames:
        """Names scoped by flow type, so several flows share one worker."""
        return cls(
            run_model=f"{flow_type}.run_model",
            call_tool=f"{flow_type}.call_tool",
            call_single_attempt_tool=f"{flow_type}.call_single_attempt_tool",
            publish=f"{flow_type}.publish",
            check_edit=f"{flow_type}.check_edit",
            notify=f"{flow_type}.notify_interrupt",
            release_park=f"{flow_type}.release_park",
            prime_park=f"{flow_type}.prime_park",
        )


class AgentSessionWorkflow:
    """Base of every flow's workflow class; `create_agent_session_flow` subclasses it.

    It interprets the turn machine of `dex_agents.session`: the machine's pure
    functions decide every change of state, and this class runs the Steps
    they ask for (activities, waits, publishes, continue-as-new), answers the
    RPCs and supplies what the machine may not make itself: the time
    (`workflow.now()`), new IDs (`workflow.uuid4()`) and patch answers.
    """

    flow_type: ClassVar[str]
    options: ClassVar[AgentSessionOptions]
    names: ClassVar[ActivityNames]
    supports_images: ClassVar[bool]
    """Whether the runner has `build_user_message_with_images`, fixed at flow creation."""

    def _setup(self, input: RunInput) -> None:
        self._first_run = input.state is None
        """The session's first run (not one continue-as-new started)."""
        self.state = _turns.starting_state(
            input.state, session_id=workflow.info().workflow_id
        )
        self._events: list[AgentEvent] = []
        """Events not written yet: they go with the next publish, or the Step that
        carries it (a RunModel Step's events; an approved call's tool Step)."""
        self._finished = False
        """The ended session's last publish is done: its run completes next."""
        self._notifying = 0
        """Notification Steps in flight: a run waits for them before it closes."""
        self._parked: Parked | None = (
            input.parked
            if input.parked is not None and workflow.patched(_PATCH_PARK_CARRIED)
            else None
        )
        """Where the resumed segment of the last deferral waits parked, if it does.

        Carried through continue-as-new (a run's input holds it), so a session
        that continued as new while it waited for approval still takes the park.
        """
        self._patched_at_start = workflow.patched(_PATCH_AT_START)
        """Whether the patches before `_PATCH_AT_START` hold for this run (see it)."""
        self._patched_at_start_2 = workflow.patched(_PATCH_AT_START_2)
        """Whether the patches of `_PATCH_AT_START_2` hold for this run (see it)."""

    def _patched_before_start(self, patch_id: str) -> bool:
        """`workflow.patched(patch_id)` of a patch before `_PATCH_AT_START`.

        Answered at once in a run that began patched; a later patch is a bug here.
        """
        if patch_id not in _PATCHES_BEFORE_START:
            raise RuntimeError(
                f"patch {patch_id!r} came after {_PATCH_AT_START!r}: ask it with "
                "`workflow.patched()`"
            )
        return self._patched_at_start or workflow.patched(patch_id)

    def _patched_since_start(self, patch_id: str) -> bool:
        """`workflow.patched(patch_id)` of a patch `_PATCH_AT_START_2` stands for."""
        if patch_id not in _PATCHES_AT_START_2:
            raise RuntimeError(
                f"patch {patch_id!r} is not one of {_PATCH_AT_START_2!r}: ask it "
                "with `workflow.patched()`"
            )
        return self._patched_at_start_2 or workflow.patched(patch_id)

    # ----- RPCs ---------------------------------------------------------------

    @workflow.update
    async def send_user_message(self, input: UserMessageInput) -> bool:
        """Queue a user message; the next turn (or the current one's successor) sends it.

        Returns False, and queues nothing, for a message with images when the
        runner cannot send images.
        """
        return self._answer(
            _turns.queue_message(
                self.state,
                input.prompt,
                update_id=_update_id(),
                images_supported=self.supports_images,
            )
        )

    @send_user_message.validator
    def _validate_user_message(self, input: UserMessageInput) -> None:
        if self._applied_already():
            return
        # A validator does no I/O, so whether the runner takes images is
        # decided in the handler.
        _refuse_arguments(check_message_input, input)
        _refuse(_turns.check_message(self.state, input.prompt))

    @workflow.update
    async def send_and_wait(self, input: UserMessageInput) -> AgentSnapshot:
        """Queue a user message and answer once its turn is over: one round trip.

        "Over" means what `idle_snapshot` means: answered, failed, or waiting for
        approval (a message queued behind an approval answers at once: the
        session waits for a person). A retry of an Update already applied (across continue-as-new)
        queues nothing and waits only for the session to be idle.
        """
        target = self.state.turn_counter + 1
        outcome = _turns.queue_message(
            self.state,
            input.prompt,
            update_id=_update_id(),
            images_supported=self.supports_images,
        )
        if not outcome.answer:
            raise ApplicationError(
                "this session's runner cannot send images; send text only, or give "
                "the agent definition a media store",
                type=NO_IMAGES,
                non_retryable=True,
            )
        if outcome.state is self.state:
            target = 0  # already queued by the first try of this Update
        self.state = outcome.state
        # Over: its own turn ended, or the session waits for a person (an approval
        # of this turn or of an earlier one, which its turn queues behind).
        await workflow.wait_condition(
            lambda: (
                session_status(self.state) in ("waiting_for_approval", "budget_reached")
                or (
                    (self.state.turn_counter >= target or self.state.end_requested)
                    and session_status(self.state) != "running"
                )
            )
        )
        return self._snapshot()

    @send_and_wait.validator
    def _validate_send_and_wait(self, input: UserMessageInput) -> None:
        if self._applied_already():
            return
        _refuse_arguments(check_message_input, input)
        _refuse(_turns.check_message(self.state, input.prompt))
        # Refused here, not in the handler: a validator's refusal writes no history.
        if input.prompt.images and not self.supports_images:
            raise ApplicationError(
                "this session's runner cannot send images; send text only, or give "
                "the agent definition a media store",
                type=NO_IMAGES,
                non_retryable=True,
            )

    @workflow.update
    async def resolve_interrupt(self, input: ResolveInterruptUpdate) -> bool:
        """Approve or reject a pending call; a repeat returns False and changes nothing.

        Its argument decodes as `ResolveInterruptInput` always did (leniently, so
        accepted Updates replay alike), noting what the validator refuses.
        An approval with an edited input is checked by the runner first (a
        local activity on this worker: the tool's schema, its policy decided
        again); a refused edit fails the Update and the call stays pending.
        No `workflow.patched`: the check runs only for an Update with an
        edited input, which no earlier history has.
        """
        edited_call = await self._checked_edit(input) if input.edited else None
        return self._answer(
            _turns.apply_resolution(
                self.state,
                interrupt_id=input.interrupt_id,
                approved=input.approved,
                rejection_message=input.rejection_message,
                update_id=_update_id(),
                resolved_by=input.resolved_by,
                edited_call=edited_call,
                new_spend_limit=input.new_spend_limit,
            )
        )

    async def _checked_edit(self, input: ResolveInterruptUpdate) -> ToolCall | None:
        """The waiting call with the edit, as the runner checked it; None if none waits."""
        active, call = self.state.active, None
        if active is not None:
            call = _turns.waiting_call(self.state, input.interrupt_id)
        if active is None or call is None:
            return None  # resolved meanwhile: `apply_resolution` answers False
        try:
            out = await workflow.execute_local_activity(
                self.names.check_edit,
                CheckEditInput(
                    session_id=self.state.session_id,
                    turn_id=active.turn_id,
                    call=call,
                    edited_input=input.edited_input,
                    edited_input_ref=input.edited_input_ref,
                ),
                result_type=CheckEditOutput,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
        except _LOCAL_ACTIVITY_FAILURES as err:
            raise ApplicationError(
                f"the edit of interrupt {input.interrupt_id!r} could not be checked "
                f"({_failure_text(err)}); nothing was resolved: send it again",
                type=EDIT_UNCHECKED,
                non_retryable=True,
            ) from None
        if out.problem is not None or out.call is None:
            raise ApplicationError(
                out.problem or "the runner refused the edit",
                out.field,
                type=INVALID_EDIT,
                non_retryable=True,
            )
        return out.call

    @resolve_interrupt.validator
    def _validate_resolve(self, input: ResolveInterruptUpdate) -> None:
        if self._applied_already():
            return
        # A validator rejection writes no history: an unknown ID changes nothing.
        _refuse_expired(input.expires_at)
        _refuse_arguments(check_resolution_input, input)
        _refuse(_turns.check_resolution(self.state, input.interrupt_id))
        _refuse(_budget_answer(self.state, input))

    @workflow.signal(name=RECORD_RESOLUTION)
    def record_resolution(self, input: ResolveInterruptInput) -> None:
        """`resolve_interrupt` as a Signal: the durable path when no worker runs.

        An Update waits in the server's memory until a worker takes it; a
        Signal is written to history at once, with no worker running. A client
        whose Update no worker took in time sends this, so the resolution
        applies when a worker starts. It resolves through the same
        `apply_resolution`, so one that arrives twice (this Signal and the
        Update it stands for, or two approvals) applies once: the first wins.
        A Signal cannot be refused, so what the Update's validator would refuse
        (an ID the session never had, an ended session) is logged and ignored.
        No `workflow.patched`: the handler issues no commands by itself, and a
        history without this Signal replays as before.
        """
        refusal = _turns.check_resolution(self.state, input.interrupt_id)
        if refusal is None:
            refusal = _budget_answer(self.state, input)
        if refusal is None and input.edited:
            # An edit needs the runner's check, which a Signal cannot wait for;
            # the client never records one. Applied without it, the model's
            # own input would run.
            refusal = _turns.Refusal(
                reason="invalid_message",
                message=f"a recorded approval of {input.interrupt_id!r} with an "
                "edited input (approve with edits through the Update)",
            )
        if refusal is not None:
            workflow.logger.warning(
                "ignored a recorded resolution: %s", refusal.message
            )
            return
        self._answer(
            _turns.apply_resolution(
                self.state,
                interrupt_id=input.interrupt_id,
                approved=input.approved,
                rejection_message=input.rejection_message,
                update_id=None,
                resolved_by=input.resolved_by,
                new_spend_limit=input.new_spend_limit,
            )
        )

    @workflow.update
    async def end_session(self, input: EndSessionUpdate) -> bool:
        """End the session; True once it ended, False if it had ended already.

        It answers after the session's last publish (status `ended`, the
        `session_ended` event), and the workflow then completes: its history
        and the store's data stay readable. A running turn stops after its
        current Step first (see `dex_agents.session._turns.end_session`).
        No `workflow.patched`: the commands it leads to (the last publish, the
        completion) follow only this Update, which no earlier history has.
        """
        refusal = _turns.check_end(self.state, force=input.force)
        _refuse(refusal)  # again: a message may have been queued since the validator
        ended = self._answer(
            _turns.end_session(self.state, reason=input.reason, update_id=_update_id())
        )
        await workflow.wait_condition(lambda: self._finished)
        return ended

    @end_session.validator
    def _validate_end(self, input: EndSessionUpdate) -> None:
        if self._applied_already():
            return
        _refuse_expired(input.expires_at)
        _refuse_arguments(check_end_input, input)
        _refuse(_turns.check_end(self.state, force=input.force))

    @workflow.update
    async def cancel_turn(self, input: CancelTurnInput) -> bool:
        """Stop the running turn; False when no turn runs (or it was asked already).

        It answers once the request is applied, not once the turn stopped: a
        running model segment is cancelled at once (its CLI is killed within a
        heartbeat), a waiting approval is closed, and a tool Step in flight
        finishes first. The turn then ends `cancelled` (see
        `dex_agents.session._turns.request_cancel`).
        No `workflow.patched`: the cancellation it leads to follows only this
        Update, which no earlier history has.
        """
        return self._answer(
            _turns.request_cancel(
                self.state,
                reason=input.reason,
                update_id=_update_id(),
                cancelled_by=input.cancelled_by,
            )
        )

    @cancel_turn.validator
    def _validate_cancel(self, input: CancelTurnInput) -> None:
        if self._applied_already():
            return
        _refuse_expired(input.expires_at)
        _refuse_arguments(check_cancel_input, input)
        _refuse(_turns.check_cancel(self.state))

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
        parked = self._parked  # the caller compares `until` with its own clock
        return EngineInfo(
            sandboxed=workflow.unsafe.in_sandbox(),
            runs=self.state.runs,
            parked_on=parked.queue if parked else None,
            parked_until=parked.until if parked else None,
        )

    def _applied_already(self) -> bool:
        """Whether the running Update is a retry of one this session applied.

        Its ID is in the window the state carries (`SessionState.update_ids`,
        across continue-as-new), and Temporal dedupes an ID only within a run: a
        client's retry after the session continued as new reaches the validator
        again. A validator accepts it, whatever it would refuse now (a full
        queue, an ended session, its `expires_at` past: "nothing was applied"
        would be false), and the handler answers what the first one applied,
        applying nothing again. Validators never replay, so this needs no patch.
        """
        info = workflow.current_update_info()
        return info is not None and info.id in self.state.update_ids

    def _answer(self, outcome: _turns.UpdateOutcome) -> bool:
        self.state = outcome.state
        return outcome.answer

    # ----- main loop ----------------------------------------------------------

    async def _run(self) -> None:
        if self.state.unpublished:
            await self._publish()  # turns a 0.1.x state carried, or a failed publish's
        elif (
            self._first_run
            and not _turns.has_work(self.state)
            and workflow.patched(_PATCH_PUBLISH_IDLE_START)
        ):
            # A start's Updates ran first (their handlers come before `run`):
            # no work means no message came with the start.
            await self._publish()
        while True:
            await self._wait_for_work()
            if _turns.session_finished(self.state):
                await self._finish()
                return
            if not _turns.has_work(self.state):
                await self._continue_as_new(idle=True)
                continue  # the session ended, or has work, instead of continuing as new
            if self.state.active is None:
                self._start_turn()
                if not self._patched_before_start(_PATCH_NO_START_PUBLISH):
                    await self._publish()
            await self._drive()

    def _ready(self) -> bool:
        return (
            _turns.has_work(self.state)
            or self._continue_as_new_needed()
            or self.state.end_requested
        )

    async def _wait_for_work(self) -> None:
        """Wait for work; meanwhile publish again what a failed publish left.

        A finished turn whose publish failed (the store was down) is kept in the
        state and shown live, but the store's history lacks it until a publish
        succeeds: an idle session would otherwise never make one.
        """
        wait = _REPUBLISH_FIRST
        while (
            self.state.unpublished
            and not self._ready()
            and workflow.patched(_PATCH_REPUBLISH)
        ):
            try:
                await workflow.wait_condition(self._ready, timeout=wait)
                return
            except TimeoutError:
                await self._publish()
                wait = min(wait * 2, _REPUBLISH_MOST)
        await workflow.wait_condition(self._ready)

    async def _finish(self) -> None:
        """The ended session's last publish; the run completes once Updates answered."""
        self._release_park()
        await self._follow(_turns.finish_session(self.state))
        await workflow.wait_condition(lambda: self._notifying == 0)
        self._finished = True
        await workflow.wait_condition(workflow.all_handlers_finished)

    def _start_turn(self) -> None:
        self._apply(_turns.start_turn(self.state))

    async def _drive(self) -> None:
        """Follow the turn machine until the active turn ends."""
        while self.state.active is not None:
            await self._follow(
                _turns.advance(
                    self.state,
                    self.options,
                    now=workflow.now(),
                    budget_pauses=self._budget_pauses(),
                )
            )
        self._release_park()

    def _release_park(self) -> None:
        """Close a park no segment will take (its turn ended without resuming).

        Fire and forget, on the parked worker's own queue: a worker that is
        gone took its park with it, and the park's window closes it anyway.
        """
        parked, self._parked = self._parked, None
        if parked is None or parked.until <= workflow.now():
            return
        handle = workflow.start_activity(
            self.names.release_park,
            ReleaseParkInput(
                session_id=self.state.session_id, segment_id=parked.segment_id
            ),
            task_queue=parked.queue,
            schedule_to_start_timeout=PARKED_START,
            start_to_close_timeout=timedelta(seconds=15),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
        handle.add_done_callback(ignore_failure)

    def _prime_park(self, step: _turns.CallToolStep) -> None:
        """Let the parked segment go on with `step`'s call while the Step runs.

        Fire and forget, beside the tool Step, on the parked worker's queue:
        its CLI then waits for the call's record instead of for its Step to
        end (see `_parking`). A park it does not reach resumes as it would
        have; asked behind `_PATCH_PRIME_PARK` only where it applies.
        """
        parked = self._parked
        if (
            parked is None
            or parked.until <= workflow.now()
            or step.call.arguments_ref is not None
            or not self._patched_since_start(_PATCH_PRIME_PARK)
        ):
            return
        handle = workflow.start_activity(
            self.names.prime_park,
            PrimeParkInput(
                session_id=self.state.session_id,
                segment_id=parked.segment_id,
                call=step.call,
            ),
            task_queue=parked.queue,
            schedule_to_start_timeout=PARKED_START,
            start_to_close_timeout=timedelta(seconds=15),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
        handle.add_done_callback(ignore_failure)

    def _budget_pauses(self) -> bool:
        """Whether a spent budget pauses the turn (asked only once it is spent)."""
        return not _turns.budget_spent(
            self.state, self.options
        ) or self._patched_before_start(_PATCH_BUDGET_PAUSE)

    def _apply(self, transition: _turns.Transition) -> _turns.Step | None:
        """Take a transition's state and events in; return the Step it asks for."""
        self.state = transition.state
        # Stamped with the workflow's time: a replay stamps the same.
        now = workflow.now()
        self._events.extend(stamped(e, now) for e in transition.events)
        return transition.step

    async def _follow(self, transition: _turns.Transition) -> None:
        """Take `transition` in and run the Step it asks for (and what that leads to)."""
        match self._apply(transition):
            case None:
                pass
            case _turns.RunModelStep():
                assert self.state.active is not None
                await self._run_model(self.state.active)
            case _turns.CallToolStep() as step:
                await self._execute(step)
            case _turns.OpenInterruptStep():
                await self._open(budget=False)
            case _turns.OpenBudgetStep():
                await self._open(budget=True)
            case _turns.AwaitApprovalStep() as step:
                await self._await_approval(step)
            case _turns.PublishStep():
                await self._publish()
            case _turns.ContinueAsNewStep():
                await self._continue_as_new()

    async def _open(self, *, budget: bool) -> None:
        """Name a new interrupt, open it (a call's, or the `budget`'s), tell `on_interrupt`."""
        interrupt_id = f"intr_{workflow.uuid4().hex[:16]}"
        await self._follow(
            _turns.open_interrupt(
                self.state,
                self.options,
                interrupt_id=interrupt_id,
                now=workflow.now(),
                budget=budget,
            )
        )
        self._notify("created", interrupt_id)

    # ----- Steps --------------------------------------------------------------

    async def _run_model(self, active: ActiveTurn) -> None:
        """Run the model segment `active` is at (`_turns.model_step`) and take its result in."""
        del active
        opts = self.options
        step = _turns.model_step(self.state, self.options)
        # Events not published yet (the turn's start) go with the Step: no extra round trip.
        events, first_seq = self._take_events()
        input = RunModelInput.for_step(
            step, session_id=self.state.session_id, events=events, first_seq=first_seq
        )
        attempts = opts.run_model_attempts
        parked, self._parked = self._parked, None
        outcome: RunModelOutput | ActivityError | Stopped | None = None
        if parked is not None and parked.holds(step, workflow.now()):
            outcome = await self._segment(
                self._start_step(
                    self.names.run_model,
                    input,
                    RunModelOutput,
                    step_id=f"{_turns.step_execution_id(step)}/parked",
                    timeout=opts.run_model_limit,
                    attempts=1,
                    task_queue=parked.queue,
                    schedule_to_start_timeout=PARKED_START,
                )
            )
            if isinstance(outcome, ActivityError) and resumes_cold(outcome):
                # The park's worker is gone or its attempt failed: the cold path,
                # counting an attempt that ran as the segment's first.
                ran = 0 if never_started(outcome) else 1
                if attempts > ran:
                    attempts -= ran
                    input = replace(input, attempt_offset=ran)
                    outcome = None
        if outcome is None:
            outcome = await self._segment(
                self._start_step(
                    self.names.run_model,
                    input,
                    RunModelOutput,
                    step_id=_turns.step_execution_id(step),
                    timeout=opts.run_model_limit,
                    attempts=attempts,
                )
            )
        if isinstance(outcome, Stopped):
            await self._follow(
                _turns.cancel_turn(self.state, streamed_text=outcome.streamed_text)
            )
            return
        if isinstance(outcome, ActivityError):
            await self._model_failed(outcome, attempts)
            return
        if (
            outcome.kind == "tool_calls_requested"
            and outcome.parked_on is not None
            and self._patched_before_start(_PATCH_HOT_RESUME)
        ):
            self._parked = Parked(
                queue=outcome.parked_on,
                segment_id=outcome.segment_id,
                until=workflow.now() + opts.hot_resume_window,
            )
        await self._follow(outcome.applied_to(self.state))

    async def _segment(
        self, handle: workflow.ActivityHandle[RunModelOutput]
    ) -> RunModelOutput | ActivityError | Stopped:
        """What a model Step came to: its output, its failure, or a `cancel_turn` stop."""
        await workflow.wait_condition(
            lambda: handle.done() or _turns.cancel_requested(self.state)
        )
        if _turns.cancel_requested(self.state):
            return Stopped(streamed_text=await _stopped(handle))
        try:
            return await handle
        except ActivityError as err:
            return err

    async def _model_failed(self, err: ActivityError, attempts: int) -> None:
        opts = self.options
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.type == BUDGET_REACHED:
            await self._follow(
                _turns.model_failed(
                    self.state,
                    opts,
                    error=_failure_text(err),
                    budget_reached=True,
                    usage=_spent(cause),
                )
            )
            return
        failed = _turns.model_failed(
            self.state,
            opts,
            error=_failure_text(err),
            timed_out=isinstance(cause, StepTimeoutError),
            too_large=isinstance(cause, ApplicationError) and cause.type == TOO_LARGE,
            attempts=_failed_attempts(err, attempts),
        )
        await self._follow(failed)

    async def _execute(self, step: _turns.CallToolStep) -> None:
        """Run the current call in its tool Step and record what came of it."""
        single = step.tool_step == "call_single_attempt_tool"
        self._prime_park(step)
        # A publish not made yet (the call's approval) goes with the Step.
        publish = self._publication(finished=False) if self._events else None
        try:
            out = await self._start_step(
                self.names.call_single_attempt_tool if single else self.names.call_tool,
                CallToolInput.for_step(
                    step, session_id=self.state.session_id, publish=publish
                ),
                CallToolOutput,
                step_id=_turns.step_execution_id(step),
                timeout=step.timeout,
                attempts=step.attempts,
            )
            counted = self._patched_before_start(_PATCH_RECORD_ATTEMPTS)
            recorded = out.recorded_in(
                self.state, attempts=out.attempt if counted else 0
            )
        except ActivityError as err:
            counted = self._patched_before_start(_PATCH_RECORD_ATTEMPTS)
            attempts = _failed_attempts(err, step.attempts) if counted else 0
            recorded = _turns.record_unknown_outcome(
                self.state, error=_failure_text(err), attempts=attempts
            )
        await self._follow(recorded)

    def _start_step(
        self,
        name: str,
        input: object,
        result_type: type[_Result],
        *,
        step_id: str,
        timeout: timedelta,
        attempts: int,
        task_queue: str | None = None,
        schedule_to_start_timeout: timedelta | None = None,
    ) -> workflow.ActivityHandle[_Result]:
        """Start one activity Step (one ID on every attempt); cancelling it waits.

        Cancelling waits for the attempt: waiting lets a cancelled attempt report what it streamed; a killed
        worker's attempt ends with its heartbeat timeout instead.
        """
        opts = self.options
        return workflow.start_activity(
            name,
            input,
            result_type=result_type,
            activity_id=step_id,
            task_queue=task_queue,
            schedule_to_start_timeout=schedule_to_start_timeout,
            start_to_close_timeout=timeout,
            heartbeat_timeout=opts.heartbeat_timeout,
            # What is not worth another attempt is decided by the error's type
            # where it is raised into the engine (`_activities._engine_error`).
            retry_policy=RetryPolicy(
                initial_interval=opts.retry_interval, maximum_attempts=attempts
            ),
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )

    async def _await_approval(self, step: _turns.AwaitApprovalStep) -> None:
        """Wait for a person, the deadline or continue-as-new; the machine settles it.

        With `interrupt_reminder`, `on_interrupt` hears again each interval
        while it waits, and once more when the deadline passes.
        """
        timed_out = False
        interval = self.options.interrupt_reminder if self._notifies() else None
        deadline = None if step.timeout is None else workflow.now() + step.timeout
        while True:
            timeout = step.timeout if deadline is None else deadline - workflow.now()
            reminder = None
            if interval is not None:
                due = next_reminder(self.state.interrupts[step.interrupt_id], interval)
                reminder = max(due - workflow.now(), timedelta(0))
                if timeout is None or reminder < timeout:
                    timeout = reminder
                else:
                    reminder = None
            try:
                await workflow.wait_condition(
                    lambda: (
                        _turns.approval_settled(self.state, step.interrupt_id)
                        or self._continue_as_new_needed()
                    ),
                    timeout=None if timeout is None else max(timeout, timedelta(0)),
                )
            except TimeoutError:
                if reminder is not None:
                    self._notify("reminder", step.interrupt_id)
                    self.state = reminded(self.state, step.interrupt_id)
                    continue
                timed_out = True
            break
        expired = timed_out and not self.state.interrupts[step.interrupt_id].resolved
        if expired:
            self._notify("expired", step.interrupt_id)
        settled = _turns.settle_approval(self.state, timed_out=timed_out)
        active = settled.state.active
        if (
            isinstance(settled.step, _turns.PublishStep)
            and active is not None
            and active.phase == "execute"
            and self._patched_since_start(_PATCH_APPROVAL_WITH_STEP)
        ):
            # An approved call: its Step is next, and carries the approval's events.
            self._apply(replace(settled, step=None))
            return
        await self._follow(settled)

    def _notifies(self) -> bool:
        """Whether this session sends notifications (a patch: none before 0.2)."""
        return self.options.on_interrupt is not None and self._patched_before_start(
            _PATCH_NOTIFY
        )

    def _notify(self, kind: NotificationKind, interrupt_id: str) -> None:
        """Start the notification Step of `interrupt_id`; the session does not wait for it.

        A failed notification (its attempts used up) is logged and dropped: a
        receiver that is down must not hold a person's session.
        """
        if not self._notifies():
            return
        interrupt = self.state.interrupts[interrupt_id]
        notification = interrupt_notification(
            interrupt,
            kind=kind,
            session_id=self.state.session_id,
            flow_type=self.flow_type,
            now=workflow.now(),
        )
        handle = workflow.start_activity(
            self.names.notify,
            NotifyInput(
                notification=notification, arguments_ref=interrupt.arguments_ref
            ),
            activity_id=f"notify/{notification.notification_id}",
            start_to_close_timeout=NOTIFY_LIMIT,
            retry_policy=RetryPolicy(
                initial_interval=self.options.retry_interval,
                maximum_interval=timedelta(minutes=1),
                maximum_attempts=self.options.notification_attempts,
            ),
        )
        self._notifying += 1

        async def settle() -> None:
            try:
                await handle
            except ActivityError as err:
                workflow.logger.warning(
                    "dropped notification %s: %s",
                    notification.notification_id,
                    _failure_text(err),
                )
            finally:
                self._notifying -= 1

        asyncio.get_running_loop().create_task(settle())

    def _publication(self, *, finished: bool = True) -> PublishInput:
        """The next publish: a new snapshot version, and the events not written yet.

        Without `finished`, it leaves the turns not in the log yet for a publish
        whose success the workflow learns (a Step's publish is best effort).
        """
        self.state = replace(self.state, version=self.state.version + 1)
        events, first_seq = self._take_events()
        publish = publication(
            self.state,
            self.flow_type,
            updated_at=workflow.now().isoformat(),
            events=events,
            first_seq=first_seq,
        )
        return publish if finished else replace(publish, finished=[])

    async def _publish(self) -> None:
        """Project the snapshot and write the session's events to the runtime store."""
        publish = self._publication()
        try:
            await workflow.execute_local_activity(
                self.names.publish,
                publish,
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
            published = len(publish.finished)
            self.state = replace(
                self.state, unpublished=self.state.unpublished[published:]
            )
        except _LOCAL_ACTIVITY_FAILURES:
            # The projection is a cache for clients; the workflow state stays the
            # truth, and unpublished turns go with the next publish.
            workflow.logger.warning(
                "could not publish the snapshot of %s", self.state.session_id
            )

    # ----- helpers ------------------------------------------------------------

    def _take_events(self) -> tuple[list[AgentEvent], int]:
        """The events not written yet, and the session's sequence number before them."""
        events, self._events = self._events, []
        first_seq = self.state.event_seq
        self.state = replace(self.state, event_seq=first_seq + len(events))
        return events, first_seq

    def _snapshot(self) -> AgentSnapshot:
        return snapshot_of(self.state, self.flow_type, "")

    def _continue_as_new_needed(self) -> bool:
        info = workflow.info()
        limit = self.options.continue_as_new_after_events
        return info.is_continue_as_new_suggested() or (
            limit is not None and info.get_current_history_length() >= limit
        )

    async def _continue_as_new(self, *, idle: bool = False) -> None:
        """Hand the state to a new run once no Update and no notification is in flight.

        An `end_session` Update finishes only with the session: it returns then.
        So does an `idle` session (none of its turns active) that meanwhile got
        work: the Update that brought it may wait for its turn, which only this
        run can start (`_PATCH_WORK_BEFORE_CONTINUE`). An approval's wait has
        work all along, and waits as before.
        """

        def settled() -> bool:
            # In-flight Updates must finish first, or their callers would see them lost.
            return (
                workflow.all_handlers_finished() and self._notifying == 0
            ) or self.state.end_requested

        await workflow.wait_condition(
            lambda: settled() or (idle and _turns.has_work(self.state))
        )
        if not settled() and not workflow.patched(_PATCH_WORK_BEFORE_CONTINUE):
            await workflow.wait_condition(settled)  # a history from before the patch
        if self.state.end_requested or not settled():
            return
        workflow.continue_as_new(RunInput(state=self.state, parked=self._parked))


async def _stopped(handle: workflow.ActivityHandle[RunModelOutput]) -> str:
    """Cancel a model Step (if it still runs) and return the text it had streamed."""
    if not handle.done():
        handle.cancel()
    try:
        out = await handle
    except (ActivityError, asyncio.CancelledError):
        return ""  # its worker died, or it stopped before it could report
    return out.final_text


def _spent(cause: ApplicationError) -> Usage | None:
    """What a segment stopped at its budget spent (its error's details say)."""
    if cause.details and isinstance(cause.details[0], dict):
        usage = cast(dict[str, object], cause.details[0]).get("usage")
        if isinstance(usage, dict):
            try:
                return Usage(**cast(dict[str, Any], usage))
            except TypeError:
                return None
    return None


def _update_id() -> str | None:
    """The running Update's ID (None outside an Update)."""
    info = workflow.current_update_info()
    return info.id if info is not None else None


def _budget_answer(
    state: SessionState, input: ResolveInterruptInput
) -> _turns.Refusal | None:
    return _turns.check_budget_answer(
        state,
        input.interrupt_id,
        approved=input.approved,
        new_spend_limit=input.new_spend_limit,
        edited=input.edited,
    )


def _refuse_expired(expires_at: str | None) -> None:
    """Refuse a request its client stopped waiting for (validators never replay).

    The time compared is the workflow task's, the server's clock: a client on
    another machine relies on clocks kept in step (NTP), within its grace.
    """
    if expires_at is None:
        return
    try:
        expiry = datetime.fromisoformat(expires_at)
    except ValueError:
        expiry = None
    if expiry is None or expiry.tzinfo is None or workflow.now() > expiry:
        raise ApplicationError(
            f"this request expired at {expires_at} before a worker took it; its "
            "client was told nothing was applied, so nothing is: send it again",
            type=EXPIRED,
            non_retryable=True,
        )


def _refuse(refusal: _turns.Refusal | None) -> None:
    """Raise a validator's refusal as the failure clients match on."""
    if refusal is not None and refusal.reason == "invalid_resolution":
        raise ApplicationError(
            refusal.message,
            "new_spend_limit",
            type=INVALID_ARGUMENT,
            non_retryable=True,
        )
    if refusal is not None:
        raise ApplicationError(
            refusal.message, type=_ERROR_TYPES[refusal.reason], non_retryable=True
        )


def _refuse_arguments(check: Callable[[_Input], None], input: _Input) -> None:
    """Raise an argument `check`'s refusal as the failure clients match on.

    Its detail names the argument, so the client raises `InvalidArgumentError`.
    """
    try:
        check(input)
    except InvalidArgumentError as err:
        raise ApplicationError(
            err.message, err.argument, type=INVALID_ARGUMENT, non_retryable=True
        ) from None


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


def _failure_text(err: ActivityError | ApplicationError) -> str:
    cause: BaseException | None = err.cause if isinstance(err, ActivityError) else err
    while (
        cause is not None
        and cause.__cause__ is not None
        and not isinstance(cause, ApplicationError)
    ):
        cause = cause.__cause__
    # An activity's own error already names its type (`ValueError: ...`);
    # str() would name it twice.
    if isinstance(cause, ApplicationError) and cause.message.startswith(
        f"{cause.type}: "
    ):
        return cause.message
    return str(cause) if cause is not None else str(err)


_LOCAL_ACTIVITY_FAILURES = (ActivityError, ApplicationError)
"""What a local activity that failed for good raises in workflow code.

Its last attempt's failure arrives as it was raised (an `ApplicationError`),
not wrapped in an `ActivityError` as a regular activity's is: caught as an
`ActivityError` alone, a publish that failed three times failed the session.
"""


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

    # Methods of the subclass built below, so its protected members are theirs to use.
    def __init__(self: AgentSessionWorkflow, input: RunInput) -> None:
        self._setup(input)  # pyright: ignore[reportPrivateUsage]

    async def run(self: AgentSessionWorkflow, input: RunInput) -> None:
        await self._run()  # pyright: ignore[reportPrivateUsage]

    # Temporal refuses functions defined in a local scope; these belong to the new class.
    __init__.__qualname__ = f"{class_name}.__init__"
    # Real types, not strings: Temporal reads them to decode the workflow input.
    __init__.__annotations__ = {"input": RunInput, "return": None}
    run.__annotations__ = {"input": RunInput, "return": None}
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
