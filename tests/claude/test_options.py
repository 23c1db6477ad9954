from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    PermissionResultAllow,
)

from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    ClaudeAgentRunner,
)
from dex_agents.claude._options import (
    SECURE_STORAGE_VARIABLE,
    allowed_tool_name,
    check_options,
    cli_environment,
    resolved_cwd,
)
from dex_agents.session import (
    ToolPolicy,
)
from support.claude_harness import (
    PermissionRecorder,
    SessionDriver,
    bash,
    fake_options,
)


def never(_name: str) -> bool:
    return False


async def allow(*_args: Any) -> PermissionResultAllow:
    return PermissionResultAllow()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("can_use_tool", allow),
        ("continue_conversation", True),
        ("enable_file_checkpointing", True),
        ("fork_session", True),
        ("permission_prompt_tool_name", "stdio"),
        ("resume", "0b5c0f5e-0000-4000-8000-000000000000"),
        ("resume_session_at", "some-uuid"),
        ("resume_drops_turn", "some-uuid"),
        ("session_id", "0b5c0f5e-0000-4000-8000-000000000000"),
        ("session_store", object()),
    ],
)
def test_owned_options_are_refused_by_name(field: str, value: object) -> None:
    # Each parametrized value fits its field; pyright cannot pair them.
    options = ClaudeAgentOptions(**{field: value})  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match=f"`{field}`"):
        check_options(options, server_name="tools", must_defer=never)


@pytest.mark.parametrize(
    "flag", ["mcp-config", "resume", "session-id", "await-initialize"]
)
def test_owned_cli_flags_are_refused(flag: str) -> None:
    options = ClaudeAgentOptions(extra_args={flag: None})
    with pytest.raises(TypeError, match=f"extra_args\\[{flag!r}\\]"):
        check_options(options, server_name="tools", must_defer=never)


@pytest.mark.parametrize("mode", ["bypassPermissions", "acceptEdits", "auto"])
def test_modes_that_skip_approval_are_refused(mode: Any) -> None:
    with pytest.raises(TypeError, match="permission_mode"):
        check_options(
            ClaudeAgentOptions(permission_mode=mode),
            server_name="tools",
            must_defer=never,
        )


@pytest.mark.parametrize("mode", [None, "default", "dontAsk"])
def test_modes_that_keep_approval_pass(mode: Any) -> None:
    check_options(
        ClaudeAgentOptions(permission_mode=mode, extra_args={"verbose": None}),
        server_name="tools",
        must_defer=never,
    )


def test_server_name_may_not_be_reused() -> None:
    options = ClaudeAgentOptions(
        mcp_servers={"tools": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}
    )
    with pytest.raises(TypeError, match="'tools'"):
        check_options(options, server_name="tools", must_defer=never)
    check_options(options, server_name="custom", must_defer=never)


def test_mcp_servers_must_be_a_dict() -> None:
    with pytest.raises(TypeError, match="pass a dict"):
        check_options(
            ClaudeAgentOptions(mcp_servers="/etc/mcp.json"),
            server_name="tools",
            must_defer=never,
        )


def test_allowed_tools_may_not_allow_a_deferring_tool() -> None:
    def must_defer(name: str) -> bool:
        return name == "Bash"

    for entry in ["Bash", "Bash(ls:*)", "Bash(*)"]:
        with pytest.raises(TypeError, match="allowed_tools"):
            check_options(
                ClaudeAgentOptions(allowed_tools=["Read", entry]),
                server_name="tools",
                must_defer=must_defer,
            )
    check_options(
        ClaudeAgentOptions(allowed_tools=["Read", "", "(odd)"]),
        server_name="tools",
        must_defer=must_defer,
    )


def test_allowed_tool_name() -> None:
    assert allowed_tool_name("Bash(ls:*)") == "Bash"
    assert allowed_tool_name(" Read ") == "Read"
    assert allowed_tool_name("") is None
    assert allowed_tool_name("(x)") is None


def test_cli_environment_copies_os_environ_and_sets_secure_storage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/config/a")
    monkeypatch.delenv(SECURE_STORAGE_VARIABLE, raising=False)
    monkeypatch.setenv("SOME_VARIABLE", "1")
    env = cli_environment(ClaudeAgentOptions())
    assert env["SOME_VARIABLE"] == "1"
    assert env[SECURE_STORAGE_VARIABLE] == "/config/a"


def test_cli_environment_uses_options_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv(SECURE_STORAGE_VARIABLE, raising=False)
    monkeypatch.setenv("SOME_VARIABLE", "1")
    env = cli_environment(ClaudeAgentOptions(env={"A": "b"}))
    assert env == {"A": "b", SECURE_STORAGE_VARIABLE: ""}
    env = cli_environment(ClaudeAgentOptions(env={"CLAUDE_CONFIG_DIR": "/c"}))
    assert env[SECURE_STORAGE_VARIABLE] == "/c"


def test_cli_environment_keeps_the_applications_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/config/a")
    env = cli_environment(ClaudeAgentOptions(env={SECURE_STORAGE_VARIABLE: "/login/b"}))
    assert env[SECURE_STORAGE_VARIABLE] == "/login/b"
    monkeypatch.setenv(SECURE_STORAGE_VARIABLE, "/login/c")
    assert SECURE_STORAGE_VARIABLE not in cli_environment(
        ClaudeAgentOptions(env={"A": "b"})
    )


def test_resolved_cwd(tmp_path: Path) -> None:
    assert resolved_cwd(ClaudeAgentOptions(cwd=tmp_path / "x" / "..")) == str(tmp_path)
    assert resolved_cwd(ClaudeAgentOptions()) == str(Path.cwd())


def test_options_factory_gets_the_attempt() -> None:
    seen: list[ClaudeAgentOptionsContext] = []

    def factory(context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        seen.append(context)
        return ClaudeAgentOptions(model="m")

    runner = ClaudeAgentRunner(ClaudeAgentDefinition(options=factory))
    driver = SessionDriver(runner, session_id="s-9")
    context = driver.context(turn_id="t-3", step=1, pending=(), resume=None, attempt=2)
    assert runner.options_for(context).model == "m"
    assert seen == [ClaudeAgentOptionsContext(flow_id="s-9", turn_id="t-3", attempt=2)]


def test_options_factory_must_return_options() -> None:
    runner = ClaudeAgentRunner(
        # A factory that breaks its contract, on purpose.
        ClaudeAgentDefinition(options=lambda _context: {"model": "m"})  # pyright: ignore[reportArgumentType]
    )
    context = SessionDriver(runner).context(
        turn_id="t", step=1, pending=(), resume=None
    )
    with pytest.raises(TypeError, match="return `ClaudeAgentOptions`"):
        runner.options_for(context)


async def test_run_model_fails_before_any_cli_starts() -> None:
    # A factory's options are checked per attempt (options given as they are
    # are refused when the agent is defined: tests/claude_defs/).
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=lambda _context: ClaudeAgentOptions(
                permission_mode="bypassPermissions", cli_path="/nonexistent/claude"
            )
        )
    )
    driver = SessionDriver(runner)
    with pytest.raises(TypeError, match="permission_mode"):
        await driver.turn("hello")


async def test_row85_a_callback_read_does_not_let_allowed_tools_list_a_deferring_tool(
    tmp_path: Path,
) -> None:
    """Row 85 (a): no session policy for Bash, so `allowed_tools=["Bash"]` is refused,
    though the callback would answer read; the check never asks the callback."""
    permission = PermissionRecorder(ToolPolicy(effect="read"))
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=fake_options(tmp_path, allowed_tools=["Bash"]),
            claude_code_tool_permission=permission,
        )
    )
    with pytest.raises(TypeError, match=r"`allowed_tools` lists 'Bash'"):
        await SessionDriver(runner, session_id="audit-row85-a").turn(bash("echo x"))
    assert permission.asked == []
    assert not (tmp_path / "cwd" / "x").exists()


# The SDK warns that `allowed_tools=["Bash"]` shadows can_use_tool; the
# adapter's PreToolUse hook still decides every call, as the test shows.
@pytest.mark.filterwarnings("ignore:can_use_tool will not be invoked")
async def test_row85_a_session_read_policy_admits_allowed_tools_whatever_the_callback_says(
    tmp_path: Path,
) -> None:
    """Row 85 (b): a session read policy for Bash admits `allowed_tools=["Bash"]`
    though the callback answers a write; the check does not call the callback,
    and the callback still decides each call (it defers for approval)."""
    permission = PermissionRecorder(ToolPolicy(effect="non_idempotent_write"))
    runner = ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=fake_options(tmp_path, allowed_tools=["Bash"]),
            tool_policies={"Bash": ToolPolicy(effect="read")},
            claude_code_tool_permission=permission,
        )
    )
    driver = SessionDriver(runner, session_id="audit-row85-b")
    said = await driver.turn("dex-script: say accepted")
    assert said.text == "said: accepted"
    assert permission.asked == []

    result = await driver.turn(bash("echo ran"))
    assert permission.asked == [("Bash", {"command": "echo ran"})]
    [call] = result.calls
    assert call.policy == ToolPolicy(effect="non_idempotent_write")
    assert call.policy.needs_approval
    assert len(result.segments) == 2
    assert result.text == "done: ran"
