"""Model credentials in the environment (never tried: a doctor calls no model)."""

from __future__ import annotations

import os
from pathlib import Path

from ..._scripted import SCRIPTED_MODEL_API_KEY
from .._errors import prog
from ._check import Check

_PROVIDERS = (
    ("CLAUDE_CODE_USE_BEDROCK", "Amazon Bedrock", "AWS"),
    ("CLAUDE_CODE_USE_VERTEX", "Google Vertex AI", "Google Cloud"),
    ("CLAUDE_CODE_USE_FOUNDRY", "Microsoft Foundry", "Azure"),
)
"""Variables that make the CLI call a cloud provider, with that cloud's credentials."""
_TOKENS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
"""Variables the CLI takes a credential of the Anthropic API from, in its order."""
_FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})


async def check_credentials() -> Check:
    name, title = "credentials", "model credentials"
    env = os.environ
    base_url = env.get("ANTHROPIC_BASE_URL", "").strip()
    for variable, provider, cloud in _PROVIDERS:
        if env.get(variable, "").strip().lower() not in _FALSE_WORDS:
            return Check(
                name=name,
                status="pass",
                text=f"{title}: {provider} ({variable}={env[variable]}), with "
                f"{cloud}'s credentials (not tried)",
                details={"source": variable},
            )
    if base_url and env.get("ANTHROPIC_API_KEY") == SCRIPTED_MODEL_API_KEY:
        return Check(
            name=name,
            status="pass",
            text=f"{title}: the scripted model at {base_url} (dex_agents.testing; no "
            "real model answers)",
            details={"source": "scripted_model", "base_url": base_url},
        )
    for variable in _TOKENS:
        if env.get(variable, "").strip():
            at = f", for ANTHROPIC_BASE_URL {base_url}" if base_url else ""
            return Check(
                name=name,
                status="pass",
                text=f"{title}: {variable} is set{at} (not tried: a doctor calls no "
                "model)",
                details={"source": variable, "base_url": base_url or None},
            )
    fix = (
        "export ANTHROPIC_API_KEY=<your key> where the worker runs (or "
        "ANTHROPIC_AUTH_TOKEN, or CLAUDE_CODE_USE_BEDROCK=1 / CLAUDE_CODE_USE_VERTEX=1 "
        f"with that cloud's credentials); without one, only `{prog()} dev` and "
        f"`{prog()} demo` run, on the scripted model"
    )
    config = Path(env.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
    login = config / ".credentials.json"
    if login.is_file():
        return Check(
            name=name,
            status="warn",
            text=f"{title}: none in the environment; the CLI's stored login "
            f"({login}) may answer",
            fix=fix,
            details={"source": "login"},
        )
    return Check(
        name=name,
        status="fail",
        text=f"{title}: none in the environment (no ANTHROPIC_API_KEY)",
        fix=fix,
        details={"source": None},
    )


async def credentials_warning() -> str | None:
    """The line a worker starts with when `doctor` would not pass its credentials.

    None when the environment has credentials; the worker starts either way
    (an agent that calls no model needs none).
    """
    check = await check_credentials()
    if check.status == "pass":
        return None
    return (
        f"warning: {check.text}; a Claude agent's turns fail without them (an agent "
        f"that calls no model needs none) — fix: {check.fix}"
    )
