"""The conformance suite every `RuntimeStore` implementation must pass.

Call `run_runtime_store_conformance` from an async test with a factory that
returns a fresh, empty store. Each rule runs on its own store, which the suite
closes afterwards. A broken rule raises `AssertionError` naming the rule; the
checks use explicit raises, so they still run under `python -O`.

Example:
    ```python
    async def test_my_store(tmp_path: Path) -> None:
        await run_runtime_store_conformance(
            lambda: MyStore.open(tmp_path / f"{uuid4()}.sqlite")  # empty each time
        )
    ```
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import cast

from .._errors import UserError
from ..session import StoredMessage
from ..session._events import AgentEventType, EventRecord
from ..session._json import JsonObject, JsonValue
from ..stores._protocols import BlobConflictError, RuntimeStore, SegmentConflictError

_TRICKY: JsonObject = {
    "unicode": 'héllo wörld ✓ 日本語 🚀 \u0000 "quoted" \\ back',
    "nested": {
        "list": [1, 2.5, -3, True, False, None, [], {}],
        "deep": {"a": {"b": []}},
    },
    "big": 2**53 + 1,
    "empty": "",
    "🔑": ["emoji key"],
}


def _broken(rule: str) -> AssertionError:
    return AssertionError(f"runtime store rule broken: {rule}")


def _check(ok: bool, rule: str) -> None:
    if not ok:
        raise _broken(rule)


def _msg(text: str, **item: JsonValue) -> StoredMessage:
    return StoredMessage(role="assistant", text=text, item={"kind": "test", **item})


def _event(
    session_id: str, seq: int, *, kind: AgentEventType = "text_delta", cursor: int = 0
) -> EventRecord:
    return EventRecord(
        session_id=session_id,
        turn_id="turn-1",
        step_execution_id="step-1",
        attempt=1,
        seq=seq,
        type=kind,
        data={"text": f"delta {seq}"},
        cursor=cursor,
    )


async def _segments_are_immutable(store: RuntimeStore) -> None:
    first = [_msg("one"), _msg("two", n=[1, {"x": None}])]
    await store.put_segment("s1", "seg-a", None, first)
    _check(
        await store.read_segment("s1", "seg-a") == first,
        "read_segment returns what put_segment wrote, in order",
    )
    await store.put_segment("s1", "seg-a", None, list(first))
    _check(
        await store.read_segment("s1", "seg-a") == first,
        "rewriting a segment with identical content is a no-op",
    )

    for parent, messages, what in (
        (None, [_msg("other")], "different messages"),
        ("seg-z", first, "a different parent"),
        (None, first[:1], "fewer messages"),
    ):
        try:
            await store.put_segment("s1", "seg-a", parent, messages)
        except SegmentConflictError:
            pass
        else:
            raise _broken(
                f"rewriting a segment with {what} raises `SegmentConflictError`"
            )
    _check(
        await store.read_segment("s1", "seg-a") == first,
        "a rejected rewrite leaves the segment unchanged",
    )

    returned = await store.read_segment("s1", "seg-a")
    returned.append(_msg("extra"))
    returned[0].item["kind"] = "mutated"
    _check(
        await store.read_segment("s1", "seg-a") == first,
        "mutating a returned segment does not change the store",
    )

    await store.put_segment("s1", "seg-empty", None, [])
    _check(
        await store.read_segment("s1", "seg-empty") == [],
        "an empty segment can be written and read",
    )


async def _chains_read_oldest_first(store: RuntimeStore) -> None:
    root, middle, head = (
        [_msg("r1"), _msg("r2")],
        [_msg("m1")],
        [_msg("h1"), _msg("h2")],
    )
    await store.put_segment("s1", "root", None, root)
    # A crashed attempt's segment on the same parent, never recorded by the workflow.
    await store.put_segment("s1", "turn-1/attempt-1", "root", [_msg("crashed")])
    await store.put_segment("s1", "turn-1/attempt-2", "root", middle)
    await store.put_segment("s1", "turn-2/attempt-1", "turn-1/attempt-2", head)
    # The same IDs in another session are a different chain.
    await store.put_segment("s2", "root", None, [_msg("other session")])

    transcript = await store.read_transcript("s1", "turn-2/attempt-1")
    _check(
        transcript == root + middle + head,
        "read_transcript returns the chain ending at the head, oldest segment first",
    )
    _check(
        all(m.text != "crashed" for m in transcript),
        "an unreferenced segment (a crashed attempt's) is not on the head's chain",
    )
    _check(
        await store.read_transcript("s1", "turn-1/attempt-2") == root + middle,
        "read_transcript stops at the given head",
    )
    _check(
        await store.read_transcript("s1", "root") == root,
        "a root segment alone is its own transcript",
    )
    _check(
        await store.read_transcript("s1", None) == [],
        "a None head is the empty transcript",
    )
    _check(
        await store.read_transcript("s2", "root") == [_msg("other session")],
        "segments are scoped to their session",
    )


async def _missing_segments_raise_key_error(store: RuntimeStore) -> None:
    await store.put_segment("s1", "orphan", "never-written", [_msg("x")])
    await store.put_segment("s1", "only-here", None, [_msg("y")])
    attempts: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        (
            "read_segment of an unknown segment raises KeyError",
            lambda: store.read_segment("s1", "nope"),
        ),
        (
            "read_segment of another session's segment raises KeyError",
            lambda: store.read_segment("s2", "only-here"),
        ),
        (
            "read_transcript of an unknown head raises KeyError",
            lambda: store.read_transcript("s1", "nope"),
        ),
        (
            "read_transcript with a missing parent on the chain raises KeyError",
            lambda: store.read_transcript("s1", "orphan"),
        ),
    ]
    for rule, call in attempts:
        try:
            await call()
        except KeyError:
            continue
        raise _broken(rule)


async def _raises(
    error: type[Exception], call: Callable[[], Awaitable[object]], rule: str
) -> Exception:
    """The `error` that `call` raises; the rule is broken if it raises nothing."""
    try:
        await call()
    except error as e:
        return e
    raise _broken(rule)


async def _transcript_tails_read_oldest_first(store: RuntimeStore) -> None:
    root, first, second, head = (
        [_msg("r1"), _msg("r2")],
        [_msg("f1")],
        [_msg("s1"), _msg("s2")],
        [_msg("h1")],
    )
    await store.put_segment("s1", "root", None, root)
    await store.put_segment("s1", "t1", "root", first)
    await store.put_segment("s1", "t2/crashed", "t1", [_msg("crashed")])
    await store.put_segment("s1", "t2", "t1", second)
    await store.put_segment("s1", "t3", "t2", head)
    whole = root + first + second + head
    for max_segments, expected in (
        (1, head),
        (2, second + head),
        (3, first + second + head),
        (4, whole),
        (5, whole),
        (1000, whole),
        (None, whole),
    ):
        got = await store.read_transcript("s1", "t3", max_segments=max_segments)
        _check(
            got == expected,
            f"read_transcript(max_segments={max_segments}) returns the newest "
            "segments of the chain, oldest first "
            f"(got {[m.text for m in got]}, expected {[m.text for m in expected]})",
        )
    _check(
        await store.read_transcript("s1", "t1", max_segments=1) == first,
        "read_transcript(max_segments=1) is the head segment alone",
    )
    _check(
        await store.read_transcript("s1", None, max_segments=1) == [],
        "a None head is the empty transcript whatever max_segments is",
    )

    await store.put_segment("s1", "orphan", "never-written", [_msg("o")])
    _check(
        await store.read_transcript("s1", "orphan", max_segments=1) == [_msg("o")],
        "a chain cut short by max_segments is not missing its older segments",
    )
    await _raises(
        KeyError,
        lambda: store.read_transcript("s1", "orphan", max_segments=2),
        "a missing parent within max_segments raises KeyError",
    )
    await _raises(
        KeyError,
        lambda: store.read_transcript("s1", "nope", max_segments=1),
        "read_transcript(max_segments=1) of an unknown head raises KeyError",
    )
    for bad in (0, -1):
        await _raises(
            UserError,
            lambda bad=bad: store.read_transcript("s1", "t3", max_segments=bad),
            f"read_transcript(max_segments={bad}) raises UserError",
        )


async def _blobs_are_immutable(store: RuntimeStore) -> None:
    # Random bytes: every byte value, NULs included, and nothing compressible.
    big = random.Random(7).randbytes(5 * 1024 * 1024)
    await store.put_blob("s1", "big", big)
    # `object`: the store under test may return anything, which is what is checked.
    got = cast(object, await store.get_blob("s1", "big"))
    _check(
        isinstance(got, bytes) and got == big,
        "get_blob returns the exact bytes of a 5 MB put_blob",
    )
    await store.put_blob("s1", "empty", b"")
    got = cast(object, await store.get_blob("s1", "empty"))
    _check(isinstance(got, bytes) and got == b"", "an empty blob round-trips")

    await store.put_blob("s1", "big", bytes(bytearray(big)))
    await store.put_blob("s1", "empty", b"")
    _check(
        await store.get_blob("s1", "big") == big,
        "rewriting a blob with equal bytes is a no-op",
    )

    for blob_id, data, what in (
        ("big", big[:-1] + bytes([big[-1] ^ 1]), "one byte changed"),
        ("big", big + b"\0", "one byte more"),
        ("big", b"", "empty bytes"),
        ("empty", b"\0", "bytes where it was empty"),
    ):
        await _raises(
            BlobConflictError,
            lambda blob_id=blob_id, data=data: store.put_blob("s1", blob_id, data),
            f"rewriting a blob with {what} raises `BlobConflictError`",
        )
    _check(
        await store.get_blob("s1", "big") == big
        and await store.get_blob("s1", "empty") == b"",
        "a rejected rewrite leaves the blob unchanged",
    )

    await store.put_blob("s2", "big", b"another session")
    _check(
        await store.get_blob("s2", "big") == b"another session"
        and await store.get_blob("s1", "big") == big,
        "blobs are scoped to their session",
    )

    for session_id, blob_id in (("s1", "never-written"), ("s3", "big")):
        error = await _raises(
            KeyError,
            lambda s=session_id, b=blob_id: store.get_blob(s, b),
            f"get_blob({session_id!r}, {blob_id!r}) of an unwritten blob raises KeyError",
        )
        _check(
            session_id in str(error) and blob_id in str(error),
            f"the KeyError of a missing blob names the session and the blob "
            f"(got {error})",
        )


def _turn(number: int, text: str = "") -> JsonObject:
    # A wrong `number` inside: the store must key on the number it is given.
    return {"turn": number, "number": -number, "text": text or f"turn {number}"}


async def _turns_read_newest_first(store: RuntimeStore) -> None:
    _check(
        await store.count_turns("s1") == 0 and await store.read_turns("s1") == [],
        "a session without turns counts 0 and reads none",
    )
    for number in (3, 1, 2, 7, 5, 4, 6):  # recorded out of order
        await store.put_turn("s1", number, _turn(number))
    await store.put_turn("s2", 1, _turn(1, "other session"))

    def numbers(turns: list[JsonObject]) -> list[JsonValue]:
        return [t.get("turn") for t in turns]

    _check(
        await store.read_turns("s1") == [_turn(n) for n in (7, 6, 5, 4, 3, 2, 1)],
        "read_turns returns every turn, newest first, as recorded",
    )
    for before, limit, expected in (
        (None, 3, [7, 6, 5]),
        (5, 3, [4, 3, 2]),
        (2, 3, [1]),
        (1, 3, []),
        (100, 2, [7, 6]),
        (8, 20, [7, 6, 5, 4, 3, 2, 1]),
        (7, 1, [6]),
    ):
        got = numbers(await store.read_turns("s1", before=before, limit=limit))
        _check(
            got == expected,
            f"read_turns(before={before}, limit={limit}) returns the newest "
            f"turns below `before` (got {got}, expected {expected})",
        )

    paged: list[JsonValue] = []
    before: int | None = None
    for _ in range(10):
        page = await store.read_turns("s1", before=before, limit=2)
        if not page:
            break
        paged.extend(numbers(page))
        last = page[-1]["turn"]
        if not isinstance(last, int):
            raise _broken("a turn reads back with the fields it was recorded with")
        before = last
    _check(
        paged == [7, 6, 5, 4, 3, 2, 1],
        f"paging with the smallest number as `before` visits every turn once (got {paged})",
    )

    await store.put_turn("s1", 4, _turn(4, "re-recorded"))
    await store.put_turn("s1", 4, _turn(4, "re-recorded"))
    _check(
        await store.read_turns("s1", before=5, limit=1) == [_turn(4, "re-recorded")],
        "put_turn of a recorded number replaces the turn",
    )
    _check(
        await store.count_turns("s1") == 7,
        "replacing a turn does not change the count",
    )
    _check(
        await store.count_turns("s2") == 1
        and await store.read_turns("s2") == [_turn(1, "other session")]
        and await store.count_turns("s3") == 0
        and await store.read_turns("s3") == [],
        "turns are scoped to their session",
    )

    returned = await store.read_turns("s1", limit=1)
    returned[0]["text"] = "mutated"
    _check(
        await store.read_turns("s1", limit=1) == [_turn(7)],
        "mutating a returned turn does not change the store",
    )

    for bad in (0, -1):
        await _raises(
            UserError,
            lambda bad=bad: store.read_turns("s1", limit=bad),
            f"read_turns(limit={bad}) raises UserError",
        )
    await _raises(
        UserError,
        lambda: store.put_turn("s1", 0, _turn(0)),
        "put_turn of turn number 0 raises UserError (turns count from 1)",
    )
    _check(
        await store.count_turns("s1") == 7,
        "a refused put_turn records nothing",
    )


async def _event_cursors_are_per_session(store: RuntimeStore) -> None:
    _check(await store.append_events([]) == [], "append_events([]) returns no cursors")
    first = await store.append_events(
        [_event("s1", 0, cursor=999), _event("s2", 0), _event("s1", 1)]
    )
    second = await store.append_events([_event("s1", 2), _event("s2", 1)])
    s1 = [first[0], first[2], second[0]]
    s2 = [first[1], second[1]]
    for cursors, session in ((s1, "s1"), (s2, "s2")):
        _check(
            all(c > 0 for c in cursors), f"cursors are positive ({session}: {cursors})"
        )
        _check(
            cursors == sorted(set(cursors)),
            f"cursors strictly increase per session ({session}: {cursors})",
        )
        events = await store.read_events(session)
        _check(
            [e.cursor for e in events] == cursors,
            f"read_events returns the cursors append_events assigned ({session})",
        )
        _check(
            [e.seq for e in events] == list(range(len(cursors))),
            f"read_events keeps append order ({session})",
        )
        _check(
            all(e.session_id == session for e in events),
            f"read_events returns only its session's events ({session})",
        )
    _check(
        await store.read_events("s3") == [],
        "read_events of an unknown session is empty",
    )

    more = await store.append_events([_event("s1", 3)])
    _check(
        more[0] > s1[-1], "a later append gets a larger cursor than every earlier one"
    )


async def _read_after_cursor_with_limit(store: RuntimeStore) -> None:
    cursors = await store.append_events([_event("s1", i) for i in range(6)])
    page = await store.read_events("s1", after=cursors[1], limit=2)
    _check(
        [e.seq for e in page] == [2, 3],
        "read_events(after=c, limit=n) returns the next n events after cursor c",
    )
    rest = await store.read_events("s1", after=cursors[3])
    _check(
        [e.seq for e in rest] == [4, 5],
        "read_events(after=c) returns every later event",
    )
    _check(
        await store.read_events("s1", after=cursors[-1]) == [],
        "read_events after the last cursor is empty",
    )
    original = _event("s1", 0)
    stored = (await store.read_events("s1", limit=1))[0]
    fields = ("turn_id", "step_execution_id", "attempt", "seq", "type", "data")
    _check(
        all(getattr(stored, f) == getattr(original, f) for f in fields),
        "an event reads back with the fields it was appended with",
    )


async def _follow_yields_new_events(store: RuntimeStore, deadline: float) -> None:
    early = await store.append_events([_event("s1", 0), _event("s1", 1)])
    received: list[EventRecord] = []
    first_seen = asyncio.Event()

    async def follow() -> None:
        events = store.follow_events("s1", after=early[0], poll_interval=0.005)
        try:
            async for event in events:
                received.append(event)
                first_seen.set()
                if len(received) == 4:
                    return
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    task = asyncio.create_task(follow())
    try:
        try:
            await asyncio.wait_for(first_seen.wait(), deadline)
        except TimeoutError:
            rule = f"follow_events yields events already logged within {deadline}s"
            raise _broken(rule) from None
        await store.append_events([_event("s2", 0)])
        await store.append_events([_event("s1", 2), _event("s1", 3)])
        await store.append_events([_event("s1", 4)])
        try:
            await asyncio.wait_for(asyncio.shield(task), deadline)
        except TimeoutError:
            raise _broken(
                f"follow_events yields events appended after it started within "
                f"{deadline}s (got {len(received)} of 4)"
            ) from None
    finally:
        task.cancel()
    _check(
        [e.seq for e in received] == [1, 2, 3, 4],
        "follow_events yields only later events of its session, in cursor order "
        f"(got seqs {[e.seq for e in received]})",
    )
    _check(
        all(e.session_id == "s1" for e in received),
        "follow_events yields only its session's events",
    )


async def _snapshots_keep_the_highest_version(store: RuntimeStore) -> None:
    _check(
        await store.get_snapshot("s1") is None,
        "get_snapshot of an unknown session is None",
    )
    _check(await store.list_snapshots() == [], "an empty store lists no snapshots")
    await store.put_snapshot("s1", {"session_id": "s1", "version": 2, "state": "idle"})
    await store.put_snapshot("s1", {"session_id": "s1", "version": 1, "state": "stale"})
    _check(
        await store.get_snapshot("s1")
        == {"session_id": "s1", "version": 2, "state": "idle"},
        "a snapshot with a lower version is ignored",
    )
    await store.put_snapshot("s1", {"session_id": "s1", "state": "no version"})
    _check(
        (await store.get_snapshot("s1") or {}).get("state") == "idle",
        "a snapshot without a version counts as version 0 and is ignored",
    )
    await store.put_snapshot(
        "s1", {"session_id": "s1", "version": 2, "state": "republished"}
    )
    _check(
        (await store.get_snapshot("s1") or {}).get("state") == "republished",
        "a snapshot with an equal version replaces the projection",
    )
    await store.put_snapshot(
        "s1", {"session_id": "s1", "version": 3, "state": "running"}
    )
    _check(
        (await store.get_snapshot("s1") or {}).get("state") == "running",
        "a snapshot with a higher version replaces the projection",
    )

    await store.put_snapshot("s2", {"session_id": "s2"})
    await store.put_snapshot("s3", {"session_id": "s3", "version": 1})
    await store.put_snapshot("s2", {"session_id": "s2", "version": 1})
    await store.put_snapshot("s1", {"session_id": "s1", "version": 0})
    order = [s.get("session_id") for s in await store.list_snapshots()]
    _check(
        order == ["s2", "s3", "s1"],
        "list_snapshots lists each session once, most recently updated first; "
        f"an ignored put changes nothing (got {order})",
    )

    returned = await store.get_snapshot("s3")
    if returned is not None:
        returned["version"] = 99
    _check(
        (await store.get_snapshot("s3") or {}).get("version") == 1,
        "mutating a returned snapshot does not change the store",
    )


async def _json_round_trips(store: RuntimeStore) -> None:
    message = StoredMessage(
        role="user",
        text=str(_TRICKY["unicode"]),
        item={"kind": "user_prompt", **_TRICKY},
    )
    await store.put_segment("sé-🚀", "seg/ü", None, [message])
    _check(
        await store.read_segment("sé-🚀", "seg/ü") == [message],
        "a segment round-trips unicode, NUL, big ints and nested JSON",
    )
    _check(
        await store.read_transcript("sé-🚀", "seg/ü") == [message],
        "a transcript round-trips unicode IDs and content",
    )
    await store.append_events(
        [
            EventRecord(
                session_id="sé-🚀",
                turn_id="t✓",
                step_execution_id="st",
                attempt=2,
                seq=0,
                type="tool_call_finished",
                data=_TRICKY,
            )
        ]
    )
    (event,) = await store.read_events("sé-🚀")
    _check(
        event.data == _TRICKY and event.turn_id == "t✓",
        "event data round-trips unicode and nested JSON",
    )
    snapshot: JsonObject = {"version": 1, **_TRICKY}
    await store.put_snapshot("sé-🚀", snapshot)
    _check(
        await store.get_snapshot("sé-🚀") == snapshot,
        "a snapshot round-trips unicode and nested JSON",
    )
    await store.put_turn("sé-🚀", 1, _TRICKY)
    _check(
        await store.read_turns("sé-🚀") == [_TRICKY],
        "a turn round-trips unicode and nested JSON",
    )
    await store.put_blob("sé-🚀", "blob/ü", "日本語".encode())
    _check(
        await store.get_blob("sé-🚀", "blob/ü") == "日本語".encode(),
        "a blob round-trips under unicode IDs",
    )


async def _snapshots_page_by_status_and_cursor(store: RuntimeStore) -> None:
    for n, status in enumerate(["idle", "running", "idle", "waiting", "idle"]):
        sid = f"p{n}"
        await store.put_snapshot(
            sid, {"session_id": sid, "version": 1, "status": status}
        )

    def ids(page: list[JsonObject]) -> list[object]:
        return [s.get("session_id") for s in page]

    first = await store.list_snapshots(limit=2)
    _check(
        ids(first) == ["p4", "p3"], f"a page holds the newest `limit` ({ids(first)})"
    )
    second = await store.list_snapshots(limit=2, before="p3")
    _check(
        ids(second) == ["p2", "p1"],
        f"`before` continues after that session ({ids(second)})",
    )
    rest = await store.list_snapshots(limit=2, before="p1")
    _check(ids(rest) == ["p0"], f"the last page is short ({ids(rest)})")
    idle = await store.list_snapshots(status="idle")
    _check(ids(idle) == ["p4", "p2", "p0"], f"`status` filters ({ids(idle)})")
    idle_after = await store.list_snapshots(status="idle", limit=1, before="p4")
    _check(
        ids(idle_after) == ["p2"],
        f"`status`, `limit` and `before` combine ({ids(idle_after)})",
    )
    _check(
        await store.list_snapshots(status="ended") == [],
        "a status no session has lists nothing",
    )
    await _raises(
        UserError,
        lambda: store.list_snapshots(before="nobody"),
        "an unknown `before` is a UserError, not an empty page",
    )
    await _raises(
        UserError,
        lambda: store.list_snapshots(limit=0),
        "`limit=0` is a UserError",
    )


_RULES: Sequence[Callable[[RuntimeStore], Awaitable[None]]] = (
    _segments_are_immutable,
    _chains_read_oldest_first,
    _missing_segments_raise_key_error,
    _transcript_tails_read_oldest_first,
    _blobs_are_immutable,
    _turns_read_newest_first,
    _event_cursors_are_per_session,
    _read_after_cursor_with_limit,
    _snapshots_keep_the_highest_version,
    _snapshots_page_by_status_and_cursor,
    _json_round_trips,
)


async def run_runtime_store_conformance(
    make_store: Callable[[], Awaitable[RuntimeStore]],
    *,
    follow_deadline: float = 5.0,
) -> None:
    """Assert every `RuntimeStore` contract, each on a fresh store from `make_store`.

    Args:
        make_store: Returns a new, empty store; the suite closes it.
        follow_deadline: Seconds `follow_events` may take to deliver an event;
            raise it for a store whose polling crosses a slow network.

    Raises:
        AssertionError: A contract is broken; the message names the rule.
    """
    rules = [
        *_RULES,
        functools.partial(_follow_yields_new_events, deadline=follow_deadline),
    ]
    for rule in rules:
        store = await make_store()
        try:
            await rule(store)
        finally:
            await store.close()
