"""The scripted model for programs: the real Claude Code CLI, offline, no API key.

`scripted_model()` starts `MockMessagesApi` on 127.0.0.1 and points this
process's environment at it, which every Claude Code CLI the process starts
inherits (the Claude Agent SDK merges `ClaudeAgentOptions.env` over
`os.environ`): an in-process worker's agents then follow `dex-script:` commands
instead of calling Claude. `dex-agents dev` and `dex-agents demo` set the same
variables (`scripted_model_env`) for their workers.

```python
with scripted_model():            # or: async with scripted_model():
    asyncio.run(main())           # every CLI started in here is offline
```

The variables are process-wide, so one scripted model serves the whole
process; leaving the block restores what they were.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ._background import StartClose
from ._mock_messages_api import MockMessagesApi

UNSCRIPTED_REPLY = (
    "(scripted model) I follow `dex-script:` commands only: end your message with "
    '`dex-script: say hello`, `dex-script: call lookup_order {"orderId": "7"}` or '
    '`dex-script: call create_refund {"orderId": "7"}`. Set ANTHROPIC_API_KEY to '
    "talk to Claude."
)
"""What the scripted model answers to a message without a `dex-script:` command."""

SCRIPTED_MODEL_API_KEY = "scripted-model-key"
"""The API key a CLI sends to the scripted Messages API, which takes any."""


def scripted_model_env(base_url: str, config_dir: Path) -> dict[str, str]:
    """The variables that point a Claude Code CLI at the scripted Messages API.

    Args:
        base_url: The API's address (`MockMessagesApi.base_url`).
        config_dir: The CLI's `CLAUDE_CONFIG_DIR`, so that no login, settings
            or transcripts of the user's own `~/.claude` are read or written.

    Returns:
        `ANTHROPIC_BASE_URL` and a placeholder `ANTHROPIC_API_KEY` (the CLI
        refuses to start without credentials), `NO_PROXY` for the loopback
        address (the CLI would otherwise send even loopback calls through a
        configured proxy), `CLAUDE_CONFIG_DIR`, and
        `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` (no update checks or
        telemetry: nothing leaves the machine).
    """
    return {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": SCRIPTED_MODEL_API_KEY,
        "NO_PROXY": "127.0.0.1,localhost",
        "CLAUDE_CONFIG_DIR": str(config_dir.resolve()),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


class ScriptedModel(StartClose):
    """A running scripted model; see `scripted_model`.

    A sync (`with`) and an async (`async with`) context manager; entering it
    returns itself.
    """

    def __init__(
        self,
        *,
        only_without_api_key: bool,
        unscripted_reply: str | None,
        config_dir: Path | None,
    ) -> None:
        self._only_without_api_key = only_without_api_key
        self._unscripted_reply = unscripted_reply
        self._config_dir = config_dir
        self._api: MockMessagesApi | None = None
        self._saved: dict[str, str | None] = {}
        self._temporary: Path | None = None

    @property
    def active(self) -> bool:
        """Whether the scripted model serves this process's CLIs now.

        False outside the block, and inside it when `only_without_api_key` was
        given and `ANTHROPIC_API_KEY` was set: then the CLIs talk to Claude.
        """
        return self._api is not None

    @property
    def api(self) -> MockMessagesApi | None:
        """The scripted Messages API (its `requests`, `base_url`), while active."""
        return self._api

    def start(self) -> None:
        """Serve the scripted model and point this process's environment at it."""
        if self._only_without_api_key and os.environ.get("ANTHROPIC_API_KEY"):
            return
        api = MockMessagesApi(unscripted_reply=self._unscripted_reply)
        api.start()
        self._api = api
        config_dir = self._config_dir
        if config_dir is None:
            self._temporary = Path(tempfile.mkdtemp(prefix="dex-agents-claude-"))
            config_dir = self._temporary
        config_dir.mkdir(parents=True, exist_ok=True)
        variables = scripted_model_env(api.base_url, config_dir)
        self._saved = {name: os.environ.get(name) for name in variables}
        os.environ.update(variables)

    def close(self) -> None:
        """Restore the environment and stop the scripted model (if it served)."""
        api, self._api = self._api, None
        if api is None:
            return
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved = {}
        api.close()
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = None


def scripted_model(
    *,
    only_without_api_key: bool = False,
    unscripted_reply: str | None = UNSCRIPTED_REPLY,
    config_dir: Path | None = None,
) -> ScriptedModel:
    """Run the project's scripted model for this process's Claude Code CLIs, offline.

    Inside the block, the real bundled CLI of every agent this process runs
    (an in-process `create_worker`'s) talks to `MockMessagesApi` on
    127.0.0.1 instead of Claude: it follows the `dex-script:` command at the
    end of each message (`say <text>`, `call <tool> <json>`) and answers any
    other message with `unscripted_reply`. Nothing leaves the machine and no
    API key is needed. Processes started inside the block inherit it; a
    worker already running elsewhere (`dex-agents worker`) is not affected,
    and `dex-agents dev` without a key does the same for its own worker.

    Args:
        only_without_api_key: Do nothing when `ANTHROPIC_API_KEY` is set, so
            the same program talks to Claude once a key is given.
        unscripted_reply: The answer to a message without a command; None
            makes such a request fail (HTTP 400), as tests prefer.
        config_dir: The CLIs' `CLAUDE_CONFIG_DIR`; default: a temporary
            directory, removed when the block ends.
    """
    return ScriptedModel(
        only_without_api_key=only_without_api_key,
        unscripted_reply=unscripted_reply,
        config_dir=config_dir,
    )
