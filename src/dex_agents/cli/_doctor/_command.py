"""`dex-agents doctor`: what a worker needs, checked, one line each with its fix.

Five checks run at once, each under `--timeout`, so a doctor never hangs:

- the Claude Code CLI a segment would run (`real_cli_path`: the agent's
  `cli_path`, else the bundled binary, else `claude` on PATH), its
  `--version`, and whether that is the version the adapter is tested with (a
  warning, not a failure, when it is not);
- model credentials in the environment (an API key, a token, a cloud
  provider, or the scripted model's variables); they are not tried, since a
  doctor calls no model;
- Temporal at the target every command resolves (`--address`, else the state
  directory's dev server), connected as `worker` connects; a doctor never
  starts a server;
- the runtime store the worker opens, by a write that is rolled back (SQLite:
  in the file, or in its directory when the worker has yet to create it;
  PostgreSQL: a row in a transaction that never commits);
- with `--agent`, each flow's media store (an S3 bucket: `head_bucket`).

Nothing is left behind: no server, no session, no row, no file.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import click

from ...stores._open import redacted_store
from ...temporal._flow import AgentSessionFlow
from .. import _render as render
from .._agent_ref import load_flow
from .._context import Target, target_options, timeout_option
from .._errors import CommandError, run, suggest
from ._check import Check, guarded
from ._claude_cli import check_cli, claude_modules, cli_choice
from ._credentials import check_credentials
from ._media_store import check_media
from ._runtime_store import check_store
from ._temporal import check_temporal

_DOCTOR_HELP = """Check what a worker needs: one line per check, with the fix for each that fails.

It checks the Claude Code CLI a worker runs (found, its version, and whether it
is the version the adapter is tested with), model credentials in the
environment, Temporal at the address the other commands use (it never starts
a server), that the runtime store can be written (a write it rolls back), and
with --agent each flow's media store. Each check has --timeout; nothing is
left behind.

\b
Exit codes: 0 every check passed (warnings allowed), 1 a check failed.

\b
Examples:
  dex-agents doctor
  dex-agents doctor --agent my_agent.py:flow --address temporal:7233 --store postgresql://agents@db/agents
  dex-agents doctor --json | jq -r '.checks[] | select(.status == "fail") | .fix'
"""


@click.command(help=_DOCTOR_HELP)
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="MODULE:FLOW",
    help="The agent a worker will serve, as `worker --agent` takes it: its "
    "definition's `cli_path` and media store are checked too.",
)
@click.option(
    "--cli",
    metavar="PATH",
    help="The Claude Code CLI to check. Default: the one a worker runs (the "
    "agent's `cli_path`, else the CLI bundled with claude-agent-sdk, else "
    "`claude` on PATH).",
)
@timeout_option(10.0, "Seconds each check may take.")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@target_options
def doctor(
    agents: Sequence[str],
    cli: str | None,
    timeout: float,
    as_json: bool,
    target: Target,
) -> None:
    """Check what a worker needs (see `_DOCTOR_HELP` for its help text)."""
    flows = [load_flow(ref) for ref in agents]
    checks = run(_doctor(target, flows, cli, timeout, spinner=not as_json))
    failed = [c for c in checks if c.status == "fail"]
    if as_json:
        render.echo_json(
            {"ok": not failed, "checks": [check.to_json() for check in checks]}
        )
    else:
        out = render.console()
        for check in checks:
            out.print(check.line(), soft_wrap=True)
    if failed:
        names = ", ".join(c.name for c in failed)
        raise CommandError(
            f"{len(failed)} of {len(checks)} checks failed ({names}); each ✗ line "
            f"says the fix, then run `{_again(agents, cli)}` again"
        )


def _again(agents: Sequence[str], cli: str | None) -> str:
    """This doctor command as typed: with its `--agent`s and `--cli`, which it checks."""
    words = [arg for ref in agents for arg in ("--agent", ref)]
    if cli is not None:
        words += ["--cli", cli]
    return suggest("doctor", *words)


async def _doctor(
    target: Target,
    flows: list[AgentSessionFlow],
    cli: str | None,
    timeout: float,
    *,
    spinner: bool,
) -> list[Check]:
    cli_path, cli_source = cli_choice(cli, flows)
    sdk = claude_modules()  # imports take a second: not part of a check's time
    checks = [
        guarded(
            "claude_cli",
            "Claude Code CLI",
            check_cli(sdk, cli_path, cli_source, timeout),
            timeout,
        ),
        guarded("credentials", "model credentials", check_credentials(), timeout),
        guarded("temporal", "Temporal", check_temporal(target, timeout), timeout),
        guarded(
            "runtime_store",
            f"runtime store {redacted_store(target.store)}",
            check_store(target, timeout),
            timeout,
        ),
        guarded("media_store", "media store", check_media(flows, timeout), timeout),
    ]
    if not spinner:
        return list(await asyncio.gather(*checks))
    async with render.Progress(render.console(), "checking"):
        return list(await asyncio.gather(*checks))
