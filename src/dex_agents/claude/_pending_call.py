"""The deferred call a resumed segment answers, known at its start or later.

A cold resume knows the call's final record before its CLI starts. A parked
resume (see `_park`) starts its CLI while the decision is still open: its
PreToolUse hook for the deferred call waits here until the session adopts the
park with the final record, or closes it (the window passed, the worker
stops), and then answers `defer` so that the CLI ends cleanly.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from ..session._json import JsonObject
from ..session._records import ToolRecord

CallKind = Literal["custom", "cli"]
"""`custom`: served by the adapter's tool server; `cli`: runs inside the CLI."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingCall:
    """The deferred call a resumed segment answers from its final record."""

    tool_use_id: str
    kind: CallKind
    tool_name: str
    """The name the CLI calls it by."""
    record: ToolRecord


@dataclass(frozen=True, kw_only=True, slots=True)
class PrimedCall:
    """An approved custom call as its Step runs it, before the Step's record exists.

    The hook can answer it at once (a custom call replays as `allow` with its
    recorded input, whatever the record says); the tool server then waits for
    the record, which the adoption brings.
    """

    tool_name: str
    """The bare custom tool name."""
    arguments: JsonObject
    """The input the Step runs it with (the record's input)."""


class AwaitedCall:
    """The pending call of a parked segment: set once the session adopts it."""

    def __init__(self, tool_use_id: str) -> None:
        self.tool_use_id = tool_use_id
        """The deferred call's tool use ID, known from the run state."""
        self._answered = asyncio.Event()
        self._adopted = asyncio.Event()
        self._call: PendingCall | None = None
        self._primed: PrimedCall | None = None
        self._closed = False
        self.reached = asyncio.Event()
        """Set when the CLI asks about the call: the park is ready."""

    @property
    def call(self) -> PendingCall | None:
        """The pending call once adopted; None before (and after a close)."""
        return self._call

    @property
    def closed(self) -> bool:
        """Whether the park was closed instead of adopted."""
        return self._closed

    @property
    def primed(self) -> PrimedCall | None:
        """The approved call its hook may allow before the adoption (see `prime`)."""
        return self._primed

    def adopt(self, call: PendingCall) -> None:
        """Answer the waiting hook with `call`'s final record."""
        if self._adopted.is_set() or self._closed:
            raise RuntimeError("this parked segment was already answered or closed")
        self._call = call
        self._adopted.set()
        self._answered.set()

    def prime(self, call: PrimedCall) -> bool:
        """Let the hook allow the approved call now; False once answered or closed."""
        if self._answered.is_set():
            return False
        self._primed = call
        self._answered.set()
        return True

    def close(self) -> bool:
        """Let the waiting hook answer `defer`; False if it was adopted already."""
        if self._adopted.is_set():
            return False
        if self._closed:
            return True
        self._closed = True
        self._answered.set()
        self._adopted.set()
        return True

    async def wait(self) -> PendingCall | PrimedCall | None:
        """The adopted call, the primed one, or None once closed; the hook waits here."""
        self.reached.set()
        await self._answered.wait()
        if self._call is None and self._primed is not None and not self._closed:
            return self._primed
        return self._call

    async def adopted(self) -> PendingCall | None:
        """The adopted call, or None once closed (after a prime, the hook's fallback)."""
        await self._adopted.wait()
        return self._call
