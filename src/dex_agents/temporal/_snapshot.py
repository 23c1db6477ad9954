"""The session snapshot: what `get_agent_snapshot` returns and the store projects."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..session import StoredMessage, Usage
from ._models import Interrupt, SessionState, SessionStatus, TurnSummary


@dataclass(kw_only=True)
class AgentSnapshot:
    """A session at one moment: status, turns, approvals waiting, usage and messages.

    `messages` come from the runtime store (the transcript of completed turns);
    the workflow's own query leaves them empty and the client fills them in.
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

    @property
    def idle(self) -> bool:
        """No turn is running: the last one finished, or it waits for a person."""
        return self.status != "running"


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
        turns=list(state.turns),
        pending_interrupts=[i for i in state.interrupts.values() if not i.resolved],
        usage=state.usage,
        pending_prompts=[
            str(item.get("text", ""))
            for item in state.pending
            if item.get("kind") != "turn_failure_note"
        ],
        transcript_head=state.transcript_head,
        version=state.version,
        updated_at=updated_at,
    )
