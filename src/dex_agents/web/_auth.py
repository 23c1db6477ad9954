"""Who is calling: bearer tokens (or the inbox's cookie), roles, and cross-site checks.

A request is authenticated by `Authorization: Bearer <token>`, or, for the
inbox pages and their scripts, by the `dex_token` cookie that the login form
sets (a browser cannot add a header to a page load or an `EventSource`). No
credentials is a 401, a token without the endpoint's role a 403, in every app
except one built with `allow_anonymous_loopback` (what `dex-agents dev` does),
where a request from 127.0.0.1 or ::1 with no credentials and no proxy header,
addressed to a loopback name (`Host: localhost`, `127.0.0.1`, `[::1]`), and
with no `Origin` or the app's own or a listed CORS origin, acts as an
anonymous admin.

A cookie, and an anonymous loopback session, are credentials a browser
sends on its own, so a state-changing request that carries no
`Authorization` header must prove it comes from this app's own pages
(double-submit: the `dex_csrf` cookie equals the form's `csrf_token` field or
the `X-CSRF-Token` header, and an `Origin` header, when sent, is this app's).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from fastapi import Request

from ._errors import ApiError
from ._tokens import ROLES, Principal, Role, TokenSet

TOKEN_COOKIE = "dex_token"
CSRF_COOKIE = "dex_csrf"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
FORM_FIELDS = 20
"""The most fields a form posted to the app may have (its own have a handful)."""
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_PROXY_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")
ANONYMOUS = Principal(
    name="anonymous (loopback)", roles=frozenset(ROLES), anonymous=True
)

Via = Literal["bearer", "cookie", "anonymous"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Caller:
    """The principal of one request and how it proved who it is."""

    principal: Principal
    via: Via


@dataclass(frozen=True, kw_only=True)
class Auth:
    """How an app authenticates: its tokens, and whether `dev` loopback is anonymous."""

    tokens: TokenSet
    allow_anonymous_loopback: bool = False
    trusted_origins: Sequence[str] = ()
    """Origins besides the app's own whose browser requests may change things
    (the CORS origins, so a front end on another origin can post)."""

    async def caller(self, request: Request) -> Caller:
        """The caller of `request`.

        Raises:
            ApiError: 401 without valid credentials.
        """
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise ApiError(
                    401,
                    "unauthorized",
                    "the Authorization header must be `Bearer <token>`",
                )
            principal = await self._verify(token.strip(), request)
            return Caller(principal=principal, via="bearer")
        cookie = request.cookies.get(TOKEN_COOKIE)
        if cookie:
            return Caller(principal=await self._verify(cookie, request), via="cookie")
        if self.allow_anonymous_loopback and _from_loopback(request):
            origin = request.headers.get("origin")
            if origin is not None and origin not in self._anonymous_origins(request):
                # Any site open in this machine's browser can send requests
                # here: only the app's own pages and the listed front ends
                # may read or act without a token.
                raise ApiError(
                    401,
                    "unauthorized",
                    f"a request from origin {origin!r} gets no access without a "
                    "token, even from this machine; use this app's own pages, "
                    "send `Authorization: Bearer <token>`, or add the origin to "
                    "the app's CORS origins",
                )
            if _names_loopback(request):
                return Caller(principal=ANONYMOUS, via="anonymous")
            raise ApiError(
                401,
                "unauthorized",
                f"this app lets in requests without a token only at a loopback "
                f"address (http://127.0.0.1:PORT or http://localhost:PORT), not "
                f"at host {request.headers.get('host', '')!r}; open it there, or "
                "send `Authorization: Bearer <token>`",
            )
        raise ApiError(
            401,
            "unauthorized",
            "this endpoint needs a token: send `Authorization: Bearer <token>` "
            "(tokens come from the app's token file; `dex-agents serve --new-token "
            f"NAME` makes one), or sign in at `{_login(request)}` in a browser",
        )

    def _anonymous_origins(self, request: Request) -> tuple[str, ...]:
        """The origins whose browser requests may act anonymously: the app's, and the listed ones.

        Never `*` (`create_app` refuses it with anonymous loopback access).
        """
        return (_own_origin(request), *(o for o in self.trusted_origins if o != "*"))

    async def _verify(self, token: str, request: Request) -> Principal:
        principal = self.tokens.remembered(token)
        if principal is None:
            # scrypt takes tens of milliseconds: keep the event loop free.
            principal = await asyncio.to_thread(self.tokens.verify, token)
        if principal is None:
            raise ApiError(
                401,
                "unauthorized",
                "the token is not valid for this app; check it against the token "
                f"file the app was started with, or sign in again at "
                f"`{_login(request)}`",
            )
        return principal

    def require(self, role: Role) -> Callable[[Request], Awaitable[Caller]]:
        """A FastAPI dependency: the caller, who must hold `role` (401, 403 otherwise)."""

        async def dependency(request: Request) -> Caller:
            caller = await self.caller(request)
            if not caller.principal.may(role):
                held = sorted(caller.principal.roles)
                raise ApiError(
                    403,
                    "forbidden",
                    f"the token {caller.principal.name!r} has roles {held}; this "
                    f"needs the {role!r} role (or `admin`): use a token that has it",
                )
            if request.method not in _SAFE_METHODS:
                await self.check_same_site(request, caller)
            return caller

        return dependency

    async def check_same_site(self, request: Request, caller: Caller) -> None:
        """Refuse a state-changing request a browser might send from another site.

        Raises:
            ApiError: 403 `csrf_failed`.
        """
        if caller.via == "bearer":
            return  # a header no other site can make a browser send
        browser = any(
            h in request.headers for h in ("origin", "sec-fetch-site", "cookie")
        )
        if caller.via == "anonymous" and not browser:
            return  # curl on the loopback of a `dev` app
        await self.check_browser_request(request)

    async def check_browser_request(self, request: Request) -> None:
        """Refuse a browser request that did not come from this app's own pages.

        Raises:
            ApiError: 403 `csrf_failed`.
        """
        origin = request.headers.get("origin")
        if origin is not None and origin not in (
            _own_origin(request),
            *self.trusted_origins,
        ):
            raise ApiError(
                403,
                "csrf_failed",
                f"a request from origin {origin!r} may not change anything here; "
                "use this app's own pages, or add the origin to the app's CORS "
                "origins",
            )
        expected = request.cookies.get(CSRF_COOKIE, "")
        sent = request.headers.get(CSRF_HEADER)
        if sent is None and _is_form(request):
            # No form of the app has a file or many fields: a multipart file
            # part would be spooled to disk before anything is checked.
            form = await request.form(max_files=0, max_fields=FORM_FIELDS)
            value = form.get(CSRF_FIELD)
            sent = value if isinstance(value, str) else None
        # As bytes: `compare_digest` raises TypeError on a non-ASCII `str`.
        if (
            not expected
            or not sent
            or not hmac.compare_digest(_utf8(expected), _utf8(sent))
        ):
            raise ApiError(
                403,
                "csrf_failed",
                "this request carries no valid CSRF token; reload the page and "
                "send it again (a script on this app's origin sends the `dex_csrf` "
                "cookie's value, which `document.cookie` holds once a page of the "
                "app was loaded, in the `X-CSRF-Token` header; a client elsewhere "
                "sends `Authorization: Bearer <token>` instead)",
            )


def new_csrf_token() -> str:
    """A fresh double-submit token for the `dex_csrf` cookie."""
    return secrets.token_urlsafe(24)


def _login(request: Request) -> str:
    """The path of the login form as the browser reaches it (under the mount's prefix)."""
    return f"{request.scope.get('root_path', '')}/login"


def _is_form(request: Request) -> bool:
    kind = request.headers.get("content-type", "")
    return kind.startswith(("application/x-www-form-urlencoded", "multipart/form-data"))


def _own_origin(request: Request) -> str:
    host = request.headers.get("host", request.url.netloc)
    return f"{request.url.scheme}://{host}"


def _names_loopback(request: Request) -> bool:
    """Whether the request's `Host` names this machine's loopback.

    A page of another site whose name was made to resolve to 127.0.0.1 (DNS
    rebinding) reaches a loopback app with its own name in `Host`: it must not
    pass as a request of this machine's user.
    """
    host = request.headers.get("host")
    if host is None:
        return True  # HTTP/1.0 without Host: no browser sends that
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return is_loopback_name(name.strip("[]").lower())


def is_loopback_name(name: str) -> bool:
    """Whether a host name (no port, no brackets) names this machine's loopback.

    `localhost`, or a loopback IP address (`127.0.0.0/8`, `::1`). `dex-agents
    serve --host` is checked with it too.
    """
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _from_loopback(request: Request) -> bool:
    """A direct request from this machine (a proxy in front would add its headers)."""
    if request.client is None or any(h in request.headers for h in _PROXY_HEADERS):
        return False
    try:
        return ipaddress.ip_address(request.client.host).is_loopback
    except ValueError:
        return False


def _utf8(text: str) -> bytes:
    """`text` as bytes to compare (any `str` a request carries, a lone surrogate too)."""
    return text.encode("utf-8", "surrogatepass")
