"""The session snapshot: what `SessionClient.snapshot` returns and the store projects.

The summary helpers (`clip`, `turn_number`, `turn_summary`) and the status
live with the state in `dex_agents.session`, whose turn machine needs them;
they are re-exported here for the engine's other modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import TypeAdapter

from ..session import AgentEvent, StoredMessage
from ..session._pending import UserPrompt
from ..session._state import (
    Interrupt,
    SessionState,
    SessionStatus,
    TurnSummary,
    clip,
    session_status,
    turn_number,
    turn_summary,
)
from ..session._usage import Usage
from ._models import PublishInput


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
    """Prompts not in a completed turn yet: the active turn's, then the queued ones."""
    transcript_head: str | None = None
    messages: list[StoredMessage] = field(default_factory=lambda: [])
    version: int = 0
    updated_at: str = ""
    turn_count: int = 0
    """Turns the session has started, the active one included."""
    queued_prompts: list[str] | None = None
    """The prompts that wait for the next turn (the active turn sends the others
    of `pending_prompts`); None in a projection written before 0.2."""

    @property
    def idle(self) -> bool:
        """No turn is running: the last one finished, or it waits for a person."""
        return self.status != "running"


snapshot_json: TypeAdapter[AgentSnapshot] = TypeAdapter(AgentSnapshot)
turn_json: TypeAdapter[TurnSummary] = TypeAdapter(TurnSummary)


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
        queued_prompts=[
            i.preview
            for i in state.pending[state.active.pending_count if state.active else 0 :]
            if isinstance(i, UserPrompt)
        ],
    )


def publication(
    state: SessionState,
    flow_type: str,
    *,
    updated_at: str,
    events: list[AgentEvent],
    first_seq: int,
) -> PublishInput:
    """What a publish writes: the snapshot, the events and the turns not in the log yet.

    The events belong to the active turn, or to the latest one once it ended.
    """
    if state.active is not None:
        turn_id = state.active.turn_id
    else:
        turn_id = f"turn-{state.turn_counter}" if state.turn_counter else ""
    snapshot = snapshot_of(state, flow_type, updated_at)
    return PublishInput(
        session_id=state.session_id,
        snapshot=snapshot_json.dump_python(snapshot, mode="json"),
        events=events,
        turn_id=turn_id,
        first_seq=first_seq,
        finished=list(state.unpublished),
    )


__all__ = [
    "AgentSnapshot",
    "clip",
    "publication",
    "session_status",
    "snapshot_json",
    "snapshot_of",
    "turn_json",
    "turn_number",
    "turn_summary",
]
