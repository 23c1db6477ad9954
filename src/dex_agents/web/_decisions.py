"""Who approved or rejected a call: recorded by the web app in the runtime store.

`resolve_interrupt` carries no approver yet, so the app records each
decision it makes itself, as two small blobs of the session in the runtime
store (one named by the interrupt, one by the turn and tool call, so the
events and the turn records both find it). A blob never changes once
written, and only the request whose `resolve_interrupt` answered True writes
them: the record names the one who resolved it, or nobody (a decision made
elsewhere, by the CLI or a deadline, has none).

The write follows the resolution, so a follower can read the workflow's
`interrupt_resolved` event before the record exists: the app keeps its own
decisions in flight in memory too, and an app sharing the store with other
app processes shows the approver once the record is written (snapshot,
history, inbox), and in the event only when it is already there.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import TypeAdapter

from ..stores import RuntimeStore


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """One approval or rejection made through the web app."""

    interrupt_id: str
    turn_id: str
    tool_call_id: str
    approved: bool
    by: str
    """The token's name (`anonymous (loopback)` on a `dev` app)."""
    at: str
    """When (ISO 8601, UTC)."""
    rejection_message: str | None = None


_DECISION = TypeAdapter(Decision)


def _by_interrupt(interrupt_id: str) -> str:
    return f"web-decision/{interrupt_id}"


def _by_call(turn_id: str, tool_call_id: str) -> str:
    return f"web-decision/{turn_id}/{tool_call_id}"


class Decisions:
    """Records and finds decisions; one per app (it holds those in flight)."""

    def __init__(self, store: RuntimeStore) -> None:
        self.store = store
        self._in_flight: dict[tuple[str, str], Decision] = {}

    def begin(self, session_id: str, decision: Decision) -> None:
        """Note a decision about to be sent, so live events can name its maker."""
        self._in_flight[(session_id, decision.interrupt_id)] = decision

    def abandon(self, session_id: str, interrupt_id: str) -> None:
        """Forget a decision that was not applied (refused, or resolved before)."""
        self._in_flight.pop((session_id, interrupt_id), None)

    async def record(self, session_id: str, decision: Decision) -> None:
        """Write the decision that resolved its interrupt (idempotent: same bytes)."""
        data = _DECISION.dump_json(decision)
        await self.store.put_blob(
            session_id, _by_interrupt(decision.interrupt_id), data
        )
        await self.store.put_blob(
            session_id, _by_call(decision.turn_id, decision.tool_call_id), data
        )
        self.abandon(session_id, decision.interrupt_id)

    async def of_interrupt(self, session_id: str, interrupt_id: str) -> Decision | None:
        """The recorded (or in-flight) decision about `interrupt_id`, if this app made one."""
        flying = self._in_flight.get((session_id, interrupt_id))
        if flying is not None:
            return flying
        return await self._read(session_id, _by_interrupt(interrupt_id))

    async def of_call(
        self, session_id: str, turn_id: str, tool_call_id: str
    ) -> Decision | None:
        """The recorded decision about one tool call of a turn, if the app made one."""
        return await self._read(session_id, _by_call(turn_id, tool_call_id))

    async def _read(self, session_id: str, blob_id: str) -> Decision | None:
        try:
            data = await self.store.get_blob(session_id, blob_id)
        except KeyError:
            return None
        return _DECISION.validate_json(data)
