"""Wrong arguments to the session RPCs: only `UserError`s come out, and nothing is written.

Hypothesis draws a wrong value for one argument of a `SessionClient` RPC at a
time: another type (None, an int, a dict, a string for a flag), a lone
surrogate, an empty or overlong ID, a negative count or timeout, a count past
2**63 - 1. Each call raises `InvalidArgumentError` naming that argument, before
any RPC: the session's workflow history and its events stay as they were, and
the interrupt it waits on stays pending (`approved="false"` is no rejection).
A session that does not exist is `UnknownSessionError`, and an Update sent past
the client (a raw Temporal client, as `temporal workflow update` is) with a
string for a flag is refused by the workflow's validator, which writes nothing.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from dex_agents import (
    InvalidArgumentError,
    UnknownSessionError,
    UserError,
)
from dex_agents.temporal import SessionClient
from dex_agents.temporal._arguments import INVALID_ARGUMENT, MAX_ID_BYTES
from dex_agents.temporal._client import _update_errors  # pyright: ignore[reportPrivateUsage]
from support.history import settled_history_length
from support.session_harness import Harness

# A module mark: pytest-timeout reads the limit before fixtures run.
pytestmark = pytest.mark.timeout(600)

REFUND = 'call create_refund {"orderId": "5"}'
_EXAMPLES = 12
"""Examples per argument; 31 arguments make some 370 refused calls a run."""
_SETTINGS = settings(
    max_examples=_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ----- wrong values, by the kind of argument -------------------------------------

_odd = st.sampled_from([object(), 1j, (1, 2), frozenset({"x"}), Ellipsis])
"""Objects no RPC argument is."""
_surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
lone_surrogate_text = st.tuples(
    st.text(max_size=6), _surrogate, st.text(max_size=6)
).map("".join)
"""A string UTF-8 cannot encode: no wire format carries it."""
other_types = st.one_of(
    st.integers(),
    st.floats(),
    st.binary(max_size=8),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.text(max_size=3), max_size=2),
    _odd,
)
"""Values that are no string, no bool and no None."""
bad_text = st.one_of(st.none(), st.booleans(), other_types, lone_surrogate_text)
bad_optional_text = st.one_of(st.booleans(), other_types, lone_surrogate_text)
bad_id = st.one_of(
    bad_text,
    st.just(""),
    st.integers(MAX_ID_BYTES + 1, MAX_ID_BYTES + 300).map(lambda n: "x" * n),
    st.integers(MAX_ID_BYTES // 2 + 1, MAX_ID_BYTES).map(lambda n: "é" * n),
)
bad_flag = st.one_of(
    st.none(),
    st.sampled_from(["false", "true", "False", "0", "1", "no", ""]),
    st.text(max_size=6),
    other_types,
)


def bad_count(minimum: int) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(max_value=minimum - 1),
        st.integers(min_value=2**63),  # more than a store keeps
        st.floats(),
        st.text(max_size=4),
        _odd,
    )


bad_timeout = st.one_of(
    st.booleans(),
    st.text(max_size=4),
    st.integers(max_value=-1),
    st.floats(max_value=-1e-9),
    st.sampled_from(
        [math.nan, math.inf, -math.inf, 10**400, timedelta(seconds=-1), "5", b"5"]
    ),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    _odd,
)
bad_images = st.one_of(
    st.text(max_size=4),
    st.integers(),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.one_of(st.none(), st.text(max_size=3), st.integers()), min_size=1),
)

bad_edit = st.one_of(
    other_types.filter(lambda v: not isinstance(v, dict)),
    st.booleans(),
    st.text(max_size=4),
    st.dictionaries(st.integers(), st.text(max_size=3), min_size=1, max_size=2),
    st.sampled_from([{"orderId": float("nan")}, {"orderId": float("inf")}]),
    lone_surrogate_text.map(lambda t: {"orderId": t}),
    _odd.map(lambda v: {"orderId": v}),
)
bad_limit = st.one_of(
    st.booleans(),
    st.text(max_size=4),
    st.integers(max_value=0),
    st.floats(max_value=0.0),
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


# ----- the RPCs, each argument with its wrong values --------------------------------


def _rpcs(
    sid: str, iid: str
) -> dict[str, dict[str, tuple[Any, st.SearchStrategy[Any]]]]:
    """Each RPC's arguments: a valid value, and the wrong ones for it."""
    return {
        "start": {
            "session_id": (sid, bad_id),
            "initial_message": (None, bad_optional_text),
            "initial_images": (None, bad_images),
        },
        "send_user_message": {
            "session_id": (sid, bad_id),
            "text": ("say hi", bad_text),
            "images": (None, bad_images),
        },
        "send_and_wait": {
            "session_id": (sid, bad_id),
            "text": ("say hi", bad_text),
            "images": (None, bad_images),
            "turns": (0, bad_count(0)),
        },
        "resolve_interrupt": {
            "session_id": (sid, bad_id),
            "interrupt_id": (iid, bad_id),
            "approved": (True, bad_flag),
            "rejection_message": (None, bad_optional_text),
            "timeout": (5, bad_timeout),
            "resolved_by": (None, bad_optional_text),
            "edited_input": (None, bad_edit),
            "new_spend_limit": (None, bad_limit),
        },
        "cancel_turn": {
            "session_id": (sid, bad_id),
            "reason": ("", bad_text),
            "cancelled_by": (None, bad_optional_text),
            "timeout": (5, bad_timeout),
        },
        "end": {
            "session_id": (sid, bad_id),
            "reason": ("", bad_text),
            "force": (True, bad_flag),
            "timeout": (5, bad_timeout),
        },
        "snapshot": {"session_id": (sid, bad_id), "turns": (0, bad_count(0))},
        "engine_info": {"session_id": (sid, bad_id)},
        "wait_for_idle": {
            "session_id": (sid, bad_id),
            "turns": (0, bad_count(0)),
            "timeout": (5, bad_timeout),
        },
        "history": {"session_id": (sid, bad_id), "page_size": (10, bad_count(1))},
        "events": {"session_id": (sid, bad_id), "after": (0, bad_count(0))},
        "follow": {"session_id": (sid, bad_id), "after": (0, bad_count(0))},
    }


async def _call(sessions: SessionClient, rpc: str, arguments: dict[str, Any]) -> None:
    """Call `rpc` with `arguments` by name; an iterator is read to its first item."""
    method: Callable[..., Any] = getattr(sessions, rpc)
    async with asyncio.timeout(30):
        result = method(**arguments)
        if rpc in ("history", "follow"):
            async for _ in result:
                break
        else:
            await result


async def _refusal(
    sessions: SessionClient, rpc: str, arguments: dict[str, Any]
) -> BaseException | None:
    try:
        await _call(sessions, rpc, arguments)
    except Exception as err:  # the test sorts them: any other kind fails it
        return err
    return None


async def _waiting_session(harness: Harness) -> tuple[str, str]:
    """A session waiting for the approval of one call: its ID and the interrupt's."""
    sid = harness.session_id()
    await harness.sessions.start(sid, initial_message=REFUND)
    (interrupt,) = (await harness.sessions.wait_for_idle(sid)).pending_interrupts
    return sid, interrupt.interrupt_id


def _on_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=120)


async def test_wrong_arguments_raise_invalid_argument_errors_and_write_nothing(
    harness: Harness, client: Client
) -> None:
    sessions = harness.sessions
    sid, iid = await _waiting_session(harness)
    length = await settled_history_length(client, sid)
    events = len(await sessions.events(sid))
    loop = asyncio.get_running_loop()
    refused: list[tuple[str, str]] = []

    def check_argument(
        rpc: str, argument: str, valid: dict[str, Any], bad: Any
    ) -> None:
        @_SETTINGS
        @given(value=bad)
        def refuses(value: Any) -> None:
            err = _on_loop(loop, _refusal(sessions, rpc, {**valid, argument: value}))
            assert isinstance(err, InvalidArgumentError), (rpc, argument, value, err)
            assert isinstance(err, UserError | ValueError)
            assert err.argument == argument, (rpc, value, err)
            assert f"`{argument}" in str(err), str(err)
            assert len(str(err)) < 600, "the message shows a bounded value"
            assert _on_loop(loop, settled_history_length(client, sid)) == length, (
                f"{rpc}({argument}={value!r}) wrote history"
            )

        refuses()
        refused.append((rpc, argument))

    rpcs = _rpcs(sid, iid)
    for rpc, arguments in rpcs.items():
        valid = {name: value for name, (value, _) in arguments.items()}
        for argument, (_, bad) in arguments.items():
            await asyncio.to_thread(check_argument, rpc, argument, valid, bad)

    assert len(refused) == sum(len(arguments) for arguments in rpcs.values()) == 38
    assert await settled_history_length(client, sid) == length
    assert len(await sessions.events(sid)) == events
    snapshot = await sessions.snapshot(sid)
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == [iid]
    assert snapshot.status == "waiting_for_approval"
    assert harness.ledger.count("create_refund_started") == 0


async def test_a_string_for_approved_is_refused_not_read_as_a_rejection(
    harness: Harness, client: Client
) -> None:
    sessions = harness.sessions
    sid, iid = await _waiting_session(harness)
    length = await settled_history_length(client, sid)
    for value in ["false", "true", 0, 1, None, {"approved": False}]:
        with pytest.raises(
            InvalidArgumentError, match="`approved` must be True or False"
        ):
            await sessions.resolve_interrupt(sid, iid, approved=value)  # pyright: ignore[reportArgumentType]
    for value in [5, None, {"id": iid}, "\ud800", ""]:
        with pytest.raises(InvalidArgumentError, match="`interrupt_id`") as caught:
            await sessions.resolve_interrupt(sid, value, approved=True)  # pyright: ignore[reportArgumentType]
        assert caught.value.argument == "interrupt_id"
    with pytest.raises(InvalidArgumentError, match="lone surrogate '\\\\ud800'"):
        await sessions.send_user_message(sid, "hi \ud800")
    assert await settled_history_length(client, sid) == length
    # The call still waits, and a bool decides it.
    assert await sessions.resolve_interrupt(sid, iid, approved=True)
    done = await sessions.wait_for_idle(sid, timeout=30)
    assert done.turns[-1].final_text == "done: create_refund=refunded order 5"


async def test_a_zero_timeout_is_refused_for_what_is_never_recorded_for_later(
    harness: Harness, client: Client
) -> None:
    # A cancel, an end and an edited approval apply only if a worker takes them
    # while the caller waits; with timeout=0 they could only ever fail
    # (`NoWorkerError` with a worker running), so they are refused, naming why.
    sessions = harness.sessions
    sid, iid = await _waiting_session(harness)
    length = await settled_history_length(client, sid)
    calls: list[tuple[str, str, Callable[[], Coroutine[Any, Any, Any]]]] = [
        ("a cancel", "int 0", lambda: sessions.cancel_turn(sid, timeout=0)),
        (
            "an end",
            "timedelta datetime.timedelta(0)",
            lambda: sessions.end(sid, force=True, timeout=timedelta(0)),
        ),
        (
            "an edited approval",
            "float 0.0",
            lambda: sessions.resolve_interrupt(
                sid, iid, approved=True, edited_input={"orderId": "6"}, timeout=0.0
            ),
        ),
    ]
    for what, got, call in calls:
        with pytest.raises(InvalidArgumentError) as caught:
            await call()
        assert caught.value.argument == "timeout"
        assert str(caught.value) == (
            f"`timeout` must be more than 0 for {what}, got {got}; {what} is never "
            "recorded for later, so it applies only if a worker takes it while you "
            "wait: pass timeout=10, or None to wait as long as it takes"
        )
    assert await settled_history_length(client, sid) == length
    # Nothing applied: the call still waits, and the same edit with time applies.
    assert await sessions.resolve_interrupt(
        sid, iid, approved=True, edited_input={"orderId": "6"}, timeout=10
    )
    done = await sessions.wait_for_idle(sid, timeout=30)
    assert (done.turns[-1].final_text or "").startswith(
        "done: create_refund=refunded order 6\n"
    )
    assert harness.ledger.count("create_refund_started") == 1


async def test_a_count_past_what_a_store_keeps_is_refused_not_an_overflow(
    harness: Harness,
) -> None:
    # 2**63 passed `check_count`, then SQLite raised OverflowError.
    sessions = harness.sessions
    sid = harness.session_id()
    await sessions.start(sid)  # a session that exists: its reads answer
    await sessions.wait_for_idle(sid)
    too_many = 2**63
    calls: dict[str, Callable[[], Coroutine[Any, Any, Any]]] = {
        "after": lambda: sessions.events(sid, after=too_many),
        "page_size": lambda: _call(
            sessions, "history", {"session_id": sid, "page_size": too_many}
        ),
        "turns": lambda: sessions.snapshot(sid, turns=too_many),
    }
    for argument, call in calls.items():
        with pytest.raises(InvalidArgumentError) as caught:
            await call()
        assert caught.value.argument == argument
        assert str(caught.value) == (
            f"`{argument}` must be at most 2**63 - 1 (9,223,372,036,854,775,807), the "
            "largest whole number a store keeps, got int 9223372036854775808"
        )
    with pytest.raises(InvalidArgumentError, match="`after` must be at most"):
        sessions.follow(sid, after=2**70)
    # The largest is taken.
    assert await sessions.events(sid, after=too_many - 1) == []
    assert [t async for t in sessions.history(sid, page_size=too_many - 1)] == []


async def test_a_blank_first_message_starts_no_session(harness: Harness) -> None:
    # Update-with-start starts the workflow even when the Update is refused: the
    # client refuses first.
    for blank in ("", "  \n"):
        sid = harness.session_id()
        with pytest.raises(InvalidArgumentError, match="must not be blank") as caught:
            await harness.sessions.start(sid, initial_message=blank)
        assert caught.value.argument == "initial_message"
        with pytest.raises(UnknownSessionError):
            await harness.sessions.snapshot(sid)


async def test_a_session_that_does_not_exist_is_an_unknown_session_error(
    harness: Harness, client: Client
) -> None:
    sessions = harness.sessions
    sid = f"never-started-{uuid.uuid4().hex[:8]}"
    calls: dict[str, Callable[[], Coroutine[Any, Any, Any]]] = {
        "send_user_message": lambda: sessions.send_user_message(sid, "hi"),
        "send_and_wait": lambda: sessions.send_and_wait(sid, "hi"),
        "resolve_interrupt": lambda: sessions.resolve_interrupt(
            sid, "intr_0", approved=True
        ),
        "resolve_interrupt(timeout)": lambda: sessions.resolve_interrupt(
            sid, "intr_0", approved=False, timeout=5
        ),
        "end": lambda: sessions.end(sid),
        "end(force)": lambda: sessions.end(sid, force=True, timeout=5),
        "snapshot": lambda: sessions.snapshot(sid),
        "wait_for_idle": lambda: sessions.wait_for_idle(sid),
        "wait_for_idle(timeout)": lambda: sessions.wait_for_idle(sid, timeout=5),
    }
    for name, call in calls.items():
        async with asyncio.timeout(30):
            with pytest.raises(UnknownSessionError) as caught:
                await call()
        err = caught.value
        assert isinstance(err, UserError), name
        assert err.session_id == sid and f"unknown session {sid!r}" in str(err), name
    # Nothing was started under the ID.
    with pytest.raises(RPCError) as missing:
        await client.get_workflow_handle(sid).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND
    # The store's reads say so too (a typo read nothing, or followed forever).
    with pytest.raises(UnknownSessionError):
        await sessions.events(sid)
    with pytest.raises(UnknownSessionError):
        [t async for t in sessions.history(sid)]


def _json_values() -> st.SearchStrategy[Any]:
    """Any JSON value but a boolean: what a raw client can put where a flag goes."""
    scalars = st.one_of(
        st.none(),
        st.integers(min_value=-(2**53), max_value=2**53),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from(["false", "true", "0", "1", "no", "yes", "off", "on"]),
        st.text(max_size=6),
    )
    return st.one_of(
        scalars,
        st.lists(scalars, max_size=2),
        st.dictionaries(st.text(max_size=3), scalars, max_size=2),
    )


async def test_an_update_past_the_client_is_refused_by_the_validator(
    harness: Harness, client: Client
) -> None:
    """A raw Update (as `temporal workflow update` sends) with a string flag writes nothing."""
    sid, iid = await _waiting_session(harness)
    handle = client.get_workflow_handle(sid)
    length = await settled_history_length(client, sid)
    loop = asyncio.get_running_loop()

    async def raw(update: str, argument: dict[str, Any]) -> WorkflowUpdateFailedError:
        try:
            await handle.execute_update(update, argument, result_type=bool)
        except WorkflowUpdateFailedError as err:
            return err
        raise AssertionError(f"{update}({argument!r}) was accepted")

    # A string flag: the converter forgives it, the validator does not.
    err = await raw("resolve_interrupt", {"interrupt_id": iid, "approved": "false"})
    assert isinstance(err.cause, ApplicationError)
    assert err.cause.type == INVALID_ARGUMENT
    assert err.cause.details == ("approved",)
    assert "`approved` must be a JSON boolean" in err.cause.message
    assert "str 'false'" in err.cause.message
    # The client's mapping of that refusal.
    with pytest.raises(InvalidArgumentError) as mapped, _update_errors(sid, iid):
        raise err
    assert mapped.value.argument == "approved"
    err = await raw("resolve_interrupt", {"interrupt_id": "", "approved": True})
    assert isinstance(err.cause, ApplicationError)
    assert (err.cause.type, err.cause.details) == (INVALID_ARGUMENT, ("interrupt_id",))
    err = await raw("end_session", {"reason": "", "force": 1})
    assert isinstance(err.cause, ApplicationError)
    assert (err.cause.type, err.cause.details) == (INVALID_ARGUMENT, ("force",))
    err = await raw("send_user_message", {"text": "", "images": []})
    assert isinstance(err.cause, ApplicationError)

    @_SETTINGS
    @given(approved=_json_values())
    def refused(approved: Any) -> None:
        argument = {"interrupt_id": iid, "approved": approved}
        err = _on_loop(loop, raw("resolve_interrupt", argument))
        # Refused by the validator, or by the converter when no bool fits.
        assert isinstance(err.cause, ApplicationError), err

    await asyncio.to_thread(refused)
    assert await settled_history_length(client, sid) == length
    snapshot = await harness.sessions.snapshot(sid)
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == [iid]
    # A real bool still passes the validator.
    assert await handle.execute_update(
        "resolve_interrupt", {"interrupt_id": iid, "approved": False}, result_type=bool
    )


async def test_a_session_client_refuses_a_wrong_client_flow_or_store(
    client: Client,
) -> None:
    """A flow passed by its name failed only at `start`, with an AttributeError."""
    with pytest.raises(InvalidArgumentError) as flow:
        SessionClient(client, "SupportAgent")  # pyright: ignore[reportArgumentType]
    assert flow.value.argument == "flow"
    assert (
        "`flow` must be an `AgentSessionFlow` or None, got str 'SupportAgent'"
        in str(flow.value)
    )
    assert "not its name" in str(flow.value)
    with pytest.raises(InvalidArgumentError) as swapped:
        SessionClient("localhost:7233")  # pyright: ignore[reportArgumentType]
    assert swapped.value.argument == "client"
    with pytest.raises(InvalidArgumentError) as store:
        SessionClient(client, None, "runtime.sqlite")  # pyright: ignore[reportArgumentType]
    assert store.value.argument == "store"
    assert SessionClient(client).flow is None  # a client of existing sessions only
