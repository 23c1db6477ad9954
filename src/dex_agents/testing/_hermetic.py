"""A process environment in which the Claude Code CLI cannot leave the machine.

The CLI reads credentials, config and proxies from its environment and home
directory. A developer's real `ANTHROPIC_API_KEY`, `~/.claude` settings or a
corporate proxy would make a test depend on the machine, or bill a real account.
The environment built here points the CLI at the mock API, with a dummy key,
fresh config directories, and a proxy that refuses (and records) anything else.

The Python SDK merges `ClaudeAgentOptions.env` *over* `os.environ`, so removing a
variable here does not unset it for the CLI: scrub `os.environ` too (the test
suite's fixture does), or the parent's values leak through.
"""

from __future__ import annotations

import os
from pathlib import Path

from .._scripted import MockMessagesApi
from ._refusing_proxy import RefusingProxy

DUMMY_API_KEY = "dummy-key-for-tests"
"""The API key hermetic CLIs send; the mock accepts anything."""


def is_scrubbed_variable(name: str) -> bool:
    """Whether a hermetic environment drops the variable `name`.

    Credentials and settings (`ANTHROPIC_*`, `CLAUDE*`), proxies in either case
    (`HTTPS_PROXY`, `no_proxy`, ...), and XDG base directories (which would point
    config and caches outside the temporary home).
    """
    upper = name.upper()
    return upper.startswith(("ANTHROPIC_", "CLAUDE", "XDG_")) or upper.endswith(
        "_PROXY"
    )


def hermetic_cli_env(
    base_dir: Path, *, api: MockMessagesApi | None, proxy: RefusingProxy
) -> dict[str, str]:
    """Build the environment for a CLI that may talk only to `api`.

    Args:
        base_dir: Where the temporary `HOME` and `CLAUDE_CONFIG_DIR` are created.
        api: The mock Messages API to use; None leaves `ANTHROPIC_BASE_URL` unset,
            so any model call goes to the refusing proxy and shows up there.
        proxy: The proxy that every non-loopback request is sent to.

    Returns:
        A copy of `os.environ` without credentials, settings and proxies, plus
        the hermetic settings. Both spellings of the proxy variables are set,
        since tools disagree on which one wins.
    """
    home = base_dir / "home"
    config = base_dir / "claude-config"
    for directory in (home, config):
        directory.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not is_scrubbed_variable(k)}
    env |= {
        "ANTHROPIC_API_KEY": DUMMY_API_KEY,
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(config),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    if api is not None:
        env["ANTHROPIC_BASE_URL"] = api.base_url
    # CLI 2.1.327 routes even loopback `http://` API calls through HTTPS_PROXY
    # unless NO_PROXY names the loopback host.
    for name, value in (
        ("NO_PROXY", "127.0.0.1,localhost"),
        ("HTTPS_PROXY", proxy.url),
        ("HTTP_PROXY", proxy.url),
    ):
        env[name] = env[name.lower()] = value
    return env


CLI_PATH_VARIABLE = "DEX_AGENTS_CLAUDE_CLI"
"""Names the real CLI to test instead of the bundled one.

The same variable as `dex_agents.claude._process.CLI_PATH_VARIABLE` (not
imported: this module must work without the `claude` extra), so the adapter's
segments run that CLI too. `make cli-compat CLI=...` sets it.
"""


def bundled_cli_path() -> Path | None:
    """The real `claude` binary the real-CLI tests run, if any.

    `$DEX_AGENTS_CLAUDE_CLI` when it is set, else the binary bundled in the
    installed claude-agent-sdk wheel. Wheels built without the native binary
    (or a missing `claude` extra) give None, so a real-CLI suite can skip rather
    than silently use a `claude` found on `PATH`.

    Raises:
        FileNotFoundError: `$DEX_AGENTS_CLAUDE_CLI` names no executable file (a
            wrong path must fail the tests, not skip them).
    """
    if named := os.environ.get(CLI_PATH_VARIABLE):
        path = Path(named).absolute()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise FileNotFoundError(
                f"{CLI_PATH_VARIABLE}={named} is not an executable file"
            )
        return path
    try:
        import claude_agent_sdk
    except ImportError:
        return None
    path = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    return path if path.is_file() and os.access(path, os.X_OK) else None
