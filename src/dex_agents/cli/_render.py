"""Everything a command prints: rich views for people, `--json` for programs.

Views are built from `AgentSnapshot` (from the session's query or the store's
projection) and `EventRecord`s, so they look the same with or without a worker.
A tool call's input is always printed whole and as JSON: a person approving a
write must see exactly what will run.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, cast, get_args

import click
from pydantic import TypeAdapter
from rich.console import Console
from rich.status import Status
from rich.table import Table
from rich.text import Text

from ..session._events import (
    AgentEventType,
    EventRecord,
    ModelRetryEvent,
    parsed_time,
)
from ..session._json import JsonObject
from ..session._policy import ToolEffect
from ..session._records import ToolRecord
from ..session._state import Interrupt, TurnSummary
from ..session._usage import Usage
from ..temporal._client import recorded_answer_text
from ..temporal._models import ResolveInterruptInput
from ..temporal._snapshot import AgentSnapshot
from ._errors import suggest
from ._views import Pending, ShownCall

_SNAPSHOT = TypeAdapter(AgentSnapshot)
_ONE_LINE_INPUT = 80
"""Inputs up to this many characters print on one line; longer ones are indented."""
_OUTPUT_PREVIEW = 300
"""Characters of a tool's output shown in a turn; `show --json` has all of it."""

STATUS_STYLE = {
    "idle": "green",
    "running": "cyan",
    "waiting_for_approval": "bold yellow",
    "budget_reached": "bold yellow",
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
    "ended": "dim",
}
EFFECT_TEXT: dict[ToolEffect, str] = {
    "read": "read: changes nothing",
    "idempotent_write": "idempotent write: retried with the same idempotency key",
    "non_idempotent_write": "non-idempotent write: runs at most once, never retried",
    "unclassified": "unclassified: treated as a write that runs at most once",
}
AT_LEAST_ONCE_TEXT = (
    "runs inside the Claude CLI, at least once: a turn rerun after a crash can "
    "run it again"
)
"""The effect of an approved call that runs inside the model segment (Bash, Write, ...)."""


def effect_text(interrupt: Interrupt) -> str:
    """What approving `interrupt` does, as its card says it: true for where it runs."""
    if interrupt.at_least_once:
        return f"{interrupt.effect.replace('_', ' ')}: {AT_LEAST_ONCE_TEXT}"
    return EFFECT_TEXT.get(interrupt.effect, interrupt.effect)


CANCELLED_TEXT = "the turn was cancelled"


def closed_by_cancel(data: Mapping[str, object]) -> bool:
    """Whether an `interrupt_resolved` event closed its approval for a cancelled turn.

    The event says so (`cancelled`); the text is the fallback for none.
    """
    if data.get("cancelled") is True:
        return True
    message = data.get("rejection_message")
    return (
        data.get("approved") is False
        and isinstance(message, str)
        and message.startswith(CANCELLED_TEXT)
    )


"""How a cancelled turn's error, and the calls it did not run, begin (`cancel_turn`)."""


def is_budget(interrupt: Interrupt) -> bool:
    """Whether `interrupt` asks for a new spend limit rather than a tool call's approval."""
    return interrupt.kind == "budget"


def _usd(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) else "?"


def spent_usd(arguments: Mapping[str, object]) -> float:
    """What a budget interrupt says the session spent (USD; 0 when it says nothing)."""
    spent = arguments.get("spent_usd")
    return float(spent) if isinstance(spent, int | float) else 0.0


def budget_text(arguments: Mapping[str, object], *, hint: bool = True) -> str:
    """A budget interrupt in a line: `spend limit reached: 0.0020 of 0.0015 USD spent`.

    `hint` adds how to answer it on the command line.
    """
    text = (
        f"spend limit reached: {_usd(arguments.get('spent_usd'))} of "
        f"{_usd(arguments.get('spend_limit_usd'))} USD spent"
    )
    return f"{text} — approve with --spend-limit USD" if hint else text


def rerun_text(reruns: int) -> str:
    """The mark of a turn whose model segments ran again (tools in the CLI may have too)."""
    times = "once" if reruns == 1 else f"{reruns} times"
    return f"↻ rerun {times} (tools inside the CLI may have run again)"


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


def say(out: Console, message: str, style: str = "") -> None:
    """Print `message` in `style` and let the terminal wrap it.

    Rich would break a long line at its width, and a command quoted in it
    would no longer copy and paste as one line.
    """
    out.print(Text(message, style=style), soft_wrap=True)


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
    then = parsed_time(iso)
    if then is None:
        return ""
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def when(iso: str, now: datetime | None = None) -> str:
    """A moment in local time to the second, and how far it is: `… (in 2 h)`.

    Stored times are UTC with microseconds, which is for programs (`--json`
    keeps them); a person reads local time and a distance.
    """
    then = parsed_time(iso)
    if then is None:
        return iso
    local = then.astimezone().replace(microsecond=0)
    seconds = int((then - (now or datetime.now(UTC))).total_seconds())
    distance = f"in {span(seconds)}" if seconds > 0 else f"{span(-seconds)} ago"
    return f"{local.strftime('%Y-%m-%d %H:%M:%S %Z').strip()} ({distance})"


def span(seconds: int) -> str:
    """A duration as a person says it: `45 s`, `12 min`, `2 h 5 min`, `3 d`."""
    seconds = max(0, seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        hours, minutes = divmod(seconds // 60, 60)
        return f"{hours} h {minutes} min" if minutes and hours < 10 else f"{hours} h"
    return f"{seconds // 86400} d"


def preview(text: str) -> str:
    """A tool output on one line, cut at a readable length."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _OUTPUT_PREVIEW else flat[: _OUTPUT_PREVIEW - 1] + "…"


# -- sessions and snapshots -----------------------------------------------------


_Row = tuple[str | Text, ...]
"""The cells of one table row, in the order of its columns."""


def _table(columns: Sequence[str], rows: Iterable[_Row], *, wrapping: str) -> Table:
    """A table with these column headers, in bold; only the column `wrapping` wraps."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column, no_wrap=column != wrapping)
    for row in rows:
        table.add_row(*row)
    return table


def sessions_table(snapshots: Iterable[AgentSnapshot]) -> Table:
    """The `sessions` table: one row per session, newest first."""
    columns = ("SESSION", "FLOW", "STATUS", "TURNS", "APPROVALS", "COST", "UPDATED")
    return _table(columns, map(_session_row, snapshots), wrapping="APPROVALS")


def _session_row(snap: AgentSnapshot) -> _Row:
    """A `sessions` row; its approvals cell names what each pending one waits on."""
    pending = snap.pending_interrupts
    approvals = (
        Text(
            f"{len(pending)}: "
            + ", ".join(
                budget_text(i.arguments, hint=False) if is_budget(i) else i.tool_name
                for i in pending
            ),
            style="yellow",
        )
        if pending
        else Text("-", style="dim")
    )
    return (
        snap.session_id,
        snap.flow_type,
        status_text(snap.status),
        str(turn_count(snap)),
        approvals,
        f"${snap.usage.cost_usd:.4f}",
        ago(snap.updated_at),
    )


_INTERRUPT = TypeAdapter(Interrupt)
_INPUT_SUMMARY = 60
"""Characters of a call's input in the `approvals` table; `--json` has all of it."""


def input_summary(arguments: JsonObject, limit: int = _INPUT_SUMMARY) -> str:
    """A call's input on one line, cut to `limit` characters (a table cell's)."""
    compact = json.dumps(arguments, ensure_ascii=False)
    if len(compact) <= limit:
        return compact
    return compact[: limit - 1] + "…"


def approvals_table(waiting: Sequence[Pending]) -> Table:
    """The `approvals` table: one row per pending approval, the longest-waiting first.

    When an answer is recorded for one (no worker took it yet), an ANSWER
    column says so for every row; it wraps, as INPUT does.
    """
    columns = ("SESSION", "INTERRUPT", "TOOL", "EFFECT", "INPUT", "DEADLINE", "WAITING")
    rows = [_approval_row(row) for row in waiting]
    if not any(row.recorded is not None for row in waiting):
        return _table(columns, rows, wrapping="INPUT")
    rows = [
        (*cells, _answer_cell(row)) for cells, row in zip(rows, waiting, strict=True)
    ]
    table = _table((*columns, "ANSWER"), rows, wrapping="INPUT")
    table.columns[-1].no_wrap = False
    return table


def _answer_cell(row: Pending) -> Text:
    """An `approvals` row's answer: the one recorded for a worker, or `-` for none."""
    if row.recorded is None:
        return Text("-", style="dim")
    text = recorded_text(row.recorded, row.interrupt, applies=False)
    return Text(text, style="yellow")


def recorded_text(
    recorded: ResolveInterruptInput, interrupt: Interrupt, *, applies: bool = True
) -> str:
    """An answer recorded for `interrupt` while no worker ran, as `show` says it."""
    return recorded_answer_text(
        approved=recorded.approved,
        resolved_by=recorded.resolved_by,
        rejection_message=recorded.rejection_message,
        new_spend_limit=recorded.new_spend_limit,
        budget=is_budget(interrupt),
        applies=applies,
    )


def recorded_json(recorded: ResolveInterruptInput | None) -> JsonObject | None:
    """The `recorded` field of `--json`: an answer waiting for a worker, or None."""
    if recorded is None:
        return None
    return {
        "approved": recorded.approved,
        "rejection_message": recorded.rejection_message,
        "new_spend_limit": recorded.new_spend_limit,
        "resolved_by": recorded.resolved_by,
    }


def _approval_row(row: Pending) -> _Row:
    """An `approvals` row; a spend limit shows what was spent in place of an input."""
    interrupt = row.interrupt
    budget = is_budget(interrupt)
    return (
        row.session_id,
        interrupt.interrupt_id,
        interrupt.tool_name,
        "budget" if budget else interrupt.effect.replace("_", " "),
        Text(
            budget_text(interrupt.arguments, hint=row.recorded is None), style="yellow"
        )
        if budget
        else Text(input_summary(interrupt.arguments), style="dim"),
        when(interrupt.deadline) if interrupt.deadline else Text("-", style="dim"),
        ago(interrupt.created_at).removesuffix(" ago"),
    )


def approval_json(row: Pending) -> JsonObject:
    """One row of `approvals --json`: the interrupt with its session, as stored."""
    data = _INTERRUPT.dump_python(row.interrupt, mode="json")
    for answered in (
        "resolved",
        "approved",
        "rejection_message",
        "resolved_by",
        "arguments_ref",
        "expired",
        "new_spend_limit",
    ):
        data.pop(answered, None)
    return {
        "session_id": row.session_id,
        "flow_type": row.flow_type,
        **data,
        "recorded": recorded_json(row.recorded),
    }


def shown_snapshot_json(
    snapshot: AgentSnapshot, recorded: Mapping[str, ResolveInterruptInput]
) -> JsonObject:
    """`show --json`: the snapshot, with the answers recorded while no worker ran.

    Each pending interrupt gets `recorded`: its answer waiting for a worker, or null.
    """
    data = snapshot_json(snapshot)
    for interrupt in cast(list[JsonObject], data["pending_interrupts"]):
        interrupt["recorded"] = recorded_json(
            recorded.get(str(interrupt["interrupt_id"]))
        )
    return data


def print_facts(out: Console, rows: Iterable[tuple[str, str | Text]]) -> None:
    """Aligned `label  value` lines; long values wrap at the terminal, not here."""
    pairs = list(rows)
    width = max((len(label) for label, _ in pairs), default=0)
    for label, value in pairs:
        out.print(
            Text.assemble((f"  {label:<{width}}  ", "bold"), value), soft_wrap=True
        )


def print_snapshot(
    out: Console,
    snapshot: AgentSnapshot,
    *,
    note: str = "",
    calls: Mapping[str, Sequence[ShownCall]] | None = None,
    recorded: Mapping[str, ResolveInterruptInput] | None = None,
) -> None:
    """The `show` view: facts, turns, queued messages and pending approvals.

    `calls`: every tool call of a turn, by turn ID (`_views.turn_calls`);
    a turn without an entry shows its summary's records. `recorded`: the
    answers recorded for pending interrupts while no worker ran, by ID: such
    an approval shows its answer and how to apply it instead of how to answer.
    """
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
        print_turn(out, turn, calls=(calls or {}).get(turn.turn_id))
    # The active turn's own prompts show with it, not as queued.
    queued = snapshot.queued_prompts
    if queued is None:
        queued = snapshot.pending_prompts
    if queued:
        out.print()
        failed = snapshot.status == "idle" and any(
            t.status == "failed" for t in snapshot.turns[-1:]
        )
        # Idle, they are a failed turn's: they go again, with a note, with the next message.
        title = (
            "messages of the failed turn, sent again with your next message"
            if failed
            else "queued messages"
        )
        out.print(Text(title, style="bold"))
        for prompt in queued:
            say(out, f"  you › {prompt}")
    for interrupt in snapshot.pending_interrupts:
        out.print()
        answer = (recorded or {}).get(interrupt.interrupt_id)
        print_interrupt(out, interrupt, recorded=answer)
        command = (snapshot.session_id, interrupt.interrupt_id)
        if answer is not None:
            say(
                out,
                f"  apply it: {suggest('worker', raw='--agent module:flow')}   (start "
                "a worker of the session's flow)",
                "dim",
            )
            continue
        if is_budget(interrupt):
            spent = _usd(interrupt.arguments.get("spent_usd"))
            say(
                out,
                f"  approve: {suggest('approve', *command, raw='--spend-limit USD')}"
                f"   (a new limit above the {spent} USD spent; the turn goes on)\n"
                f"  decline: {suggest('reject', *command)}   (the turn fails: spend "
                "limit reached)",
                "dim",
            )
            continue
        edit = f"--edit {edit_example(interrupt)}"
        message = "--message '...'"
        say(
            out,
            f"  approve: {suggest('approve', *command)}\n"
            f"  edit:    {suggest('approve', *command, raw=edit)}\n"
            f"  reject:  {suggest('reject', *command, raw=message)}",
            "dim",
        )


def print_turn(
    out: Console,
    turn: TurnSummary,
    *,
    header: bool = True,
    calls: Sequence[ShownCall] | None = None,
) -> None:
    """One turn: its prompts, its tool calls, its answer or error.

    Without `calls` only the deferred calls show (those the summary records).
    """
    if header:
        title = Text.assemble((turn.turn_id, "bold"), "  ", status_text(turn.status))
        if turn.reruns:
            title.append(f"  {rerun_text(turn.reruns)}", style="yellow")
        if turn.usage.model_calls:
            title.append(f"  {usage_text(turn.usage)}", style="dim")
        out.print(title)
    for prompt in turn.prompts:
        print_prompt(out, prompt)
    if calls is None:
        calls = [ShownCall(record=r) for r in turn.tool_calls]
    for call in calls:
        print_tool_record(out, call.record, running=not call.ended)
    if turn.final_text:
        print_answer(out, turn.final_text)
    if turn.error and turn.status == "cancelled":
        say(out, f"■ {turn.error}", "yellow")
    elif turn.error:
        say(out, f"✗ turn failed: {turn.error}", "red")


def print_prompt(out: Console, text: str) -> None:
    """A user message, as the chat shows it."""
    out.print(Text.assemble(("you › ", "bold blue"), text), soft_wrap=True)


def print_answer(out: Console, text: str) -> None:
    """An agent's answer, as the chat shows it."""
    out.print(Text.assemble(("agent › ", "bold green"), text), soft_wrap=True)


EXPIRED_TEXT = "expired: no approval before the deadline"
"""How a call whose approval deadline passed is shown: nobody rejected it."""


def record_status_text(record: ToolRecord) -> tuple[str, str]:
    """How a finished record's status reads, and its style: who decided, and how.

    An expired call is never shown as rejected; an edited one says it was
    approved with an edit.
    """
    if record.status == "expired":
        return EXPIRED_TEXT, "yellow"
    if record.status == "cancelled":
        return "cancelled", "yellow"
    style = "green" if record.status == "finished" else "red"
    status = record.status.replace("_", " ")
    who = record.resolved_by or (record.edit.edited_by if record.edit else None)
    if record.status == "rejected":
        return (f"{status} by {who}" if who else status), style
    if record.edit is not None:
        by = f" by {who}" if who else ""
        return f"{status}, approved with an edited input{by}", style
    if who:
        return f"{status}, approved by {who}", style
    return status, style


def edit_text(record: ToolRecord) -> str:
    """The line under an edited call: who edited, and what the model asked for."""
    edit = record.edit
    if edit is None:
        return ""
    who = edit.edited_by or record.resolved_by
    if edit.original_arguments_ref is not None and not edit.original_arguments:
        ref = edit.original_arguments_ref
        original = f"a long input ({ref.size:,} bytes, blob {ref.blob_id} of the runtime store)"
    else:
        original = input_summary(edit.original_arguments, _ONE_LINE_INPUT)
    by = f"edited by {who}" if who else "edited by a person"
    return f"✎ {by} before approval; the model asked for {original}"


def print_tool_record(
    out: Console, record: ToolRecord, *, running: bool = False
) -> None:
    """A call's record: name, input, and how it ended (or that it still runs).

    The input shown is the one that ran: for an edited call, the person's,
    with a second line naming who edited it and what the model asked for.
    """
    if running:
        style, status = "cyan", "running"
    else:
        status, style = record_status_text(record)
    detail = "" if running else record.output or record.rejection_message or ""
    if record.status == "expired":
        detail = record.output or ""  # the status says why: the deadline
    line = Text.assemble(
        ("⚙ ", "magenta"),
        (record.tool_name, "bold"),
        " ",
        (arguments_text(record.arguments), "dim"),
        " → ",
        (status, style),
    )
    if detail:
        line.append(f": {preview(detail)}")
    out.print(line, soft_wrap=True)
    if record.edit is not None:
        say(out, f"  {edit_text(record)}", "yellow")


def edit_example(interrupt: Interrupt) -> str:
    """`--edit`'s value to start from: the call's input, quoted for the shell, if short."""
    compact = json.dumps(interrupt.arguments, ensure_ascii=False)
    if interrupt.arguments_ref is not None or len(compact) > _ONE_LINE_INPUT:
        return "@input.json"
    return shlex.quote(compact)


def print_interrupt(
    out: Console,
    interrupt: Interrupt,
    *,
    hint: bool = True,
    recorded: ResolveInterruptInput | None = None,
) -> None:
    """An approval request: the tool, its effect, why, and its exact input.

    A budget interrupt shows what was spent of which limit instead (with
    `hint`, how to answer it on the command line). `recorded`: the answer
    recorded for it while no worker ran, shown first (it has not applied).
    """
    answer: list[tuple[str, str | Text]] = (
        [("answer", Text(recorded_text(recorded, interrupt), style="yellow"))]
        if recorded is not None
        else []
    )
    if is_budget(interrupt):
        out.print(
            Text.assemble(
                ("⏸ spend limit reached ", "bold yellow"),
                (interrupt.interrupt_id, "yellow"),
            )
        )
        facts: list[tuple[str, str | Text]] = [
            *answer,
            ("budget", budget_text(interrupt.arguments, hint=hint and not answer)),
        ]
        if interrupt.reason:
            facts.append(("why", interrupt.reason))
        if interrupt.deadline:
            facts.append(("deadline", when(interrupt.deadline)))
        print_facts(out, facts)
        return
    out.print(
        Text.assemble(
            ("⏸ approval needed ", "bold yellow"), (interrupt.interrupt_id, "yellow")
        )
    )
    rows: list[tuple[str, str | Text]] = [
        *answer,
        ("tool", interrupt.tool_name),
        ("effect", effect_text(interrupt)),
    ]
    if interrupt.reason:
        rows.append(("why", interrupt.reason))
    if interrupt.deadline:
        rows.append(("deadline", when(interrupt.deadline)))
    # The input is printed as is, never wrapped or cut by rich.
    text = arguments_text(interrupt.arguments)
    first, *rest = text.splitlines()
    rows.append(("input", first))
    print_facts(out, rows)
    indent = " " * (4 + max(len(label) for label, _ in rows))
    for line in rest:
        say(out, f"{indent}{line}")


# -- events ---------------------------------------------------------------------


def _clock(timestamp: str) -> str:
    """An event's UTC timestamp as local wall-clock time (`14:03:27`); '' if it has none."""
    moment = parsed_time(timestamp)
    return moment.astimezone().strftime("%H:%M:%S") if moment is not None else ""


_TYPE_WIDTH = max(map(len, get_args(AgentEventType)))
"""The type column of `events`: the longest type (`tool_call_attempt_failed`)."""


def event_line(event: EventRecord) -> Text:
    """One event of `events`: cursor, local time, turn, type and what it carries."""
    data = event.data
    line = Text.assemble(
        (f"{event.cursor:>6}  ", "dim"),
        (f"{_clock(event.timestamp):<9}", "dim"),
        (f"{event.turn_id:<8} ", "cyan"),
        (f"{event.type:<{_TYPE_WIDTH}} ", "bold"),
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
            detail = data.get("error") or data.get("rejection_message")
            line.append(preview(str(detail or data.get("output", ""))), style="dim")
        case "tool_call_attempt_failed":
            retry = "; retrying" if data.get("retrying") else ""
            line.append(
                f"{data.get('tool_name')} attempt {data.get('attempt')}{retry}: "
            )
            line.append(preview(str(data.get("error", ""))), style="red")
        case "segment_rerun":
            line.append(
                f"↻ {data.get('step_execution_id')} runs again (attempt "
                f"{data.get('attempt')}): tools inside the CLI may run again",
                style="yellow",
            )
        case "model_retry":
            retry = event.payload()
            if isinstance(retry, ModelRetryEvent):
                line.append(f"↻ {retry.text()}", style="yellow")
        case "turn_completed" if data.get("reruns"):
            line.append(rerun_text(int(str(data.get("reruns")))), style="yellow")
        case "turn_cancelled":
            who = data.get("cancelled_by")
            line.append("■ cancelled" + (f" by {who}" if who else ""), style="yellow")
            if data.get("reason"):
                line.append(f": {data.get('reason')}")
        case "interrupt_created" if data.get("kind") == "budget":
            line.append(f"{data.get('interrupt_id')} ")
            line.append(budget_text(_object(data.get("arguments")), hint=False))
        case "interrupt_created":
            line.append(
                f"{data.get('interrupt_id')} {data.get('tool_name')} "
                f"({data.get('effect')}) "
            )
            line.append(_compact(data.get("arguments", {})), style="dim")
        case "interrupt_resolved":
            if data.get("expired"):
                line.append(f"{data.get('interrupt_id')} {EXPIRED_TEXT}")
                return line
            verdict = "approved" if data.get("approved") else "rejected"
            message = data.get("rejection_message")
            if closed_by_cancel(data):
                line.append(f"{data.get('interrupt_id')} closed: {message}")
                return line
            edited = "edited_arguments" in data or "edited_arguments_ref" in data
            if edited:
                verdict = "approved with an edited input"
            line.append(f"{data.get('interrupt_id')} {verdict}")
            if data.get("resolved_by"):
                line.append(f" by {data.get('resolved_by')}")
            limit = data.get("new_spend_limit")
            if data.get("approved") and isinstance(limit, int | float):
                line.append(f": new spend limit {limit:.4f} USD")
            elif edited:
                line.append(": ")
                line.append(_event_input(data, "edited_arguments"), style="dim")
                line.append(" (the model asked for ")
                line.append(_event_input(data, "original_arguments"), style="dim")
                line.append(")")
            elif data.get("rejection_message"):
                line.append(f": {data.get('rejection_message')}")
        case "turn_failed":
            line.append(str(data.get("error", "")), style="red")
            if data.get("reruns"):
                line.append(f"  {rerun_text(int(str(data.get('reruns'))))}", "yellow")
        case "session_ended":
            line.append(str(data.get("reason", "")))
        case _:
            pass
    return line


def _object(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _event_input(data: JsonObject, name: str) -> str:
    """An input an event carries (`edited_arguments`), or what names it when long."""
    ref = data.get(f"{name}_ref")
    if isinstance(ref, dict) and not data.get(name):
        return f"a long input ({ref.get('size')} bytes, blob {ref.get('blob_id')})"
    return _compact(data.get(name, {}))


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
