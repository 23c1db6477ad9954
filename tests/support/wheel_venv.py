"""The built wheel in a fresh virtual environment outside the repository, offline.

The wheel is built from this checkout (`uv build --wheel --offline`). The fresh
environment gets the locked dependencies of `dex-agents[claude]` exactly as
`uv.lock` pins them, installed by `uv sync --frozen --offline
--no-install-project` from uv's cache (which `make install` filled), then the
wheel itself with `--no-deps`. Nothing is fetched: a missing cache entry fails
the build, it never reaches a registry. The environment does not see the
repository's `src/` (no editable install, no `PYTHONPATH`), so what runs there
is what a user who installed the wheel runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from dex_agents.testing._refusing_proxy import RefusingProxy

ROOT = Path(__file__).parents[2]
UV = ROOT / ".venv" / "bin" / "uv"


@dataclass(frozen=True, kw_only=True)
class WheelVenv:
    """A virtual environment with the built wheel and its locked dependencies."""

    wheel: Path
    venv: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"


_built: list[WheelVenv] = []


def _uv(*args: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        [str(UV), *args],
        cwd=ROOT,
        env={**os.environ, "UV_OFFLINE": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (
        f"`uv {' '.join(args)}` failed offline (is uv's cache filled? run "
        f"`make install` first):\n{done.stdout}\n{done.stderr}"
    )


def wheel_venv(factory: pytest.TempPathFactory) -> WheelVenv:
    """Build the wheel and its environment once per test run."""
    if _built:
        return _built[0]
    if not UV.is_file():
        pytest.fail(f"{UV} is missing: run `make install` first")
    base = factory.mktemp("wheel")
    dist, venv = base / "dist", base / "venv"
    _uv("build", "--wheel", "--offline", "--out-dir", str(dist))
    (wheel,) = dist.glob("dex_agents-*.whl")
    _uv(
        "sync",
        "--frozen",
        "--offline",
        "--no-install-project",
        "--extra",
        "claude",
        "--python",
        sys.executable,
        "--quiet",
        env={"UV_PROJECT_ENVIRONMENT": str(venv)},
    )
    _uv(
        "pip",
        "install",
        "--offline",
        "--no-deps",
        "--python",
        str(venv / "bin" / "python"),
        "--quiet",
        str(wheel),
    )
    built = WheelVenv(wheel=wheel, venv=venv)
    _built.append(built)
    return built


def scrubbed_env(home: Path, proxy: RefusingProxy) -> dict[str, str]:
    """A user's environment without keys, project settings or proxies."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "DEX_AGENTS_"))
        and not k.upper().endswith("_PROXY")
        and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    }
    home.mkdir(parents=True, exist_ok=True)
    env |= {
        "HOME": str(home),
        "COLUMNS": "200",
        "HTTPS_PROXY": proxy.url,
        "HTTP_PROXY": proxy.url,
        "NO_PROXY": "127.0.0.1,localhost",
    }
    return env


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> WheelVenv:
    """The project's wheel, built once per run, installed in a fresh venv."""
    return wheel_venv(tmp_path_factory)
