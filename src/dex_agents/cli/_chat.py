"""`dex-agents chat`: a terminal conversation with one durable session.

The chat owns nothing the session needs: messages and approvals go to the
session's workflow through the client RPCs, and everything shown comes from the
runtime store's event log (live text, tool calls, approvals, turn ends) and the
session's snapshot (history). So leaving the chat, or killing it, loses nothing:
coming back replays the turn in progress from its first event and asks again for
any approval still waiting.

Reading a line blocks, so the chat is a plain loop that reads input and runs
each network step on one `asyncio.Runner`. Ctrl-C while a turn runs (or while
the chat waits for the model) stops the turn (`cancel_turn`) and comes back to
the prompt once it ended; a second Ctrl-C before that (or after a stop that
found the server gone), or Ctrl-C at a prompt, leaves the chat (the session
keeps running) instead of killing anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import select
import shlex
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal, TypeVar, cast

import click
from rich.console import Console
from rich.text import Text
from temporalio.service import RPCError

from .._errors import (
    EngineError,
    InvalidArgumentError,
    NoWorkerError,
)
from ..session._events import EventRecord, ModelRetryEvent
from ..session._json import JsonObject
from ..session._state import Interrupt
from ..stores import RuntimeStore
from ..temporal import SessionClient
from ..temporal._client import with_recent_turns
from ..temporal._flow import AgentSessionFlow
from ..temporal._snapshot import AgentSnapshot
from . import _render as render
from ._context import (
    Connection,
    Outage,
    Target,
    connect,
    describe_session,
    open_store,
    recorded_name,
    require_worker,
    unreachable,
    worker_seen,
)
from ._errors import CommandError, command_words, suggest, translated_errors

_QUIT = frozenset({"/quit", "/exit", "/q"})
_HELP = (
    "type a message and press Enter; the agent's answer streams below.\n"
    "approvals: a (approve), e (edit the call's input as JSON, then approve it),\n"
    "r (reject, then an optional message for the agent); a spend limit reached:\n"
    "type a new limit in USD, or r to decline (the turn fails).\n"
    "Ctrl-C while a turn runs stops it (it ends cancelled) and comes back here.\n"
    "/quit, Ctrl-D, or Ctrl-C at a prompt (or a second one while a turn stops)\n"
    "leaves: the session keeps running; come back any time."
)
_POLL = 0.03
_SILENCE_CHECK = 5.0
"""Seconds without events before the chat checks the worker and the session."""
_OUTAGE_PROBE = 1.0
"""Seconds between health checks while the server is gone (each fails at once)."""
_SERVER_PROBE = 2.0
"""Seconds between health checks while a turn is silent, so a server that went
away (`dev` stopped) is said within seconds, not at the next silence check."""
_STOP_TIMEOUT = 10.0
"""Seconds Ctrl-C waits for the session's worker to take the stop."""

State = Literal["idle", "running", "approval"]


class _Leave(Exception):
    """The user chose to leave while an approval waits."""


class Chat:
    """One chat: the connection, the store, and what has been shown so far."""

    def __init__(
        self,
        out: Console,
        conn: Connection,
        store: RuntimeStore,
        session_id: str,
        *,
        flow: AgentSessionFlow | None,
        flow_type: str,
        task_queue: str,
        exists: bool,
    ) -> None:
        self.out = out
        self.conn = conn
        self.store = store
        self.session_id = session_id
        self.flow = flow
        self.flow_type = flow_type
        self.task_queue = task_queue
        self.exists = exists
        self.state: State = "idle"
        self.cursor = 0
        self._line: Literal["", "text", "reasoning"] = ""
        self._turn_text = False
        self._attempts: dict[tuple[str, str], int] = {}
        self._interrupts: dict[str, JsonObject] = {}
        self._pending: set[str] = set()
        self.asking: Interrupt | None = None
        """The approval being asked about, named when the user leaves."""
        self.expired_ahead = False
        """The answer `answered_elsewhere` found was the approval's deadline."""
        self.cancelled_ahead = False
        """The answer `answered_elsewhere` found closed it: the turn was stopped."""
        self.outage = Outage(
            conn, self._say, meanwhile="this chat waits and reconnects"
        )
        """Says once per outage that the server is gone, and when it is back."""
        self._next_probe = 0.0
        self.stopping = False
        """Ctrl-C asked to stop the running turn, which has not ended yet: the
        next Ctrl-C leaves the chat."""
        self.stop_unsent = False
        """Ctrl-C could not stop the turn, the server being gone: the next
        Ctrl-C leaves the chat (until the server is back)."""

    # -- opening and closing ----------------------------------------------------

    @classmethod
    async def open(
        cls,
        target: Target,
        session_id: str,
        flow: AgentSessionFlow | None,
        out: Console,
    ) -> Chat:
        """Connect, check the session and its worker, and open the store.

        Raises:
            CommandError: no server, no worker, an ended session, a new session
                without `--agent`, or an `--agent` of another flow.
        """
        conn = await connect(target)
        info = await describe_session(conn.client, session_id)
        if info is None and flow is None:
            raise CommandError(
                f"session {session_id!r} does not exist yet; pass `--agent "
                "module:flow` to start it"
            )
        if info is not None and not info.running:
            raise CommandError(
                f"session {session_id!r} has ended (its workflow is {info.status}); "
                f"see its history with `{suggest('show', session_id)}`"
            )
        if info is not None and flow is not None and info.flow_type != flow.flow_type:
            raise CommandError(
                f"session {session_id!r} runs flow {info.flow_type!r}, but `--agent` "
                f"is flow {flow.flow_type!r}; leave out `--agent` or use another "
                "session ID"
            )
        if info is not None:
            flow_type, task_queue = info.flow_type, info.task_queue
        else:
            assert flow is not None
            flow_type, task_queue = flow.flow_type, flow.task_queue
        await require_worker(conn.client, flow_type, task_queue)
        store = await open_store(target)
        return cls(
            out,
            conn,
            store,
            session_id,
            flow=flow,
            flow_type=flow_type,
            task_queue=task_queue,
            exists=info is not None,
        )

    async def close(self) -> None:
        """Release the store."""
        await self.store.close()

    async def intro(self) -> None:
        """Print the header and the history; set where following starts."""
        out = self.out
        out.print(
            Text.assemble(
                ("dex-agents chat  ", "bold"),
                ("session ", "dim"),
                (self.session_id, "bold cyan"),
                ("  flow ", "dim"),
                self.flow_type,
                ("  on ", "dim"),
                self.conn.address,
            ),
            soft_wrap=True,
        )
        out.print(Text("/help for help, /quit or Ctrl-D to leave", style="dim"))
        if not self.exists:
            out.print(Text("new session: your first message starts it", style="dim"))
            return
        snapshot = await self._snapshot()
        if snapshot is None:
            return
        busy = snapshot.status != "idle"
        finished = snapshot.turns[:-1] if busy else snapshot.turns
        if finished:
            out.print(Text(f"── history: {len(finished)} turn(s) ──", style="dim"))
            for turn in finished:
                render.print_turn(out, turn, header=False)
        end, turn_start = await self._scan()
        self.cursor = end
        if busy:
            out.print(Text("── turn in progress ──", style="dim"))
            if snapshot.turns:
                for prompt in snapshot.turns[-1].prompts:
                    render.print_prompt(out, prompt)
            # Replay the running turn from its first event, so its text, tool
            # calls and approval show exactly as if the chat had never left.
            self.cursor = turn_start
            self.state = "running"
            for interrupt in snapshot.pending_interrupts:
                self._pending.add(interrupt.interrupt_id)
                self._interrupts[interrupt.interrupt_id] = {
                    "tool_name": interrupt.tool_name,
                    "kind": interrupt.kind,
                }

    async def _scan(self) -> tuple[int, int]:
        """The last cursor of the session, and the cursor before its last turn began."""
        cursor = turn_start = 0
        while batch := await self.store.read_events(self.session_id, after=cursor):
            for event in batch:
                if event.type == "turn_started":
                    turn_start = event.cursor - 1
            cursor = batch[-1].cursor
        return cursor, turn_start

    # -- talking ----------------------------------------------------------------

    async def send(self, text: str) -> None:
        """Send a message (starting the session with it if new)."""
        async with render.Progress(self.out, "sending"):
            if not await self._reachable("your message was not sent"):
                return
            try:
                # With the store: a message over 2 KiB travels by reference.
                sessions = SessionClient(self.conn.client, self.flow, self.store)
                if self.exists:
                    await sessions.send_user_message(self.session_id, text)
                else:
                    assert self.flow is not None
                    await sessions.start(self.session_id, initial_message=text)
                    self.exists = True
            except RPCError as err:
                if not unreachable(err):
                    raise
                self._lost("your message was not sent")
                return
        self.state = "running"

    async def resolve(self, interrupt: Interrupt, decision: Decision) -> bool:
        """Answer an approval; the outcome line comes from the event log.

        Returns:
            False when the session refused the edit (the call still waits and
            the refusal, naming the field, is printed); True otherwise.
        """
        async with render.Progress(self.out, "sending your answer"):
            if not await self._reachable("your answer was not sent"):
                return True
            try:
                sessions = SessionClient(self.conn.client, store=self.store)
                changed = await sessions.resolve_interrupt(
                    self.session_id,
                    interrupt_id=interrupt.interrupt_id,
                    approved=decision.approved,
                    rejection_message=decision.message,
                    resolved_by=recorded_name(None),
                    edited_input=decision.edited_input,
                    new_spend_limit=decision.new_spend_limit,
                )
            except InvalidArgumentError as err:
                # An `InvalidEditError` too: its argument is `edited_input`.
                if err.argument not in ("edited_input", "new_spend_limit"):
                    raise
                if err.argument == "new_spend_limit":
                    self._note(f"✗ the new limit was refused: {err}", "red")
                    return False
                self._note(
                    f"✗ the edit was refused and the call still waits: {err}", "red"
                )
                return False
            except RPCError as err:
                if not unreachable(err):
                    raise
                self._lost("your answer was not sent")
                return True
        if not changed:
            self.out.print(
                Text("that approval was already answered elsewhere", style="yellow")
            )
        self.state = "running"
        return True

    async def stop(self) -> bool | None:
        """Stop the running turn (Ctrl-C): whether it was applied; None if not sent.

        The turn's end (`turn_cancelled`) comes through the event log, as
        every other event does.
        """
        async with render.Progress(self.out, "stopping the turn"):
            if not await self.outage.check():
                self._stop_unsent()
                return None
            loop = asyncio.get_running_loop()
            deadline = loop.time() + _STOP_TIMEOUT
            sessions = SessionClient(self.conn.client)
            try:
                while True:
                    if await sessions.cancel_turn(
                        self.session_id,
                        cancelled_by=recorded_name(None),
                        timeout=max(0.1, deadline - loop.time()),
                    ):
                        return True
                    # No turn runs: none is left, or the message sent just now
                    # has not started its turn yet (then stop that one).
                    snapshot = await sessions.snapshot(self.session_id, turns=0)
                    if snapshot.status != "running" or loop.time() > deadline:
                        return False
                    await asyncio.sleep(0.1)
            except NoWorkerError:
                self._note(
                    command_words(
                        f"no worker took the stop within {_STOP_TIMEOUT:g} s, so the "
                        "turn was not stopped; it goes on once a worker runs "
                        f"(`{suggest('worker', raw='--agent module:flow')}`)"
                    ),
                    "yellow",
                )
                return None
            except RPCError as err:
                if not unreachable(err):
                    raise
                self.outage.report_lost()
                self._stop_unsent()
                return None

    def _stop_unsent(self) -> None:
        """Ctrl-C found the server gone: say so; the next Ctrl-C leaves the chat."""
        self.stop_unsent = True
        self._note(
            "the turn was not stopped: the Temporal server does not answer (the "
            "turn goes on once it is back); Ctrl-C again leaves the chat, or wait "
            "here for the server",
            "yellow",
        )

    async def answered_elsewhere(self, interrupt_id: str) -> bool:
        """Whether the event log says `interrupt_id` was answered (or the session ended).

        It only looks ahead: the events stay unread, so `follow` still shows them.
        """
        ahead = await self.store.read_events(self.session_id, after=self.cursor)
        for e in ahead:
            if e.type == "session_ended" or (
                e.type == "interrupt_resolved"
                and e.data.get("interrupt_id") == interrupt_id
            ):
                self.expired_ahead = bool(e.data.get("expired"))
                self.cancelled_ahead = render.closed_by_cancel(e.data)
                return True
        return False

    async def follow(self) -> list[Interrupt]:
        """Show events until the session is idle, or approvals wait for an answer.

        Returns:
            The approvals to ask about; empty once the session is idle.
        """
        progress = render.Progress(self.out, "working")
        loop = asyncio.get_running_loop()
        silent_since = loop.time()
        next_check = _SILENCE_CHECK
        try:
            while True:
                batch = await self.store.read_events(self.session_id, after=self.cursor)
                turn_ended = False
                for event in batch:
                    progress.hide()
                    self.cursor = event.cursor
                    turn_ended = self._show(event) or turn_ended
                if batch:
                    silent_since, next_check = loop.time(), _SILENCE_CHECK
                    more = await self.store.read_events(
                        self.session_id, after=self.cursor, limit=1
                    )
                    if more:
                        continue
                if turn_ended or (self._pending and not batch):
                    snapshot = await self._snapshot()
                    if snapshot is not None:
                        last = snapshot.turns[-1] if snapshot.turns else None
                        if (
                            turn_ended
                            and not self._turn_text
                            and last
                            and last.final_text
                        ):
                            # A runner that streams no text: show the final answer.
                            render.print_answer(self.out, last.final_text)
                        waiting = [
                            i
                            for i in snapshot.pending_interrupts
                            if i.interrupt_id in self._pending
                        ]
                        if waiting:
                            self.state = "approval"
                            return waiting
                        if snapshot.status == "idle" and not self._pending:
                            self.state = "idle"
                            return []
                if not batch:
                    if not self._line:
                        progress.show()
                    if self.outage.lost:
                        if loop.time() >= self._next_probe:
                            self._next_probe = loop.time() + _OUTAGE_PROBE
                            if await self.outage.check():
                                self.stop_unsent = False  # Ctrl-C stops it again
                    elif loop.time() - silent_since > next_check:
                        next_check += 2 * _SILENCE_CHECK
                        await self._check_alive(progress)
                    elif (
                        loop.time() - silent_since > _SERVER_PROBE
                        and loop.time() >= self._next_probe
                    ):
                        # Only the health check (a second at most): the
                        # server's going away is said at once, not 10 s later.
                        self._next_probe = loop.time() + _SERVER_PROBE
                        await self.outage.check()
                    await asyncio.sleep(_POLL)
        finally:
            progress.hide()
            self._end_line()

    async def _check_alive(self, progress: render.Progress) -> None:
        """During a long silence: say why if no worker runs; fail if the session ended."""
        if not await self.outage.check():
            return
        try:
            info = await describe_session(self.conn.client, self.session_id)
            seen = await worker_seen(self.conn.client, self.task_queue)
        except RPCError as err:
            if not unreachable(err):
                raise
            self.outage.report_lost()
            return
        if info is not None and not info.running:
            raise CommandError(
                f"session {self.session_id!r} ended while following it (its "
                f"workflow is {info.status})"
            )
        if not seen:
            progress.hint(
                command_words(
                    f"no worker is serving flow {self.flow_type!r}; start one with "
                    f"`{suggest('worker', raw='--agent module:flow')}`"
                )
            )

    async def _snapshot(self) -> AgentSnapshot | None:
        """The live snapshot from the session, else the store's projection."""
        try:
            if self.outage.lost:
                raise EngineError("the Temporal server is gone")
            sessions = SessionClient(self.conn.client, store=self.store)
            return await sessions.snapshot(self.session_id)
        except (EngineError, RPCError) as err:
            if isinstance(err, RPCError):
                if not unreachable(err):
                    raise
                self.outage.report_lost()
            projected = await self.store.get_snapshot(self.session_id)
            if projected is None:
                return None
            return await with_recent_turns(
                render.snapshot_from_json(projected), self.store
            )

    # -- the server going away --------------------------------------------------

    async def _reachable(self, otherwise: str) -> bool:
        """Whether the server answers now; if not, say so and that nothing was sent.

        A quick health check first: a call to a server that is gone retries
        for about 10 s before it fails.
        """
        if await self.outage.check():
            return True
        self._note(f"{otherwise}; send it again once the server is back", "yellow")
        return False

    def _lost(self, otherwise: str) -> None:
        self.outage.report_lost()
        self._note(f"{otherwise}; send it again once the server is back", "yellow")

    def _say(self, line: Text) -> None:
        self._end_line()
        self.out.print(line, soft_wrap=True)

    # -- rendering events -------------------------------------------------------

    def _show(self, event: EventRecord) -> bool:
        """Print one event; True when it ends a turn."""
        key = (event.turn_id, event.step_execution_id)
        seen = self._attempts.get(key)
        if seen is not None and event.attempt < seen:
            return False  # a late write of an attempt that was already retried
        if seen is not None and event.attempt > seen:
            self._end_line()
            self._note(
                f"↻ retrying ({event.step_execution_id}, attempt {event.attempt}); "
                "its output starts over",
                "yellow",
            )
        self._attempts[key] = event.attempt
        data = event.data
        match event.type:
            case "turn_started":
                self._turn_text = False
            case "model_retry":
                retry = event.payload()
                if isinstance(retry, ModelRetryEvent):
                    self._end_line()
                    self._note(f"↻ {retry.text()}", "yellow")
            case "text_delta":
                self._write("text", str(data.get("text", "")))
            case "reasoning_delta":
                self._write("reasoning", str(data.get("text", "")))
            case "tool_call_started":
                self._end_line()
                self.out.print(
                    Text.assemble(
                        ("⚙ ", "magenta"),
                        (str(data.get("tool_name")), "bold"),
                        " ",
                        (render.arguments_text(_object(data.get("arguments"))), "dim"),
                    ),
                    soft_wrap=True,
                )
            case "tool_call_finished":
                self._end_line()
                status = str(data.get("status", ""))
                by_runner = "/run_model/" in event.step_execution_id
                if status in ("rejected", "expired") and not by_runner:
                    return False  # the approval's own line says it, with why
                # A failed call shows the tool's error; an unknown outcome, what
                # the tool raised or what ended its Step; a call the agent's own
                # hook denied (no approval line), why.
                detail = (
                    data.get("error")
                    or data.get("output")
                    or (
                        data.get("rejection_message")
                        if status in ("cancelled", "rejected")
                        else ""
                    )
                    or ""
                )
                self.out.print(
                    Text.assemble(
                        "  ↳ ",
                        (
                            status.replace("_", " "),
                            {"finished": "green", "cancelled": "yellow"}.get(
                                status, "red"
                            ),
                        ),
                        f": {render.preview(str(detail))}" if detail else "",
                    ),
                    soft_wrap=True,
                )
            case "tool_call_attempt_failed" if data.get("retrying"):
                self._end_line()
                self._note(
                    f"  ↳ attempt {data.get('attempt')} failed, retrying: "
                    f"{render.preview(str(data.get('error', '')))}",
                    "yellow",
                )
            case "interrupt_created":
                self._end_line()
                interrupt_id = str(data.get("interrupt_id"))
                self._interrupts[interrupt_id] = data
                self._pending.add(interrupt_id)
            case "interrupt_resolved":
                self._end_line()
                interrupt_id = str(data.get("interrupt_id"))
                self._pending.discard(interrupt_id)
                asked = self._interrupts.get(interrupt_id, {})
                tool = asked.get("tool_name", "")
                who = data.get("resolved_by")
                by = f" by {who}" if who else ""
                limit = data.get("new_spend_limit")
                if render.closed_by_cancel(data):
                    pass  # the turn was stopped: its `turn_cancelled` line says so
                elif asked.get("kind") == "budget" and data.get("approved"):
                    raised = (
                        f" to {limit:.4f} USD" if isinstance(limit, int | float) else ""
                    )
                    self._note(
                        f"✓ raised the spend limit{raised} ({interrupt_id}){by}; the "
                        "turn goes on",
                        "green",
                    )
                elif asked.get("kind") == "budget" and not data.get("expired"):
                    self._note(
                        f"✗ declined a new spend limit ({interrupt_id}){by}: the turn "
                        "ends",
                        "red",
                    )
                elif data.get("expired"):
                    self._note(
                        f"⌛ {tool} ({interrupt_id}) {render.EXPIRED_TEXT}; it did "
                        "not run",
                        "yellow",
                    )
                elif data.get("approved") and (
                    "edited_arguments" in data or "edited_arguments_ref" in data
                ):
                    self._note(
                        f"✓ approved {tool} ({interrupt_id}){by} with an edited "
                        f"input: {_event_input(data, 'edited_arguments')} (the model "
                        f"asked for {_event_input(data, 'original_arguments')})",
                        "green",
                    )
                elif data.get("approved"):
                    self._note(f"✓ approved {tool} ({interrupt_id}){by}", "green")
                else:
                    reason = data.get("rejection_message")
                    self._note(
                        f"✗ rejected {tool} ({interrupt_id}){by}"
                        + (f": {reason}" if reason else ""),
                        "red",
                    )
            case "turn_completed":
                self._end_line()
                self.stopping = False
                return True
            case "turn_cancelled":
                self._end_line()
                self.stopping = False
                who = data.get("cancelled_by")
                reason = data.get("reason")
                self._note(
                    f"■ stopped {event.turn_id}"
                    + (f" by {who}" if who else "")
                    + (f": {reason}" if reason else ""),
                    "yellow",
                )
                return True
            case "turn_failed":
                self._end_line()
                self.stopping = False
                self._note(f"✗ turn failed: {data.get('error', '')}", "red")
                return True
            case _:
                pass
        return False

    def _write(self, kind: Literal["text", "reasoning"], text: str) -> None:
        if self._line != kind:
            self._end_line()
            if kind == "text":
                self.out.print(Text("agent › ", style="bold green"), end="")
            else:
                self.out.print(Text("thinking › ", style="dim"), end="")
            self._line = kind
        style = "dim italic" if kind == "reasoning" else ""
        self.out.print(Text(text, style=style), end="", soft_wrap=True)
        if kind == "text":
            self._turn_text = True

    def _end_line(self) -> None:
        if self._line:
            self.out.print()
            self._line = ""

    def _note(self, text: str, style: str) -> None:
        render.say(self.out, text, style)


def _object(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def _event_input(data: JsonObject, name: str) -> str:
    """An input an `interrupt_resolved` event carries, or what names it when long."""
    ref = data.get(f"{name}_ref")
    if isinstance(ref, dict) and not data.get(name):
        return f"a long input ({ref.get('size')} bytes)"
    return json.dumps(data.get(name, {}), ensure_ascii=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """The person's answer to an approval card."""

    approved: bool
    message: str | None = None
    edited_input: JsonObject | None = None
    """Approve with this input instead of the model's."""
    draft: str = ""
    """The edit as typed, offered again when the session refuses it."""
    new_spend_limit: float | None = None
    """Approve a spend-limit interrupt with this new limit (USD)."""


# -- the loop -------------------------------------------------------------------


def run_chat(target: Target, session_id: str, flow: AgentSessionFlow | None) -> None:
    """Run the chat until the user leaves."""
    out = render.console()
    with translated_errors(), _ChatRunner() as runner:
        chat = runner.run(Chat.open(target, session_id, flow, out))
        try:
            runner.run(chat.intro())
            _converse(runner, chat)
        finally:
            with contextlib.suppress(Exception):
                runner.run(chat.close())


_T = TypeVar("_T")


class _ChatRunner:
    """An `asyncio.Runner` whose Ctrl-C that lands as a step starts is still a Ctrl-C.

    `Runner.run` (CPython 3.11) installs its SIGINT handler and then zeroes its
    count of interrupts. A Ctrl-C handled in between (at the end of the call
    that installed the handler) cancels the step's task, but the count says no
    Ctrl-C came, so `run` raises `CancelledError`, and the chat died with a
    traceback instead of leaving (seen in CI, where a test sends Ctrl-C the
    moment the chat prints). Nothing else cancels a step's task from outside,
    so a cancelled step is a Ctrl-C.
    """

    def __init__(self) -> None:
        self._runner = asyncio.Runner()

    def __enter__(self) -> _ChatRunner:
        self._runner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._runner.close()

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run one step of the chat to its end; Ctrl-C raises `KeyboardInterrupt`."""
        try:
            return self._runner.run(coro)
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None


def _converse(runner: _ChatRunner, chat: Chat) -> None:
    out = chat.out
    try:
        while True:
            if chat.state != "idle":
                try:
                    waiting = runner.run(chat.follow())
                except KeyboardInterrupt:
                    if chat.state != "running" or chat.stopping or chat.stop_unsent:
                        raise  # a second Ctrl-C: leave
                    _stop(runner, chat)
                    continue
                for interrupt in waiting:
                    chat.asking = interrupt
                    draft: str | None = None
                    while True:
                        answer = _ask(
                            out,
                            interrupt,
                            lambda i=interrupt.interrupt_id: runner.run(
                                chat.answered_elsewhere(i)
                            ),
                            draft=draft,
                        )
                        if answer is None:
                            # Answered in another terminal, the inbox or by code
                            # (or its deadline passed): the event log's line follows.
                            gone = (
                                "its approval deadline passed"
                                if chat.expired_ahead
                                else "the turn was stopped elsewhere"
                                if chat.cancelled_ahead
                                else "answered elsewhere"
                            )
                            out.print(Text(gone, style="yellow"))
                            chat.state = "running"
                            break
                        try:
                            sent = runner.run(chat.resolve(interrupt, answer))
                        except KeyboardInterrupt:
                            # Ctrl-C while the answer travels: the turn runs (or
                            # is about to), so stop it, as Ctrl-C does while it
                            # runs; a stop also closes an approval still open.
                            chat.state = "running"
                            _stop(runner, chat)
                            break
                        if sent:
                            break
                        draft = answer.draft  # refused: edit it again, nothing lost
                continue
            text = _typed(out, Text("you › ", style="bold blue"))
            if _TYPED_AHEAD.cut:
                _refuse_cut_line(chat)
                continue
            command = text.strip()
            if not command:
                continue
            if command in _QUIT:
                break
            if command == "/help":
                out.print(Text(_HELP, style="dim"))
                continue
            if command.startswith("/"):
                out.print(
                    Text(f"unknown command {command}; /help lists them", "yellow")
                )
                continue
            runner.run(chat.send(text))
    except (EOFError, KeyboardInterrupt, _Leave):
        out.print()
    _goodbye(chat)


def _refuse_cut_line(chat: Chat) -> None:
    """A message the terminal cut at its line limit: say so, and how to send it whole."""
    back = (
        suggest("chat", chat.session_id)
        if chat.exists
        else suggest("chat", chat.session_id, "--agent", _agent_ref())
    )
    render.say(
        chat.out,
        command_words(
            f"not sent: the terminal cut that line at {_TTY_LINE_MAX} bytes, its "
            "limit for one typed or pasted line, so its end was lost; send a long "
            "message from a file, one message a line (the chat reads them in "
            f"turn, then leaves): `{back} < message.txt`"
        ),
        "yellow",
    )


def _stop(runner: _ChatRunner, chat: Chat) -> None:
    """Ctrl-C while a turn runs: stop it; the chat follows it to its end.

    A second Ctrl-C (here, or while the turn stops) leaves the chat.
    """
    chat.stopping = True
    applied = runner.run(chat.stop())
    if applied:
        chat.out.print(
            Text("■ stopping the turn… (Ctrl-C again leaves the chat)", style="yellow")
        )
    elif applied is False:
        chat.stopping = False
        chat.out.print(Text("nothing to stop: the turn had ended", style="dim"))
    else:
        chat.stopping = False


_CHOICE = "approve or reject? [a/r] (e: edit the input, then approve) › "


_Answered = Callable[[], bool]
"""Whether someone else answered the card meanwhile (see `_read_line`'s `stop`)."""


def _ask(
    out: Console,
    interrupt: Interrupt,
    answered: _Answered,
    *,
    draft: str | None = None,
) -> Decision | None:
    """The person's answer, or None once `answered()` says someone else gave one.

    `draft`: an answer the session refused (an edit, or a spend limit); the
    card is not shown again, and a refused edit opens the edit prompt.
    """
    budget = render.is_budget(interrupt)
    if draft is None:
        render.print_interrupt(out, interrupt, hint=not budget)
    if budget:
        return _ask_limit(out, render.spent_usd(interrupt.arguments), answered)
    return _choose(out, interrupt, answered, draft)


def _choose(
    out: Console, interrupt: Interrupt, answered: _Answered, draft: str | None
) -> Decision | None:
    """Approve, edit then approve, or reject a tool call; None if answered elsewhere.

    A `draft` (a refused edit) opens the edit prompt first, and again on `e`.
    """
    if draft is not None:
        edited = _edit(out, interrupt, draft)
        if edited is not None:
            return edited
    while True:
        line = _read_line(out, Text(_CHOICE, style="bold yellow"), answered)
        if line is None:
            return None
        answer = line.strip().lower()
        if answer in ("a", "approve", "y", "yes"):
            return Decision(approved=True)
        if answer in ("e", "edit"):
            edited = _edit(out, interrupt, draft)
            if edited is not None:
                return edited
            continue
        if answer in ("r", "reject", "n", "no"):
            message = _typed(out, Text("message for the agent (optional) › ", "dim"))
            return Decision(approved=False, message=message.strip() or None)
        if answer in _QUIT:
            raise _Leave
        out.print(
            Text(
                "type a to approve, e to edit the input and approve, r to reject, or "
                "/quit to leave it waiting",
                "dim",
            )
        )


def _ask_limit(out: Console, spent: float, answered: _Answered) -> Decision | None:
    """A new spend limit for a budget interrupt, or a decline; None if answered elsewhere.

    Anything but a number above what was `spent` (or `r`, or /quit) is asked
    again.
    """
    prompt = Text(
        f"new spend limit in USD (above {spent:.4f}), or r to decline › ",
        style="bold yellow",
    )
    while True:
        line = _read_line(out, prompt, answered)
        if line is None:
            return None
        answer = line.strip().lower()
        if answer in ("r", "reject", "n", "no", "d", "decline"):
            return Decision(approved=False)
        if answer in _QUIT:
            raise _Leave
        try:
            limit = float(answer.removeprefix("$").removesuffix("usd").strip())
        except ValueError:
            limit = math.nan
        if not math.isfinite(limit) or limit <= 0:
            render.say(
                out,
                f"type a number of USD above {spent:.4f} (e.g. "
                f"{max(spent * 2, 0.01):.4g}), r to decline, or /quit to leave "
                "it waiting",
                "dim",
            )
            continue
        if limit <= spent:
            render.say(
                out,
                f"{limit:g} USD is not above the {spent:.4f} USD spent; type a "
                "higher limit, or r to decline",
                "yellow",
            )
            continue
        return Decision(approved=True, new_spend_limit=limit, draft=line)


_EDIT_PROMPT = "edited input › "


def _edit(out: Console, interrupt: Interrupt, draft: str | None) -> Decision | None:
    """An approval with an edited input typed as one line of JSON; None to go back.

    The line starts as `draft` (a refused edit) or the call's input: in a
    terminal it is on the line to edit (readline), elsewhere it is printed to
    copy. A line that is not a JSON object is offered again, as typed.
    """
    text = (
        draft
        if draft is not None
        else json.dumps(interrupt.arguments, ensure_ascii=False)
    )
    editor = _line_editor()
    render.say(
        out,
        "edit the call's whole input as one line of JSON; Enter approves it "
        "with this input, an empty line goes back",
        "dim",
    )
    while True:
        if editor is None:
            render.say(out, f"  current: {text}", "dim")
        line = _prefilled_input(out, editor, text)
        if not line.strip():
            return None
        try:
            parsed: object = json.loads(line, parse_constant=_no_constant)
        except ValueError as err:
            render.say(
                out,
                f"not JSON ({err}); fix it, or send an empty line to go back",
                "yellow",
            )
            text = line
            continue
        if not isinstance(parsed, dict):
            render.say(
                out,
                "the input must be a JSON object ({...}); fix it, or send an "
                "empty line to go back",
                "yellow",
            )
            text = line
            continue
        if parsed == interrupt.arguments:
            out.print(
                Text("that is the input unchanged; a approves it as it is", "dim")
            )
            return None
        return Decision(
            approved=True, edited_input=cast(JsonObject, parsed), draft=line
        )


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _line_editor() -> ModuleType | None:
    """`readline`, to put the input on the line to edit; None off a POSIX terminal."""
    if os.name != "posix" or not sys.stdin.isatty():
        return None
    try:
        import readline
    except ImportError:
        return None
    return readline


def _prefilled_input(out: Console, editor: ModuleType | None, text: str) -> str:
    """A line typed at the edit prompt, starting as `text` when a line editor runs."""
    if editor is None:
        return out.input(Text(_EDIT_PROMPT, style="bold yellow"))
    editor.set_startup_hook(lambda: editor.insert_text(text))
    try:
        # The prompt goes to `input`, so the editor redraws it with the line.
        return input(_EDIT_PROMPT)
    finally:
        editor.set_startup_hook(None)


def _typed(out: Console, prompt: Text) -> str:
    """A line typed at `prompt`; on a POSIX terminal, Ctrl-C is never held back.

    Not a plain `input()`: CPython runs signal handlers only between its own
    steps, so a Ctrl-C landing after the prompt is printed but before `input`
    blocks in `read` would wait for the next keypress. Reading in slices ends
    each slice in Python, where a pending Ctrl-C is raised. (The edit prompt
    keeps `input()`, for readline's editing of the prefilled line.)
    """
    line = _read_line(out, prompt, _never)
    assert line is not None  # `_never` never stops it
    return line


def _never() -> bool:
    return False


def _read_line(out: Console, prompt: Text, stop: Callable[[], bool]) -> str | None:
    """A line typed at `prompt`, or None as soon as `stop()` is true.

    On a POSIX terminal it waits for input in short slices and asks `stop`
    between them, so an approval card answered elsewhere is refreshed instead
    of waiting for a keypress (and a Ctrl-C is never held back, see `_typed`);
    elsewhere it is a plain blocking `input`.
    """
    _TYPED_AHEAD.cut = False
    if os.name != "posix" or not sys.stdin.isatty():
        return out.input(prompt)
    out.print(prompt, end="")
    fd = sys.stdin.fileno()
    while True:
        line = _TYPED_AHEAD.take_line()
        if line is not None:
            return line
        ready, _, _ = select.select([fd], [], [], _ANSWER_POLL)
        if ready:
            if not _TYPED_AHEAD.read(fd):
                raise EOFError
        elif stop():
            out.print()
            return None


class _TypedAhead:
    """What the terminal gave beyond the line asked for, kept for the next prompts.

    One read can bring several lines (text pasted, or typed while the edit
    prompt's readline held the terminal); `sys.stdin.readline` would keep the
    rest in a buffer that `select` cannot see, and the next prompt would wait
    for a keypress before it returned a line typed long before. Reading the
    file descriptor here keeps every byte where the next prompt looks first.
    """

    def __init__(self) -> None:
        self._bytes = bytearray()
        self._canonical = False
        self.cut = False
        """The last line taken filled the terminal's line buffer, which dropped
        the rest of it (see `_TTY_LINE_MAX`)."""

    def read(self, fd: int) -> bool:
        """Add what `fd` has now; False at its end (Ctrl-D on an empty line)."""
        self._canonical = _canonical(fd)
        chunk = os.read(fd, 4096)
        if not chunk:
            if not self._bytes:
                return False
            chunk = b"\n"  # Ctrl-D after some text ends that line, as `input()` does
        self._bytes += chunk
        return True

    def take_line(self) -> str | None:
        """The oldest whole line kept, without its newline; None if none is whole."""
        end = self._bytes.find(b"\n")
        if end < 0:
            return None
        line = bytes(self._bytes[:end])
        del self._bytes[: end + 1]
        self.cut = self._canonical and len(line) >= _TTY_LINE_MAX
        return line.decode(sys.stdin.encoding or "utf-8", errors="replace")


_TYPED_AHEAD = _TypedAhead()

_TTY_LINE_MAX = 4095
"""Bytes a terminal in canonical mode keeps of one line (Linux's `N_TTY_BUF_SIZE`
less its newline): what is typed or pasted beyond it is dropped, so a line
this long lost its end."""


def _canonical(fd: int) -> bool:
    """Whether the terminal `fd` edits lines itself (canonical mode, line limit)."""
    import termios  # POSIX only, as the terminal path that asks

    try:
        return bool(termios.tcgetattr(fd)[3] & termios.ICANON)
    except termios.error:
        return False


_ANSWER_POLL = 1.0
"""Seconds between checks, while a line is typed (that nobody else answered the
card, that no Ctrl-C is pending)."""


def _goodbye(chat: Chat) -> None:
    sid = chat.session_id
    match chat.state:
        case "approval":
            intr = chat.asking.interrupt_id if chat.asking else "INTERRUPT_ID"
            limit = (
                " [--spend-limit USD]"
                if chat.asking is not None and render.is_budget(chat.asking)
                else ""
            )
            answer = shlex.join([sid, intr])
            text = (
                "left with an approval waiting; answer it with "
                f"`{suggest('chat', sid)}` or "
                f"`{suggest(raw=f'approve|reject {answer}{limit}')}`"
            )
        case "running" if chat.outage.lost or chat.stop_unsent:
            # A stop that found the server gone was not sent, even if a Ctrl-C
            # left before `_stop` took back `stopping`.
            stopped = chat.stopping and not chat.stop_unsent
            text = (
                f"left while the turn {'stops' if stopped else 'runs'} and the "
                f"Temporal server is gone; the turn "
                f"{'ends cancelled' if stopped else 'goes on'} once the server and "
                f"a worker are back. Come back with `{suggest('chat', sid)}`"
            )
        case "running" if chat.stopping:
            text = (
                "left while the turn stops; it ends cancelled in the worker. Come "
                f"back with `{suggest('chat', sid)}`"
            )
        case "running":
            text = (
                "left while the turn runs; it continues in the worker. Come back "
                f"with `{suggest('chat', sid)}` (or stop it: "
                f"`{suggest('cancel', sid)}`)"
            )
        case "idle" if not chat.exists:
            # Nothing was sent, so the session does not exist: coming back
            # starts it, which takes the agent.
            text = (
                "bye; the session was not started (it starts with your first "
                "message); come back with "
                f"`{suggest('chat', sid, '--agent', _agent_ref())}`"
            )
        case "idle":
            text = f"bye; come back with `{suggest('chat', sid)}`"
    render.say(chat.out, command_words(text), "dim")


def _agent_ref() -> str:
    """The `--agent` this chat was started with, for advice; a placeholder if none."""
    context = click.get_current_context(silent=True)
    agent = context.params.get("agent") if context is not None else None
    return agent if isinstance(agent, str) and agent else "module:flow"
