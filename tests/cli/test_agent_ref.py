"""`--agent` references: a flow, or a function returning one, by module or by file."""

from __future__ import annotations

from pathlib import Path

import pytest

from dex_agents.cli._agent_ref import load_flow
from dex_agents.cli._errors import BadArgumentError
from support import SUPPORT_DIR

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

_FACTORY = """
from dex_agents.testing._ledger_flow import LedgerFlowConfig, ledger_flow

def make():
    return ledger_flow(
        LedgerFlowConfig(flow_type="Made", ledger_path="{base}/l", gate_dir="{base}")
    )

def broken():
    return 1
"""


def test_a_file_path_or_a_module_names_the_flow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEX_AGENTS_TEST_DIR", str(tmp_path))
    monkeypatch.setenv("DEX_AGENTS_TEST_FLOW", "ByPath")
    agents = SUPPORT_DIR / "agents.py"
    assert load_flow(f"{agents}:flow").flow_type == "ByPath"
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mine.py").write_text(_FACTORY.format(base=tmp_path))
    monkeypatch.chdir(tmp_path)
    assert load_flow("pkg.mine:make").flow_type == "Made"
    with pytest.raises(BadArgumentError, match="`broken` is of type 'int'"):
        load_flow("pkg.mine:broken")


def test_an_import_error_names_the_module_and_how_to_see_the_traceback(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad_agent.py"
    bad.write_text("import no_such_dependency_xyz\n")
    with pytest.raises(BadArgumentError) as caught:
        load_flow(f"{bad}:flow")
    message = caught.value.format_message()
    assert "ModuleNotFoundError: No module named 'no_such_dependency_xyz'" in message
    assert f"`python {bad}`" in message
    assert caught.value.exit_code == 2
