"""Everything a command prints: rich views for people, `--json` for programs.

Views are built from `AgentSnapshot` (from the session's query or the store's
projection) and `EventRecord`s, so they look the same with or without a worker.
A tool call's input is always printed whole and as JSON: a person approving a
write must see exactly what will run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import click
from pydantic import TypeAdapter
from rich.console import Console
from rich.status import Status
from rich.table import Table
from rich.text import Text

from ..session import EventRecord, JsonObject, ToolEffect, ToolRecord, Usage
from ..temporal import AgentSnapshot, Interrupt, TurnSummary

_SNAPSHOT = TypeAdapter(AgentSnapshot)
_ONE_LINE_INPUT = 80
"""Inputs up to this many characters print on one line; longer ones are indented."""
_OUTPUT_PREVIEW = 300
"""Characters of a tool's output shown in a turn; `show --json` has all of it."""

STATUS_STYLE = {
    "idle": "green",
    "running": "cyan",
    "waiting_for_approval": "bold yellow",
    "completed": "green",
    "failed": "red",
}
EFFECT_TEXT: dict[ToolEffect, str] = {
    "read": "read: changes nothing",
    "idempotent_write": "idempotent write: retried with the same idempotency key",
    "non_idempotent_write": "non-idempotent write: runs at most once, never retried",
    "unclassified": "unclassified: treated as a write that runs at most once",
}


_PIPE_WIDTH = 200
"""Width of tables sent to a pipe: wide enough that `grep` sees whole rows."""


def console(*, stderr: bool = False) -> Console:
    """A console that never highlights on its own: colors carry meaning here.

    Output to a pipe gets a wide page instead of rich's 80 columns, so table rows
    stay whole for scripts.
    """
    out = Console(stderr=stderr, highlight=False)
    if not out.is_terminal:
        out.width = max(out.width, _PIPE_WIDTH)
    return out


# -- JSON -----------------------------------------------------------------------


def echo_json(value: Any) -> None:
    """Print `value` as indented JSON, unwrapped whatever the terminal width."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def echo_json_line(value: Any) -> None:
    """Print `value` as one line of JSON (for streams of records)."""
    click.echo(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def snapshot_from_json(data: JsonObject) -> AgentSnapshot:
    """The snapshot a store projection holds."""
    return _SNAPSHOT.validate_python(data)


def snapshot_json(snapshot: AgentSnapshot) -> JsonObject:
    """The snapshot as JSON, the same shape the store keeps."""
    return _SNAPSHOT.dump_python(snapshot, mode="json")


def turn_count(snapshot: AgentSnapshot) -> int:
    """Every turn of the session (a projection of 0.1.x has no count: its turns are all)."""
    return max(snapshot.turn_count, len(snapshot.turns))


def session_summary_json(snapshot: AgentSnapshot) -> JsonObject:
    """One row of `sessions --json`: the snapshot without its turns and messages."""
    data = snapshot_json(snapshot)
    return {
        "session_id": snapshot.session_id,
        "flow_type": snapshot.flow_type,
        "status": snapshot.status,
        "turns": turn_count(snapshot),
        "pending_interrupts": data["pending_interrupts"],
        "usage": data["usage"],
        "updated_at": snapshot.updated_at,
        "version": snapshot.version,
    }


def event_json(event: EventRecord) -> JsonObject:
    """An event record as JSON."""
    return asdict(event)


# -- small pieces ---------------------------------------------------------------


def arguments_text(arguments: JsonObject) -> str:
    """The exact input of a tool call, as JSON: one line if short, else indented."""
    compact = json.dumps(arguments, ensure_ascii=False)
    if len(compact) <= _ONE_LINE_INPUT:
        return compact
    return json.dumps(arguments, ensure_ascii=False, indent=2)


def status_text(status: str) -> Text:
    """A session or turn status, colored, with spaces for underscores."""
    return Text(status.replace("_", " "), style=STATUS_STYLE.get(status, ""))


def usage_text(usage: Usage) -> str:
    """Tokens, model calls and cost on one line."""
    return (
        f"{usage.input_tokens} input / {usage.output_tokens} output tokens, "
        f"{usage.model_calls} model call{'s' if usage.model_calls != 1 else ''}, "
        f"${usage.cost_usd:.4f}"
    )


def ago(iso: str, now: datetime | None = None) -> str:
    """How long ago an ISO timestamp was, e.g. `3m ago`; empty when unknown."""
    try:
        then = datetime.fromisoformat(iso)
    except ValueError:
        return ""
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def preview(text: str) -> str:
    """A tool output on one line, cut at a readable length."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _OUTPUT_PREVIEW else flat[: _OUTPUT_PREVIEW - 1] + "…"


# -- sessions and snapshots -----------------------------------------------------


def sessions_table(snapshots: Iterable[AgentSnapshot]) -> Table:
    """The `sessions` table: one row per session, newest first."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("SESSION", "FLOW", "STATUS", "TURNS", "APPROVALS", "COST"):
        table.add_column(column, no_wrap=column != "APPROVALS")
    table.add_column("UPDATED", no_wrap=True)
    for snap in snapshots:
        pending = snap.pending_interrupts
        approvals = (
            Text(
                f"{len(pending)}: " + ", ".join(i.tool_name for i in pending),
                style="yellow",
            )
            if pending
            else Text("-", style="dim")
        )
        table.add_row(
            snap.session_id,
            snap.flow_type,
            status_text(snap.status),
            str(turn_count(snap)),
            approvals,
            f"${snap.usage.cost_usd:.4f}",
            ago(snap.updated_at),
        )
    return table


def print_facts(out: Console, rows: Iterable[tuple[str, str | Text]]) -> None:
    """Aligned `label  value` lines; long values wrap at the terminal, not here."""
    pairs = list(rows)
    width = max((len(label) for label, _ in pairs), default=0)
    for label, value in pairs:
        out.print(
            Text.assemble((f"  {label:<{width}}  ", "bold"), value), soft_wrap=True
        )


def print_snapshot(out: Console, snapshot: AgentSnapshot, *, note: str = "") -> None:
    """The `show` view: facts, turns, queued messages and pending approvals."""
    rows: list[tuple[str, str | Text]] = [
        ("session", snapshot.session_id),
        ("flow", snapshot.flow_type),
        ("status", status_text(snapshot.status)),
        ("turns", str(turn_count(snapshot))),
        ("usage", usage_text(snapshot.usage)),
    ]
    if snapshot.updated_at:
        rows.append(("updated", f"{snapshot.updated_at} ({ago(snapshot.updated_at)})"))
    print_facts(out, rows)
    if note:
        out.print(Text(note, style="dim"))
    for turn in snapshot.turns:
        out.print()
        print_turn(out, turn)
    if snapshot.pending_prompts:
        out.print()
        out.print(Text("queued messages", style="bold"))
        for prompt in snapshot.pending_prompts:
            out.print(Text(f"  you › {prompt}"), soft_wrap=True)
    for interrupt in snapshot.pending_interrupts:
        out.print()
        print_interrupt(out, interrupt)
        out.print(
            Text(
                f"  approve: dex-agents approve {snapshot.session_id} "
                f"{interrupt.interrupt_id}\n  reject:  dex-agents reject "
                f"{snapshot.session_id} {interrupt.interrupt_id} --message '...'",
                style="dim",
            ),
            soft_wrap=True,
        )


def print_turn(out: Console, turn: TurnSummary, *, header: bool = True) -> None:
    """One turn: its prompts, its deferred tool calls, its answer or error."""
    if header:
        title = Text.assemble((turn.turn_id, "bold"), "  ", status_text(turn.status))
        if turn.usage.model_calls:
            title.append(f"  {usage_text(turn.usage)}", style="dim")
        out.print(title)
    for prompt in turn.prompts:
        print_prompt(out, prompt)
    for record in turn.tool_calls:
        print_tool_record(out, record)
    if turn.final_text:
        print_answer(out, turn.final_text)
    if turn.error:
        out.print(Text(f"✗ turn failed: {turn.error}", style="red"), soft_wrap=True)


def print_prompt(out: Console, text: str) -> None:
    """A user message, as the chat shows it."""
    out.print(Text.assemble(("you › ", "bold blue"), text), soft_wrap=True)


def print_answer(out: Console, text: str) -> None:
    """An agent's answer, as the chat shows it."""
    out.print(Text.assemble(("agent › ", "bold green"), text), soft_wrap=True)


def print_tool_record(out: Console, record: ToolRecord) -> None:
    """A deferred call's final record: name, input, and how it ended."""
    style = "green" if record.status == "finished" else "red"
    detail = record.output or record.rejection_message or ""
    line = Text.assemble(
        ("⚙ ", "magenta"),
        (record.tool_name, "bold"),
        " ",
        (arguments_text(record.arguments), "dim"),
        " → ",
        (record.status.replace("_", " "), style),
    )
    if detail:
        line.append(f": {preview(detail)}")
    out.print(line, soft_wrap=True)


def print_interrupt(out: Console, interrupt: Interrupt) -> None:
    """An approval request: the tool, its effect, why, and its exact input."""
    out.print(
        Text.assemble(
            ("⏸ approval needed ", "bold yellow"), (interrupt.interrupt_id, "yellow")
        )
    )
    rows: list[tuple[str, str | Text]] = [
        ("tool", interrupt.tool_name),
        ("effect", EFFECT_TEXT.get(interrupt.effect, interrupt.effect)),
    ]
    if interrupt.reason:
        rows.append(("why", interrupt.reason))
    if interrupt.deadline:
        rows.append(("deadline", interrupt.deadline))
    # The input is printed as is, never wrapped or cut by rich.
    text = arguments_text(interrupt.arguments)
    first, *rest = text.splitlines()
    rows.append(("input", first))
    print_facts(out, rows)
    indent = " " * (4 + max(len(label) for label, _ in rows))
    for line in rest:
        out.print(Text(f"{indent}{line}"), soft_wrap=True)


# -- events ---------------------------------------------------------------------


def event_line(event: EventRecord) -> Text:
    """One event of `events`: cursor, turn, type and what it carries."""
    data = event.data
    line = Text.assemble(
        (f"{event.cursor:>6}  ", "dim"),
        (f"{event.turn_id:<8} ", "cyan"),
        (f"{event.type:<19}", "bold"),
    )
    if event.attempt > 1:
        line.append(f"(attempt {event.attempt}) ", style="yellow")
    match event.type:
        case "text_delta" | "reasoning_delta":
            line.append(json.dumps(data.get("text", ""), ensure_ascii=False))
        case "tool_call_started":
            line.append(f"{data.get('tool_name')} ")
            line.append(_compact(data.get("arguments", {})), style="dim")
        case "tool_call_finished":
            line.append(f"{data.get('tool_name')} {data.get('status')}: ")
            line.append(preview(str(data.get("output", ""))), style="dim")
        case "interrupt_created":
            line.append(
                f"{data.get('interrupt_id')} {data.get('tool_name')} "
                f"({data.get('effect')}) "
            )
            line.append(_compact(data.get("arguments", {})), style="dim")
        case "interrupt_resolved":
            verdict = "approved" if data.get("approved") else "rejected"
            line.append(f"{data.get('interrupt_id')} {verdict}")
            if data.get("rejection_message"):
                line.append(f": {data.get('rejection_message')}")
        case "turn_failed":
            line.append(str(data.get("error", "")), style="red")
        case _:
            pass
    return line


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


# -- progress -------------------------------------------------------------------


class Progress:
    """A spinner with the elapsed time, for waits that would otherwise be silent.

    It can be hidden while something else prints and shown again; on a
    non-terminal (a pipe, a test) rich draws nothing.
    """

    def __init__(self, out: Console, text: str) -> None:
        self._out = out
        self._text = text
        self._hint = ""
        self._status: Status | None = None
        self._started = 0.0
        self._ticker: asyncio.Task[None] | None = None

    def show(self, text: str | None = None) -> None:
        """Start (or restart) the spinner, with `text` if given."""
        if text is not None:
            self._text = text
            self._hint = ""
        if self._status is None:
            self._started = asyncio.get_running_loop().time()
            self._status = self._out.status(self._render(), spinner="dots")
            self._status.start()
            self._ticker = asyncio.create_task(self._tick())

    def hint(self, text: str) -> None:
        """Add advice to the spinner line (e.g. that no worker seems to run)."""
        self._hint = text

    def hide(self) -> None:
        """Stop the spinner and erase its line."""
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._status is not None:
            self._status.stop()
            self._status = None

    @property
    def elapsed(self) -> float:
        """Seconds since the spinner was last shown."""
        if self._status is None:
            return 0.0
        return asyncio.get_running_loop().time() - self._started

    def _render(self) -> Text:
        line = Text(f"{self._text} {self.elapsed:.0f}s", style="cyan")
        if self._hint:
            line.append(f"  {self._hint}", style="yellow")
        return line

    async def _tick(self) -> None:
        while self._status is not None:
            self._status.update(self._render())
            await asyncio.sleep(0.25)

    async def __aenter__(self) -> Progress:
        self.show()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.hide()
