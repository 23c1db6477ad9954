"""The session snapshot: what `get_agent_snapshot` returns and the store projects."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pydantic import TypeAdapter

from ..session import StoredMessage, ToolRecord, Usage, UserPrompt, preview
from ._models import (
    ActiveTurn,
    FinishedTurn,
    Interrupt,
    SessionState,
    SessionStatus,
    TurnStatus,
    TurnSummary,
)

SUMMARY_TEXT_LIMIT = 1000
"""Characters of a turn's answer or tool output kept in its summary (state, snapshot)."""


@dataclass(kw_only=True)
class AgentSnapshot:
    """A session at one moment: status, recent turns, approvals waiting, usage, messages.

    The live part (status, the active turn, approvals, usage) comes from the
    workflow; `turns` are the most recent ones, oldest first, read from the
    runtime store's turn log with the active turn last, and `messages` are the
    transcript of those turns. `turn_count` counts every turn of the session;
    page further back with `SessionClient.history`.
    """

    session_id: str
    flow_type: str
    status: SessionStatus
    turns: list[TurnSummary]
    pending_interrupts: list[Interrupt]
    usage: Usage
    pending_prompts: list[str] = field(default_factory=lambda: [])
    transcript_head: str | None = None
    messages: list[StoredMessage] = field(default_factory=lambda: [])
    version: int = 0
    updated_at: str = ""
    turn_count: int = 0
    """Turns the session has started, the active one included."""

    @property
    def idle(self) -> bool:
        """No turn is running: the last one finished, or it waits for a person."""
        return self.status != "running"


snapshot_json: TypeAdapter[AgentSnapshot] = TypeAdapter(AgentSnapshot)
turn_json: TypeAdapter[TurnSummary] = TypeAdapter(TurnSummary)


def session_status(state: SessionState) -> SessionStatus:
    """The status a snapshot reports for `state`."""
    if state.active is None:
        return "running" if state.inbox else "idle"
    if state.active.phase == "await_approval":
        return "waiting_for_approval"
    return "running"


def snapshot_of(state: SessionState, flow_type: str, updated_at: str) -> AgentSnapshot:
    """Project the workflow state; pure, so it runs in workflow code."""
    return AgentSnapshot(
        session_id=state.session_id,
        flow_type=flow_type,
        status=session_status(state),
        # Ended turns the store may not have yet (a publish in flight), then the active one.
        turns=[turn_json.validate_python(t.summary) for t in state.unpublished[-20:]]
        + ([] if state.active is None else [turn_summary(state.active, None)]),
        pending_interrupts=[i for i in state.interrupts.values() if not i.resolved],
        usage=state.usage,
        pending_prompts=[i.preview for i in state.pending if isinstance(i, UserPrompt)],
        transcript_head=state.transcript_head,
        version=state.version,
        updated_at=updated_at,
        turn_count=state.turn_counter,
    )


def turn_number(turn_id: str) -> int:
    """The number in a turn ID (`turn-7` → 7)."""
    return int(turn_id.rpartition("-")[2])


def clip(text: str | None) -> str:
    """`text` cut to `SUMMARY_TEXT_LIMIT` characters for a summary."""
    text = text or ""
    if len(text) <= SUMMARY_TEXT_LIMIT:
        return text
    return text[: SUMMARY_TEXT_LIMIT - 1] + "…"


def clipped_record(record: ToolRecord) -> ToolRecord:
    """A record as a summary keeps it: the output clipped (the transcript has it whole)."""
    return replace(record, output=clip(record.output)) if record.output else record


def turn_summary(active: ActiveTurn, status: TurnStatus | None) -> TurnSummary:
    """The summary of the active turn; `status` None derives it from the phase."""
    if status is None:
        status = (
            "waiting_for_approval" if active.phase == "await_approval" else "running"
        )
    return TurnSummary(
        turn_id=active.turn_id,
        status=status,
        prompts=list(active.prompts),
        tool_calls=[clipped_record(r) for r in active.turn_records],
        usage=active.usage,
    )


def migrate_carried_state(state: SessionState) -> None:
    """Bring a state carried by an earlier release to this one's bounds, in place.

    0.1.x kept every turn's summary in `turns` and every interrupt ever made:
    the finished turns move to `unpublished` (the next publish writes them to
    the store's turn log), the active turn's summary moves into `ActiveTurn`,
    and interrupts of finished turns leave. Pure, so it runs in workflow code.
    """
    if state.turns:
        dump = turn_json.dump_python
        last = state.turns[-1]
        finished = state.turns
        if state.active is not None and last.turn_id == state.active.turn_id:
            finished = state.turns[:-1]
            state.active.prompts = [preview(p) for p in last.prompts]
            state.active.usage = last.usage
        state.unpublished.extend(
            FinishedTurn(
                number=turn_number(t.turn_id),
                summary=dump(
                    replace(
                        t,
                        prompts=[preview(p) for p in t.prompts],
                        tool_calls=[clipped_record(r) for r in t.tool_calls],
                    ),
                    mode="json",
                ),
            )
            for t in finished
        )
        state.turns = []
    active_turn = state.active.turn_id if state.active is not None else None
    for interrupt_id, interrupt in list(state.interrupts.items()):
        if interrupt.turn_id != active_turn:
            del state.interrupts[interrupt_id]
            state.resolved_interrupts.append(interrupt_id)
    state.resolved_interrupts = state.resolved_interrupts[-200:]
