"""`WebhookNotifier`: POST each approval notification, signed, to a URL.

The signature follows the Stripe and Slack scheme: an HMAC-SHA256, keyed by a
secret the sender and the receiver share, over the request's Unix timestamp,
a dot and the raw body. Signing the body proves who sent it and that nothing
changed it on the way; signing the timestamp too lets the receiver refuse a
captured request replayed later (`WebhookNotifier.verify_signature` allows five minutes of
difference by default).

The notifier makes one POST per call and raises `WebhookError` when it did not
get a 2xx answer. It retries nothing itself: the session engine calls it in a
Temporal activity, and Temporal retries the attempt with backoff; every
attempt carries the same body (its signed `notification_id`) and
`X-Dex-Notification-Id`, so a receiver that already acted on an attempt whose
answer was lost can recognise the retry by the body's `notification_id`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import math
import re
import time
from collections.abc import Mapping
from email.message import Message
from typing import cast
from urllib.parse import urlsplit

try:
    import httpx
except ImportError as e:  # pragma: no cover - the import guard needs httpx missing
    raise ImportError(
        "`dex_agents.notify` needs httpx to send webhooks: pip install httpx"
    ) from e

from .._errors import DexAgentsError, InvalidArgumentError
from ..session._notification import InterruptNotification

SIGNATURE_HEADER = "X-Dex-Signature"
"""`sha256=<hex HMAC-SHA256 of "<timestamp>." + body>`, keyed by the shared secret."""

TIMESTAMP_HEADER = "X-Dex-Timestamp"
"""When the request was signed, in whole Unix seconds; it is part of the signed text."""

ID_HEADER = "X-Dex-Notification-Id"
"""The notification's `notification_id`, the same on every retry. It is not signed
itself: `verify_signature` refuses a request whose header differs from the signed
body's `notification_id`, and a receiver deduplicates by the body's field."""

_SCHEME = "sha256="
_RESERVED = frozenset(
    name.lower()
    for name in ("Content-Type", SIGNATURE_HEADER, TIMESTAMP_HEADER, ID_HEADER)
)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TIMESTAMP = re.compile(r"[0-9]{1,15}")
_HEX = re.compile(r"[0-9a-fA-F]{64}")


class WebhookError(DexAgentsError):
    """A webhook attempt failed: no 2xx answer, or no answer at all.

    Raised from inside the engine's notification activity, which makes it a
    failed attempt that Temporal retries with backoff. `status_code` is the
    receiver's HTTP status, or None when the request got no answer (refused,
    timed out, broken connection). The message names the URL only as
    `scheme://host[:port]/…` (a path, a query or user info may hold a
    credential), and never the secret.
    """

    def __init__(
        self, message: str, *, url: str, status_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.url = url
        self.status_code = status_code

    def __reduce__(self) -> tuple[object, ...]:
        return (_webhook_error, (self.message, self.url, self.status_code))


def _webhook_error(message: str, url: str, status_code: int | None) -> WebhookError:
    return WebhookError(message, url=url, status_code=status_code)


class WebhookNotifier:
    """An `on_interrupt` callable that POSTs each notification as signed JSON.

    The body is the notification's `to_json()`, compact and with sorted keys,
    so the same notification always gives the same bytes. Each call opens its
    own HTTP client: the engine may call it from any event loop, and a
    notification is rare enough that a pooled connection saves nothing.

    Example:
        ```python
        notifier = WebhookNotifier("https://ops.example.com/approvals", secret)
        await notifier(notification)  # raises WebhookError unless answered 2xx
        ```
    """

    __slots__ = ("_headers", "_secret", "_timeout", "_url")

    def __init__(
        self,
        url: str,
        secret: str | bytes,
        *,
        timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Check the options now, so a wrong one fails at startup, not at the first approval.

        Args:
            url: The receiver, an http:// or https:// URL.
            secret: The key shared with the receiver; a str is encoded as UTF-8.
            timeout: The most seconds one attempt may take, connecting included.
            headers: Extra request headers (an `Authorization` for a gateway,
                say); they cannot replace the ones the notifier signs or sets.

        Raises:
            InvalidArgumentError: An option is of the wrong type or value; the
                message names it (and never repeats the secret or a header value).
        """
        self._url = _check_url(url)
        self._secret = _check_secret(secret)
        self._timeout = _check_timeout(timeout)
        self._headers = _check_headers(headers)

    @property
    def url(self) -> str:
        """The receiver's URL as `scheme://host[:port]/…`: its path, query and user info may hold its secret."""
        return _redacted(self._url)

    @property
    def timeout(self) -> float:
        """The most seconds one attempt may take."""
        return self._timeout

    def __repr__(self) -> str:
        return f"WebhookNotifier(url={self.url!r}, timeout={self._timeout!r})"

    async def __call__(self, notification: InterruptNotification) -> None:
        """POST `notification` once, signed; return when the receiver answered 2xx.

        Raises:
            WebhookError: The receiver answered another status, or could not be
                reached within the timeout; the engine's retry sends it again.
        """
        body = json.dumps(
            notification.to_json(), separators=(",", ":"), sort_keys=True
        ).encode()
        timestamp = str(int(time.time()))
        headers = {
            **self._headers,
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: timestamp,
            ID_HEADER: notification.notification_id,
            SIGNATURE_HEADER: _sign(self._secret, timestamp, body),
        }
        notification_id = notification.notification_id
        try:
            # httpx's timeout bounds each phase (connect, write, read); this one
            # bounds the whole attempt, so a slow trickle cannot hold it open.
            async with (
                asyncio.timeout(self._timeout),
                httpx.AsyncClient(timeout=self._timeout) as client,
                client.stream(
                    "POST", self._url, content=body, headers=headers
                ) as answer,
            ):
                # The status is all the notifier needs: the body is never read, so
                # a receiver cannot make an attempt hold a large answer in memory.
                status, reason = answer.status_code, answer.reason_phrase
        except TimeoutError:
            raise self._error(
                notification_id, f"gave no answer within {self._timeout:g} s"
            ) from None
        except httpx.HTTPError as e:
            detail = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            raise self._error(
                notification_id, f"could not be reached ({detail})"
            ) from e
        if not 200 <= status < 300:
            phrase = f"HTTP {status} {reason}".rstrip()
            raise self._error(notification_id, f"answered {phrase}", status)

    @staticmethod
    def verify_signature(
        secret: str | bytes,
        body: bytes,
        headers: Mapping[str, str] | Message,
        *,
        tolerance: float = 300.0,
        now: float | None = None,
    ) -> bool:
        """Whether a request came from a `WebhookNotifier` with `secret`, recently.

        What a receiver calls before it trusts a request. It recomputes the
        signature over the timestamp and the body and compares in constant time,
        so timing reveals nothing of the right signature. It never raises: a
        missing, repeated or malformed header, an empty secret or a body that is
        not bytes all give False, so the receiver answers 401 rather than 500.

        Args:
            secret: The key shared with the sender.
            body: The request's raw bytes, exactly as received (before any JSON
                parsing: re-encoding changes the bytes and breaks the signature).
            headers: The request's headers; names match case-insensitively, so a
                framework's header mapping, a plain dict or the standard library's
                `http.server` headers (an `email.message.Message`) all work.
            tolerance: The most seconds the signed timestamp may differ from `now`,
                either way; an older request is refused as a possible replay.
            now: The current Unix time; None reads the clock.

        Returns:
            True when the signature is right, the timestamp is within tolerance,
            and an `X-Dex-Notification-Id` header, when sent, equals the signed
            body's `notification_id` (the header is not signed: deduplicate by
            the body's field).
        """
        try:
            return _verify(secret, body, headers, tolerance, now)
        # Bad input of any shape is refused (fails closed), never raised.
        except Exception:
            return False

    def _error(
        self, notification_id: str, what: str, status_code: int | None = None
    ) -> WebhookError:
        url = self.url
        return WebhookError(
            f"webhook {url} {what} for notification "
            f"{notification_id!r}; it was not delivered, and the receiver will be "
            "retried (the engine sends it again with backoff, with the same "
            f"{ID_HEADER})",
            url=url,
            status_code=status_code,
        )


def _verify(
    secret: object, body: object, headers: object, tolerance: object, now: object
) -> bool:
    key = _key(secret)
    if key is None or not isinstance(body, bytes | bytearray | memoryview):
        return False
    if isinstance(headers, Message):
        # isinstance leaves the header value type unknown; any value is checked below.
        pairs: list[tuple[object, object]] = list(
            cast("Message[object, object]", headers).items()
        )
    elif isinstance(headers, Mapping):
        pairs = list(cast(Mapping[object, object], headers).items())
    else:
        return False
    timestamp = _header(pairs, TIMESTAMP_HEADER)
    signature = _header(pairs, SIGNATURE_HEADER)
    if timestamp is None or signature is None:
        return False
    timestamp, signature = timestamp.strip(), signature.strip()
    if not _TIMESTAMP.fullmatch(timestamp) or not signature.startswith(_SCHEME):
        return False
    given = signature.removeprefix(_SCHEME)
    if not _HEX.fullmatch(given):
        return False
    clock = time.time() if now is None else _finite(now)
    window = _finite(tolerance)
    if clock is None or window is None or window < 0:
        return False
    if abs(clock - int(timestamp)) > window:
        return False
    data = bytes(cast("bytes | bytearray | memoryview[int]", body))
    expected = _sign(key, timestamp, data).removeprefix(_SCHEME)
    if not hmac.compare_digest(expected.encode(), given.lower().encode()):
        return False
    return _id_matches(pairs, data)


def _id_matches(headers: list[tuple[object, object]], body: bytes) -> bool:
    """Whether an `X-Dex-Notification-Id` header, if sent, is the signed body's `notification_id`.

    The header is not signed, so one changed on the way must not pass for the
    notification's: a receiver that deduplicated by it could drop a real one.
    """
    wanted = ID_HEADER.lower()
    if not any(
        isinstance(k, str | bytes)
        and (k.decode("latin-1") if isinstance(k, bytes) else k).lower() == wanted
        for k, _ in headers
    ):
        return True
    sent = _header(headers, ID_HEADER)
    if sent is None:
        return False  # repeated with different values, or not text
    payload: object = json.loads(body)
    if not isinstance(payload, dict):
        return False
    signed = cast(dict[str, object], payload).get("notification_id")
    return isinstance(signed, str) and hmac.compare_digest(
        signed.encode(), sent.strip().encode("utf-8", "surrogatepass")
    )


def _sign(key: bytes, timestamp: str, body: bytes) -> str:
    digest = hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256)
    return _SCHEME + digest.hexdigest()


def _key(secret: object) -> bytes | None:
    """The secret's bytes, or None for an empty or unusable one (which verifies nothing)."""
    if isinstance(secret, str):
        try:
            key = secret.encode()
        except UnicodeEncodeError:
            return None
    elif isinstance(secret, bytes | bytearray):
        key = bytes(secret)
    else:
        return None
    return key or None


def _header(headers: list[tuple[object, object]], name: str) -> str | None:
    """The one value of header `name` in any case, or None if missing, repeated or not text."""
    wanted = name.lower()
    found: str | None = None
    for key, value in headers:
        if isinstance(key, bytes):
            key = key.decode("latin-1")
        if not isinstance(key, str) or not key.isascii() or key.lower() != wanted:
            continue
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if not isinstance(value, str) or (found is not None and found != value):
            return None
        found = value
    return found


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _check_url(url: object) -> str:
    if not isinstance(url, str):
        raise InvalidArgumentError(
            "url", f"url must be an http(s) URL as a str, got {type(url).__name__}"
        )
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # a port that is not a number raises here
    except ValueError:
        valid = False
    if not valid:
        shown = _redacted(url)
        raise InvalidArgumentError(
            "url",
            f"url must be an http:// or https:// URL with a host, got {shown!r}",
        )
    return url


def _check_secret(secret: object) -> bytes:
    if not isinstance(secret, str | bytes):
        raise InvalidArgumentError(
            "secret", f"secret must be a str or bytes, got {type(secret).__name__}"
        )
    if not secret:
        raise InvalidArgumentError(
            "secret",
            f"secret must not be empty, got {secret!r}: an empty key signs nothing "
            "a receiver can trust",
        )
    key = _key(secret)
    if key is None:
        raise InvalidArgumentError("secret", "secret must be encodable as UTF-8")
    return key


def _check_timeout(timeout: object) -> float:
    seconds = _finite(timeout)
    if seconds is None or seconds <= 0:
        raise InvalidArgumentError(
            "timeout", f"timeout must be a number of seconds above 0, got {timeout!r}"
        )
    return seconds


def _check_headers(headers: object) -> dict[str, str]:
    # `object`: callers may pass anything at run time, and every part is checked.
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise InvalidArgumentError(
            "headers",
            f"headers must be a mapping of str to str, got {type(headers).__name__}",
        )
    checked: dict[str, str] = {}
    for name, value in cast(Mapping[object, object], headers).items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise InvalidArgumentError(
                "headers", f"headers has a name that is not a valid header: {name!r}"
            )
        if name.lower() in _RESERVED:
            raise InvalidArgumentError(
                "headers",
                f"headers cannot set {name!r}: the notifier sets it (and signs it)",
            )
        # A value is not shown: it is often a credential (an Authorization token).
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise InvalidArgumentError(
                "headers",
                f"headers[{name!r}] must be a str without line breaks or NUL",
            )
        checked[name] = value
    return checked


def _redacted(url: str) -> str:
    """`url` fit for messages and logs: `scheme://host[:port]`, then `/…` for anything after.

    Slack, Discord and Teams put a webhook's secret in its path, others in the
    query or the user info; a message reaches the Temporal history and logs,
    so it keeps only what names the receiver.
    """
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "<unparsable URL>"
    if not host:
        # Not a URL the notifier takes: its first part, for the message that says so.
        head, cut, _ = url.partition("/")
        head = head.rsplit("@", 1)[-1].split("?", 1)[0]
        return f"{head}/…" if cut or "?" in url else head
    shown = f"[{host}]" if ":" in host else host
    if port is not None:
        shown = f"{shown}:{port}"
    rest = "/…" if parts.path.strip("/") or parts.query or parts.fragment else ""
    return f"{parts.scheme}://{shown}{rest}"
