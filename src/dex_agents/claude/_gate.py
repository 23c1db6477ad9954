"""The per-segment decision table: one permission decision per tool use ID.

Everything that lets a tool run in a segment goes through this table: the
adapter's PreToolUse hook writes a decision, the custom tool server runs a call
only under the tool use ID and tool name that a decision permits, and
`can_use_tool` answers from it. Keeping the invariants in one place is what makes
"what runs is what was approved" checkable:

- each tool use ID gets one decision per segment; a later one is refused;
- a segment defers at most one call, because CLI 2.1.327 resumes only the last
  deferred call of a segment (the others would never get a result);
- a recorded call replays only as its own tool, and at most once;
- a primed call (a parked segment's approved call, allowed before its record
  exists) is served only once its `replay` decision is made.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal

from ..session import ToolCall
from ..session._records import ToolRecord

DecisionKind = Literal["allow", "defer", "deny", "replay", "ask"]
"""`allow` runs inside the segment, `defer` ends it, `replay` answers a resumed
call from its record, `ask` routes a resumed CLI call to `can_use_tool` to be
denied with its record's text."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """How one tool use ID was decided in this segment."""

    kind: DecisionKind
    tool_name: str
    """The tool's name as the CLI calls it (`Bash`, `mcp__tools__lookup`)."""
    custom_name: str | None = None
    """The bare custom tool name when the adapter's server serves the call."""
    arguments: dict[str, Any] = field(default_factory=lambda: {})
    """The input the call runs with: final input for allow, recorded for replay."""
    record: ToolRecord | None = None
    """The final record a replay or an ask answers from."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Deferral:
    """The one call this segment defers, as the session will run it."""

    tool_use_id: str
    decision: Decision
    call: ToolCall


class ToolCallGate:
    """Decisions of one segment, keyed by tool use ID."""

    def __init__(self) -> None:
        self._decisions: dict[str, Decision] = {}
        self._deferral: Deferral | None = None
        self._replayed: set[str] = set()
        self._asked: set[str] = set()
        self._primed: dict[str, asyncio.Event] = {}

    @property
    def deferral(self) -> Deferral | None:
        """The call this segment deferred, if any."""
        return self._deferral

    def decision(self, tool_use_id: str) -> Decision | None:
        """The decision made for `tool_use_id`, if any."""
        return self._decisions.get(tool_use_id)

    def decisions(self) -> dict[str, Decision]:
        """Every decision of the segment, by tool use ID."""
        return dict(self._decisions)

    def decide(self, tool_use_id: str, decision: Decision) -> bool:
        """Record the one decision of `tool_use_id`; False if it already has one."""
        if decision.kind == "defer":
            raise ValueError("use `defer` to record a deferral")
        if tool_use_id in self._decisions:
            return False
        self._decisions[tool_use_id] = decision
        if (decided := self._primed.get(tool_use_id)) is not None:
            decided.set()
        return True

    def prime(self, tool_use_id: str) -> None:
        """Mark `tool_use_id` allowed before its decision: its served call waits for it."""
        self._primed.setdefault(tool_use_id, asyncio.Event())

    async def decided(self, tool_use_id: str) -> None:
        """Wait until a primed `tool_use_id` has its decision (at once if not primed)."""
        decided = self._primed.get(tool_use_id)
        if decided is not None:
            await decided.wait()

    def defer(self, tool_use_id: str, decision: Decision, call: ToolCall) -> bool:
        """Record the segment's one deferral; False if the ID or the segment has one."""
        if decision.kind != "defer" or call.tool_call_id != tool_use_id:
            raise ValueError("a deferral needs a `defer` decision for its own call")
        if tool_use_id in self._decisions or self._deferral is not None:
            return False
        self._decisions[tool_use_id] = decision
        self._deferral = Deferral(tool_use_id=tool_use_id, decision=decision, call=call)
        return True

    def permit_served_call(self, tool_use_id: str, custom_name: str) -> Decision | None:
        """The decision that lets the custom tool server run this call, if any.

        Only an `allow` or a not yet served `replay` of the same custom tool
        permits a call; a replay is served at most once per segment.
        """
        decision = self._decisions.get(tool_use_id)
        if decision is None or decision.custom_name != custom_name:
            return None
        match decision.kind:
            case "allow":
                return decision
            case "replay" if tool_use_id not in self._replayed:
                self._replayed.add(tool_use_id)
                return decision
            case _:
                return None

    def take_ask(self, tool_use_id: str) -> Decision | None:
        """The `ask` decision of `tool_use_id` for its one `can_use_tool` answer."""
        decision = self._decisions.get(tool_use_id)
        if decision is None or decision.kind != "ask" or tool_use_id in self._asked:
            return None
        self._asked.add(tool_use_id)
        return decision
