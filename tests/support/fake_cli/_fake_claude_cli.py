"""A scripted stand-in for the Claude Code CLI, started by the SDK via `cli_path`.

Pass `ClaudeAgentOptions(cli_path=fake_claude_cli_path())` and the SDK runs this
program instead of the bundled `claude`. It speaks the subset of the stream-json
protocol that the adapter relies on and copies what CLI 2.1.327 was observed to
do (`/work/shared/reference/claude-cli-2.1.327.md`, re-checked by
`tests/fake_cli`, which runs the same tests against the real CLI): the
initialize handshake, PreToolUse hook callbacks and their combination,
`can_use_tool`, SDK and HTTP MCP tools carrying the tool use ID, deferral and
resume from the transcript the SDK materializes, `transcript_mirror` frames,
and cumulative usage.

Instead of a model it follows the script in the last text block of the turn's
last prompt (what follows `dex-script: ` if present), in the grammar of
`_script`: `say`, `recall`, `call <tool> <json> [&& ...]`, `stall <gate>`,
`fail`, and the modifiers `;; pause <gate>`, `;; fail`, `;; reuse <tool> <json>`
(see `_fake_cli_model`). A gate is a file in the directory named by
`DEX_FAKE_CLAUDE_GATE_DIR`: the fake writes `<gate>.reached` and waits until a
test creates `<gate>`. `FAKE_CLAUDE_RESUME_WITHOUT_HOOKS=1` makes a resumed
deferred call skip PreToolUse, as the real CLI does when the SDK's initialize
comes late.

It lives among the tests (`tests/support/fake_cli`, imported as
`support.fake_cli`), not in the `dex_agents.testing` kit: it is the tests' model
of the CLI, not something an application runs.

Start-up cost matters because every turn segment starts a CLI: the launcher runs
the module with the current interpreter in isolated mode and registers the
`dex_agents` packages and this one without executing their `__init__`, which
would import Temporal (about three seconds). The fake itself imports only the
standard library, pydantic, its sibling `_fake_cli_*` modules and
`dex_agents._scripted._script`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shlex
import sys
import tempfile
from pathlib import Path

import dex_agents.testing

from ._fake_cli_args import CliArgsError, parse_args
from ._fake_cli_session import FAKE_CLAUDE_RESUME_WITHOUT_HOOKS_ENV, FakeCliSession
from ._fake_cli_turn import FAKE_CLAUDE_GATE_DIR_ENV
from ._fake_cli_usage import CLI_VERSION

__all__ = [
    "FAKE_CLAUDE_GATE_DIR_ENV",
    "FAKE_CLAUDE_RESUME_WITHOUT_HOOKS_ENV",
    "fake_claude_cli_path",
    "main",
]
"""What `support.fake_cli` re-exports; the `_fake_cli_*` modules stay private."""

_BOOT = """\
import sys, types
for name, path in {packages!r}:
    module = types.ModuleType(name)
    module.__path__ = [path]
    sys.modules[name] = module
from {fake}._fake_claude_cli import main
sys.exit(main())
"""


def _packages(name: str, directory: Path) -> list[tuple[str, str]]:
    """Package `name` in `directory` and each package around it, outermost first."""
    parts = name.split(".")
    directories = [directory, *directory.parents]
    return [
        (".".join(parts[: i + 1]), str(directories[len(parts) - 1 - i]))
        for i in range(len(parts))
    ]


def fake_claude_cli_path() -> Path:
    """An executable that runs the fake CLI with this interpreter.

    The SDK executes `cli_path` directly, so this is a `/bin/sh` launcher (a
    shebang naming a long virtualenv path could exceed the kernel's limit). It
    is generated once per interpreter and source location into the temporary
    directory, under a name derived from its content, so concurrent test
    processes share it safely.
    """
    fake = __name__.rpartition(".")[0]
    testing = Path(dex_agents.testing.__path__[0]).resolve()
    packages = [
        *_packages("dex_agents.testing", testing),
        *_packages(fake, Path(__file__).resolve().parent),
    ]
    boot = _BOOT.format(packages=packages, fake=fake)
    script = (
        "#!/bin/sh\n"
        f'exec {shlex.quote(sys.executable)} -I -c {shlex.quote(boot)} "$@"\n'
    )
    digest = hashlib.sha256(script.encode()).hexdigest()[:16]
    directory = Path(tempfile.gettempdir()) / f"dex-agents-fake-claude-{os.getuid()}"
    path = directory / f"claude-{digest}"
    if not path.exists():
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = directory / f".{path.name}.{os.getpid()}"
        partial.write_text(script)
        partial.chmod(0o755)
        partial.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    """Run the fake CLI on `argv` (default: the process's); returns the status."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except CliArgsError as e:
        print(f"fake claude: {e}", file=sys.stderr)
        return 2
    if args.version:
        print(f"{CLI_VERSION} (Claude Code)")
        return 0
    session = FakeCliSession(args, os.environ, str(Path.cwd()))
    return asyncio.run(session.run())


if __name__ == "__main__":
    sys.exit(main())
