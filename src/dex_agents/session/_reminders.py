"""Who hears of a waiting approval, and when: the notifications as pure functions.

A session with `on_interrupt` tells someone when an approval opens, every
`interrupt_reminder` while it still waits, and when its deadline passes. The
workflow runs each notification as its own Step; these functions decide what
it says and when the next reminder is due. Reminders are counted on the
interrupt (`Interrupt.reminders`), so a session that continued as new goes on
with the next number and the same schedule: a reminder's `notification_id`
(`<interrupt>/reminder/<n>`) is never sent twice for different reminders.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from ._notification import InterruptNotification, NotificationKind, preview_arguments
from ._state import Interrupt, SessionState, call_fields


def interrupt_notification(
    interrupt: Interrupt,
    *,
    kind: NotificationKind,
    session_id: str,
    flow_type: str,
    now: datetime,
) -> InterruptNotification:
    """What `on_interrupt` is told of `interrupt` (`kind`; a reminder: its next number)."""
    return InterruptNotification(
        kind=kind,
        session_id=session_id,
        flow_type=flow_type,
        **call_fields(interrupt),
        turn_id=interrupt.turn_id,
        reason=interrupt.reason,
        arguments_preview=preview_arguments(interrupt.arguments),
        created_at=interrupt.created_at,
        sent_at=now.isoformat(),
        reminder=interrupt.reminders + 1 if kind == "reminder" else 0,
    )


def next_reminder(interrupt: Interrupt, interval: timedelta) -> datetime:
    """When the interrupt's next reminder is due: `interval` after the last one."""
    created = datetime.fromisoformat(interrupt.created_at)
    return created + interval * (interrupt.reminders + 1)


def reminded(state: SessionState, interrupt_id: str) -> SessionState:
    """`state` with one more reminder counted on the interrupt."""
    interrupt = state.interrupts[interrupt_id]
    counted = replace(interrupt, reminders=interrupt.reminders + 1)
    return replace(state, interrupts={**state.interrupts, interrupt_id: counted})
