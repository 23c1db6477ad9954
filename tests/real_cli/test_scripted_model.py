import pytest
from pydantic import JsonValue

from dex_agents._scripted._script import (
    Call,
    Fail,
    PlannedReply,
    Recall,
    Say,
    Script,
    ScriptError,
    Stall,
    TextReply,
    ToolCallSpec,
    ToolUseReply,
    parse_script,
    plan_reply,
)

REFUSAL = "PreToolUse:mcp__tools__refund hook error: did not run. Call again by itself."


def user(*blocks: JsonValue) -> JsonValue:
    return {"role": "user", "content": list(blocks)}


def text(value: str) -> JsonValue:
    return {"type": "text", "text": value}


def tool_use(use_id: str, name: str, input_: JsonValue) -> JsonValue:
    return {"type": "tool_use", "id": use_id, "name": name, "input": input_}


def result(use_id: str, content: str, *, as_blocks: bool = False) -> JsonValue:
    body: JsonValue = [text(content)] if as_blocks else content
    return {"type": "tool_result", "tool_use_id": use_id, "content": body}


def assistant(*blocks: JsonValue) -> JsonValue:
    return {"role": "assistant", "content": list(blocks)}


ENVIRONMENT: JsonValue = {"role": "system", "content": "# Environment"}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("say hello world", Script(command=Say(text="hello world"))),
        ("recall", Script(command=Recall())),
        (
            'call lookup {"orderId": "7"}',
            Script(
                command=Call(
                    calls=(ToolCallSpec(name="lookup", input={"orderId": "7"}),)
                )
            ),
        ),
        (
            'call a {"x": 1} && call b {} ;; pause g1',
            Script(
                command=Call(
                    calls=(
                        ToolCallSpec(name="a", input={"x": 1}),
                        ToolCallSpec(name="b", input={}),
                    )
                ),
                pause="g1",
            ),
        ),
        ("call b", Script(command=Call(calls=(ToolCallSpec(name="b", input={}),)))),
        ("stall g", Script(command=Stall(gate="g"))),
        ("fail", Script(command=Fail())),
        (
            'say x ;; fail ;; reuse refund {"orderId": "1"}',
            Script(
                command=Say(text="x"),
                fail_after_results=True,
                reuse=ToolCallSpec(name="refund", input={"orderId": "1"}),
            ),
        ),
    ],
)
def test_parse(source: str, expected: Script) -> None:
    assert parse_script(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "dance",
        "recall me",
        "call lookup {not json",
        'call lookup ["a"]',
        "call lookup {} && say hi",
        "say hi ;; pause",
        "say hi ;; sing",
        "stall",
    ],
)
def test_parse_rejects(source: str) -> None:
    with pytest.raises(ScriptError):
        parse_script(source)


def test_say_reads_the_last_prompt_and_skips_trailing_system_message() -> None:
    messages = [
        user(text("dex-script: say one")),
        assistant(text("said: one")),
        user(text("<system-reminder>x</system-reminder>"), text("dex-script: say two")),
        ENVIRONMENT,
    ]
    assert plan_reply(messages) == PlannedReply(reply=TextReply(text="said: two"))


def test_string_content_and_text_before_the_marker() -> None:
    messages: list[JsonValue] = [
        {"role": "user", "content": "please dex-script: say hi ;; pause g"}
    ]
    assert plan_reply(messages) == PlannedReply(
        reply=TextReply(text="said: hi"), pause="g"
    )


def test_recall_lists_earlier_prompts_in_order() -> None:
    messages = [
        user(text("dex-script: say one")),
        assistant(text("said: one")),
        user(text('dex-script: call lookup {"orderId": "7"}')),
        assistant(text("done")),
        user(text("dex-script: recall")),
    ]
    reply = plan_reply(messages).reply
    assert reply == TextReply(
        text='recalled:\ndex-script: say one\ndex-script: call lookup {"orderId": "7"}'
    )
    assert plan_reply([user(text("dex-script: recall"))]).reply == TextReply(
        text="recalled:\nnothing"
    )


def test_call_resolves_mcp_names_and_joins_calls() -> None:
    messages = [
        user(text('dex-script: call lookup {"a": 1} && call Bash {} ;; pause g'))
    ]
    planned = plan_reply(messages, tool_names=["Bash", "mcp__tools__lookup"])
    assert planned == PlannedReply(
        reply=ToolUseReply(
            calls=(
                ToolCallSpec(name="mcp__tools__lookup", input={"a": 1}),
                ToolCallSpec(name="Bash", input={}),
            )
        )
    )


def test_ambiguous_or_unknown_tool_name_is_kept() -> None:
    messages = [user(text("dex-script: call lookup {}"))]
    names = ["mcp__a__lookup", "mcp__b__lookup"]
    assert plan_reply(messages, tool_names=names).reply == ToolUseReply(
        calls=(ToolCallSpec(name="lookup", input={}),)
    )


def test_pending_results_are_summarized_and_pause_applies_to_the_answer() -> None:
    messages = [
        user(
            text('dex-script: call lookup {"a": 1} && call lookup {"a": 2} ;; pause g')
        ),
        assistant(
            tool_use("t1", "lookup", {"a": 1}), tool_use("t2", "lookup", {"a": 2})
        ),
        user(result("t1", "one"), result("t2", "two", as_blocks=True)),
        ENVIRONMENT,
    ]
    assert plan_reply(messages) == PlannedReply(
        reply=TextReply(text="done: one; two"), pause="g"
    )


def test_refused_call_is_called_again_alone_then_summarized() -> None:
    prompt = user(
        text('dex-script: call refund {"orderId": "1"} && call refund {"orderId": "2"}')
    )
    both = assistant(
        tool_use("t1", "refund", {"orderId": "1"}),
        tool_use("t2", "refund", {"orderId": "2"}),
    )
    resumed = user(
        result("t2", REFUSAL),
        result("t1", "refunded order 1"),
        text("Continue from where you left off."),
    )
    messages = [prompt, both, resumed]
    assert plan_reply(messages).reply == ToolUseReply(
        calls=(ToolCallSpec(name="refund", input={"orderId": "2"}),)
    )
    messages += [
        assistant(tool_use("t3", "refund", {"orderId": "2"})),
        user(result("t3", "refunded order 2")),
    ]
    assert plan_reply(messages).reply == TextReply(
        text="done: refunded order 1; refunded order 2"
    )


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [user(text("no command here"))],
        [user(text("dex-script: fail"))],
        [user(text("dex-script: stall g"))],
        [user(text("dex-script: say x ;; fail"))],
        [user(text("dex-script: say x ;; reuse lookup {}"))],
        [assistant(text("dex-script: say x"))],
    ],
)
def test_plan_rejects_what_the_mock_cannot_answer(messages: list[JsonValue]) -> None:
    with pytest.raises(ScriptError):
        plan_reply(messages)
