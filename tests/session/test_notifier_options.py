"""`on_interrupt` must be async, and `interrupt_reminder` needs it.

A plain `def` notifier ran, then failed at `await None`: every attempt of a
notification (`notification_attempts`, 5 by default) sent it again. A reminder
without a notifier was silently never sent.
"""

from __future__ import annotations

import dataclasses
import functools
from datetime import timedelta

import pytest

from dex_agents import InvalidArgumentError
from dex_agents.notify import WebhookNotifier
from dex_agents.session import AgentSessionOptions
from dex_agents.session._notification import InterruptNotification


def sync_notify(notification: InterruptNotification) -> None:
    del notification


async def async_notify(notification: InterruptNotification, tag: str = "") -> None:
    del notification, tag


class SyncNotifier:
    def __call__(self, notification: InterruptNotification) -> None:
        del notification


class AsyncNotifier:
    async def __call__(self, notification: InterruptNotification) -> None:
        del notification


@pytest.mark.parametrize(
    "notifier",
    [sync_notify, SyncNotifier(), lambda n: None, functools.partial(sync_notify)],
    ids=["def", "object with a sync __call__", "lambda", "partial of a def"],
)
def test_a_sync_on_interrupt_is_refused_when_built(notifier: object) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        AgentSessionOptions(on_interrupt=notifier)  # pyright: ignore[reportArgumentType]
    assert caught.value.argument == "on_interrupt"
    message = str(caught.value)
    assert "`on_interrupt` must be an async callable" in message
    assert "define it with `async def`" in message
    # `dataclasses.replace` checks again.
    with pytest.raises(InvalidArgumentError):
        dataclasses.replace(AgentSessionOptions(), on_interrupt=notifier)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    "notifier",
    [
        async_notify,
        AsyncNotifier(),
        functools.partial(async_notify, tag="x"),
        WebhookNotifier("http://127.0.0.1:9/hook", "secret"),
    ],
    ids=["async def", "object with an async __call__", "partial", "webhook"],
)
def test_an_async_on_interrupt_builds(notifier: object) -> None:
    options = AgentSessionOptions(
        on_interrupt=notifier,  # pyright: ignore[reportArgumentType]
        interrupt_reminder=timedelta(hours=1),
    )
    assert options.on_interrupt is notifier


def test_a_reminder_without_a_notifier_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        AgentSessionOptions(interrupt_reminder=timedelta(hours=1))
    assert caught.value.argument == "interrupt_reminder"
    message = str(caught.value)
    assert "`interrupt_reminder=datetime.timedelta(seconds=3600)`" in message
    assert "`on_interrupt`, which is None" in message
    assert "set on_interrupt=WebhookNotifier(url)" in message
    assert "or interrupt_reminder=None" in message
