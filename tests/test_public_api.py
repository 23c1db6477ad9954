"""The public surface is small and pinned, and layers point one way."""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType

import pytest

import dex_agents
import dex_agents.claude
import dex_agents.cli
import dex_agents.connectors
import dex_agents.notify
import dex_agents.postgres
import dex_agents.session
import dex_agents.stores
import dex_agents.temporal
import dex_agents.testing
import dex_agents.web

PACKAGES = [
    dex_agents,
    dex_agents.claude,
    dex_agents.cli,
    dex_agents.connectors,
    dex_agents.notify,
    dex_agents.postgres,
    dex_agents.session,
    dex_agents.stores,
    dex_agents.temporal,
    dex_agents.testing,
    dex_agents.web,
]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_all_lists_exactly_the_public_names_sorted(package: ModuleType) -> None:
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_")
        and not isinstance(value, ModuleType)
        and name not in ("annotations", "TYPE_CHECKING", "Any", "import_module")
    }
    assert package.__all__ == sorted(package.__all__)
    assert public <= set(package.__all__)
    for name in package.__all__:
        assert getattr(package, name) is not None


@pytest.mark.parametrize(
    "module",
    [
        "dex_agents.session",
        "dex_agents.stores",
        "dex_agents.claude",
        "dex_agents.connectors",
    ],
)
def test_engine_free_layers_do_not_import_temporalio(module: str) -> None:
    code = f"import sys, {module}; assert 'temporalio' not in sys.modules, 'temporalio imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_connectors_import_without_the_mcp_client() -> None:
    # MCP tool sources import `mcp` when they connect: the package stays
    # importable without the `claude` extra that brings it.
    code = (
        "import sys, dex_agents.connectors; "
        "assert 'mcp' not in sys.modules and 'jsonschema' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
