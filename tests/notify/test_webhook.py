"""The webhook notifier against a real HTTP receiver on 127.0.0.1, and its signature."""

from __future__ import annotations

import json
import pickle
import socket
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dex_agents._errors import InvalidArgumentError
from dex_agents.notify import WebhookNotifier
from dex_agents.notify._webhook import (
    ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WebhookError,
)
from dex_agents.session._notification import (
    InterruptNotification,
    NotificationKind,
    preview_arguments,
)
from support.webhook_receiver import Receiver, receiver

SECRET = "s3cr3t-webhook-key-do-not-leak"
__all__ = ["receiver"]  # the fixture, imported


def notification(
    kind: NotificationKind = "created",
    reminder: int = 0,
    interrupt_id: str = "intr_0123456789abcdef",
    arguments: dict[str, object] | None = None,
) -> InterruptNotification:
    return InterruptNotification(
        kind=kind,
        session_id="sess-1",
        flow_type="Ledger",
        interrupt_id=interrupt_id,
        turn_id="turn-1",
        tool_call_id="call-1",
        tool_name="transfer",
        effect="non_idempotent_write",
        reason="moves money",
        arguments_preview=preview_arguments(arguments or {"amount": 10, "to": "Zoë"}),
        created_at="2026-01-02T03:04:05+00:00",
        deadline=None,
        sent_at="2026-01-02T03:04:06+00:00",
        reminder=reminder,
    )


@pytest.fixture
def refused_url() -> Iterator[str]:
    # Bound but not listening: a connection to it is refused, and no other
    # process can take the port while the test runs.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/hook"


async def test_one_call_posts_once_a_signed_body(receiver: Receiver) -> None:
    note = notification()
    await WebhookNotifier(receiver.url, SECRET)(note)

    assert len(receiver.requests) == 1
    request = receiver.requests[0]
    assert json.loads(request.body) == note.to_json()
    assert request.body == json.dumps(
        note.to_json(), separators=(",", ":"), sort_keys=True
    ).encode("utf-8")
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers[ID_HEADER] == note.notification_id
    timestamp = int(request.headers[TIMESTAMP_HEADER])
    assert request.headers[SIGNATURE_HEADER].startswith("sha256=")

    headers, body = request.headers, request.body
    assert WebhookNotifier.verify_signature(SECRET, body, headers)
    assert WebhookNotifier.verify_signature(SECRET.encode(), body, headers)
    lower = {name.lower(): value for name, value in headers.items()}
    upper = {name.upper(): value for name, value in headers.items()}
    assert WebhookNotifier.verify_signature(SECRET, body, lower)
    assert WebhookNotifier.verify_signature(SECRET, body, upper)

    assert not WebhookNotifier.verify_signature("wrong-secret", body, headers)
    assert not WebhookNotifier.verify_signature(
        SECRET, body.replace(b"transfer", b"transfeR"), headers
    )
    assert not WebhookNotifier.verify_signature(SECRET, body + b" ", headers)
    assert WebhookNotifier.verify_signature(SECRET, body, headers, now=timestamp + 299)
    assert not WebhookNotifier.verify_signature(
        SECRET, body, headers, now=timestamp + 301
    )
    assert not WebhookNotifier.verify_signature(
        SECRET, body, headers, now=timestamp - 301
    )
    assert not WebhookNotifier.verify_signature(
        SECRET, body, headers, now=timestamp + 11, tolerance=10
    )
    for missing in (SIGNATURE_HEADER, TIMESTAMP_HEADER):
        partial = {k: v for k, v in headers.items() if k != missing}
        assert not WebhookNotifier.verify_signature(SECRET, body, partial)
    assert not WebhookNotifier.verify_signature(SECRET, body, {})
    # The timestamp is signed: moving it forward (a replay made to look fresh) fails.
    moved = {**headers, TIMESTAMP_HEADER: str(timestamp + 1)}
    assert not WebhookNotifier.verify_signature(SECRET, body, moved, now=timestamp + 1)


async def test_a_retry_after_a_500_repeats_the_id_and_body(receiver: Receiver) -> None:
    receiver.failures_left = 1
    notifier = WebhookNotifier(receiver.url, SECRET, headers={"X-Team": "ops"})
    note = notification(kind="reminder", reminder=2)

    with pytest.raises(WebhookError) as failed:
        await notifier(note)
    await notifier(note)

    message = str(failed.value)
    assert shown(receiver.url) in message and "500" in message
    assert "/hooks/approvals" not in message
    assert "retried" in message and note.notification_id in message
    assert failed.value.status_code == 500
    assert SECRET not in message and SECRET not in repr(failed.value)
    first, second = receiver.requests
    assert first.body == second.body
    assert (
        first.headers[ID_HEADER]
        == second.headers[ID_HEADER]
        == "intr_0123456789abcdef/reminder/2"
    )
    assert first.headers["X-Team"] == "ops"
    for request in (first, second):
        assert WebhookNotifier.verify_signature(SECRET, request.body, request.headers)
    revived = pickle.loads(pickle.dumps(failed.value))
    assert isinstance(revived, WebhookError)
    assert (str(revived), revived.status_code, revived.url) == (
        message,
        500,
        failed.value.url,
    )


async def test_a_refused_connection_raises_webhook_error(refused_url: str) -> None:
    notifier = WebhookNotifier(refused_url, SECRET, timeout=2)
    with pytest.raises(WebhookError) as failed:
        await notifier(notification())
    message = str(failed.value)
    assert shown(refused_url) in message and "retried" in message
    assert failed.value.status_code is None
    assert SECRET not in message
    assert SECRET not in repr(notifier) and SECRET not in str(notifier)


async def test_a_receiver_that_never_answers_times_out(receiver: Receiver) -> None:
    receiver.hang = True
    notifier = WebhookNotifier(receiver.url, SECRET, timeout=0.3)
    with pytest.raises(WebhookError) as failed:
        await notifier(notification())
    assert shown(receiver.url) in str(failed.value)
    assert failed.value.status_code is None
    assert len(receiver.requests) == 1


def shown(url: str) -> str:
    """How the notifier names `url` in messages: `scheme://host:port/…`."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{rest.split('/', 1)[0]}/…"


def test_messages_and_repr_hide_url_credentials() -> None:
    url = "https://user:hunter2@hooks.example.com/in?token=abc123"
    notifier = WebhookNotifier(url, SECRET)
    assert "hunter2" not in repr(notifier) and "abc123" not in repr(notifier)
    assert notifier.url == "https://hooks.example.com/…"
    with pytest.raises(InvalidArgumentError) as failed:
        WebhookNotifier("ftp://user:hunter2@x/", SECRET)
    assert "hunter2" not in str(failed.value)


@pytest.mark.parametrize(
    ("url", "named"),
    [
        # Slack, Discord and Teams put the webhook's secret in its path.
        (
            "https://hooks.slack.com/services/T0001/B0002/XXXXslacksecretXXXX",
            "https://hooks.slack.com/…",
        ),
        (
            "https://discord.com/api/webhooks/123456/discordSECRETtoken",
            "https://discord.com/…",
        ),
        (
            "https://acme.webhook.office.com/webhookb2/g@t/IncomingWebhook/teamsSECRET/x",
            "https://acme.webhook.office.com/…",
        ),
        ("http://[::1]:8080/hook/pathSECRET", "http://[::1]:8080/…"),
        ("https://ops.example.com", "https://ops.example.com"),
    ],
)
async def test_a_secret_in_the_url_path_is_never_shown(
    url: str, named: str, refused_url: str
) -> None:
    # The receiver is refused at the port of `refused_url`: the message of a
    # failed attempt (what reaches Temporal's history and logs) names the host.
    port = refused_url.split(":")[2].split("/")[0]
    host_url = url.replace("https://", "http://", 1)
    notifier = WebhookNotifier(url, SECRET)
    assert notifier.url == named
    assert "SECRET" not in repr(notifier) and "secret" not in repr(notifier)
    local = WebhookNotifier(
        f"http://127.0.0.1:{port}/" + host_url.split("/", 3)[-1], SECRET, timeout=5
    )
    with pytest.raises(WebhookError) as failed:
        await local(notification())
    message = str(failed.value)
    assert f"http://127.0.0.1:{port}" in message
    assert "SECRET" not in message and "secret" not in message, message
    assert "SECRET" not in failed.value.url


def test_a_notification_id_header_that_differs_from_the_signed_body_is_refused() -> (
    None
):
    """The ID header is not signed: one changed on the way must not verify."""
    import hashlib
    import hmac
    import time

    note = notification()
    body = json.dumps(note.to_json(), separators=(",", ":"), sort_keys=True).encode()
    timestamp = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    signed = {
        TIMESTAMP_HEADER: timestamp,
        SIGNATURE_HEADER: f"sha256={digest.hexdigest()}",
    }
    verify = WebhookNotifier.verify_signature
    assert verify(SECRET, body, {**signed, ID_HEADER: note.notification_id})
    assert verify(SECRET, body, signed)  # no header: the body's field is the ID
    assert not verify(SECRET, body, {**signed, ID_HEADER: "intr_other/created"})
    assert not verify(SECRET, body, {**signed, ID_HEADER.lower(): "forged"})
    assert not verify(SECRET, b"[1]", {**signed, ID_HEADER: note.notification_id})


def test_notification_id_is_stable_and_distinct() -> None:
    assert notification().notification_id == notification().notification_id
    assert (
        notification("reminder", 1).notification_id
        == notification("reminder", 1).notification_id
        == "intr_0123456789abcdef/reminder/1"
    )
    ids = {
        notification("created").notification_id,
        notification("expired").notification_id,
        notification("reminder", 1).notification_id,
        notification("reminder", 2).notification_id,
        notification("created", interrupt_id="intr_other").notification_id,
    }
    assert len(ids) == 5
    assert notification().notification_id == "intr_0123456789abcdef/created"
    payload = notification("reminder", 3).to_json()
    assert payload["notification_id"] == "intr_0123456789abcdef/reminder/3"
    assert list(payload)[0] == "notification_id" and payload["reminder"] == 3
    with pytest.raises(ValueError, match="reminder"):
        notification("reminder", 0)
    with pytest.raises(ValueError, match="reminder"):
        notification("created", 1)


def test_arguments_preview_is_bounded() -> None:
    big = notification(arguments={"blob": "x" * 1_000_000})
    assert len(big.arguments_preview) <= 2001
    assert big.arguments_preview.endswith("…")
    assert big.arguments_preview.startswith('{"blob": "xxx')
    small = {"b": 1, "a": "Zoë"}
    assert preview_arguments(small) == '{"a": "Zoë", "b": 1}'
    assert preview_arguments(small, limit=5) == '{"a":…'


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"url": "ftp://x"}, "'ftp://x'"),
        ({"url": "not a url"}, "'not a url'"),
        ({"secret": ""}, "''"),
        ({"secret": b""}, "b''"),
        ({"timeout": 0}, "got 0"),
        ({"timeout": -1.5}, "got -1.5"),
        ({"timeout": float("nan")}, "got nan"),
        ({"headers": {"X-Dex-Signature": "forged"}}, "'X-Dex-Signature'"),
        ({"headers": {"Bad Name": "v"}}, "'Bad Name'"),
    ],
)
def test_constructor_refuses_bad_options(kwargs: dict[str, object], named: str) -> None:
    options: dict[str, object] = {
        "url": "https://hooks.example.com/in",
        "secret": SECRET,
    }
    options.update(kwargs)
    with pytest.raises(InvalidArgumentError) as failed:
        WebhookNotifier(**options)  # pyright: ignore[reportArgumentType]
    assert named in str(failed.value)
    assert failed.value.argument == next(iter(kwargs))
    assert SECRET not in str(failed.value)


_text_or_bytes = st.one_of(st.text(max_size=30), st.binary(max_size=30))
_header_names = st.one_of(
    st.sampled_from(
        [
            SIGNATURE_HEADER,
            TIMESTAMP_HEADER,
            SIGNATURE_HEADER.lower(),
            "X-DEX-TIMESTAMP",
        ]
    ),
    st.text(max_size=20),
    st.binary(max_size=10),
    st.integers(),
)
_header_values = st.one_of(
    _text_or_bytes,
    st.none(),
    st.integers(),
    st.from_regex(r"sha256=[0-9a-f]{64}", fullmatch=True),
    st.integers(min_value=0, max_value=10**20).map(str),
)


@given(
    secret=st.one_of(_text_or_bytes, st.none(), st.integers()),
    body=st.one_of(_text_or_bytes, st.none()),
    headers=st.one_of(
        st.dictionaries(_header_names, _header_values, max_size=5), st.none()
    ),
    tolerance=st.one_of(st.floats(), st.integers(), st.none()),
    now=st.one_of(st.floats(), st.integers(), st.none(), st.text(max_size=3)),
)
def test_verify_signature_never_raises(
    secret: object, body: object, headers: object, tolerance: object, now: object
) -> None:
    verify = WebhookNotifier.verify_signature
    result = verify(secret, body, headers, tolerance=tolerance, now=now)  # pyright: ignore[reportArgumentType]
    assert result is False or result is True


async def test_the_standard_librarys_request_headers_verify(receiver: Receiver) -> None:
    import email.parser

    await WebhookNotifier(receiver.url, SECRET)(notification())
    request = receiver.requests[0]
    raw = "".join(f"{k}: {v}\r\n" for k, v in request.headers.items()) + "\r\n"
    message = email.parser.Parser().parsestr(raw)  # what `http.server` hands a handler

    assert WebhookNotifier.verify_signature(SECRET, request.body, message)
    assert not WebhookNotifier.verify_signature("wrong", request.body, message)
