"""Shell completion of session and interrupt IDs, read from the runtime store.

click completes commands and options by itself
(`eval "$(_DEX_AGENTS_COMPLETE=bash_source dex-agents)"`, or `zsh_source`,
`fish_source`); these callbacks add the IDs. They read the store that the
command line so far names (`--store`, `--state-dir`, their variables, else
`./.dex-agents`), and never fail: a completion that cannot read the store
offers nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from .._errors import UserError
from ..stores._open import open_runtime_store
from ..temporal._engine import resolve_state_dir
from ..temporal._snapshot import AgentSnapshot
from . import _render as render
from ._context import store_location


def _store(ctx: click.Context) -> str | None:
    """The runtime store the command being completed would read, if it exists."""
    params = ctx.params
    state_dir = params.get("state_dir")
    store = params.get("store")
    try:
        directory = resolve_state_dir(
            state_dir if isinstance(state_dir, str | Path) else None, create=False
        )
        location = store_location(store if isinstance(store, str) else None, directory)
    except UserError:
        return None  # a path under an unknown `~user`: nothing to complete from
    if "://" not in location and not Path(location).exists():
        return None
    return location


async def _snapshots(location: str) -> list[AgentSnapshot]:
    store = await open_runtime_store(location)
    try:
        return [render.snapshot_from_json(s) for s in await store.list_snapshots()]
    finally:
        await store.close()


def _read(ctx: click.Context) -> list[AgentSnapshot]:
    location = _store(ctx)
    if location is None:
        return []
    with contextlib.suppress(Exception):
        return asyncio.run(_snapshots(location))
    return []


def complete_session(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Session IDs of the store, newest first, with their status."""
    del param
    return [
        CompletionItem(s.session_id, help=s.status.replace("_", " "))
        for s in _read(ctx)
        if s.session_id.startswith(incomplete)
    ]


def complete_interrupt(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Pending interrupt IDs of the session named before it (else of every session)."""
    del param
    session_id = ctx.params.get("session_id")
    return [
        CompletionItem(i.interrupt_id, help=f"{i.tool_name} in {s.session_id}")
        for s in _read(ctx)
        if session_id in (None, s.session_id)
        for i in s.pending_interrupts
        if i.interrupt_id.startswith(incomplete)
    ]
