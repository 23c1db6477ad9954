"""Bearer tokens: roles, the token file, and how a token is kept (hashed, never as is).

A token file lists who may call the web app (TOML or JSON, the same shape):

```toml
[[tokens]]
name = "alice"                 # recorded as the approver of what alice approves
roles = ["approve"]
hash = "scrypt$16384$8$1$<salt>$<digest>"
```

Only the hash is kept, so a leaked file grants nothing: `hash_token` makes one
with `hashlib.scrypt` (n=2**14, r=8, p=1, a random 16-byte salt, base64), a
memory-hard function, so even a short token a person chose resists guessing.
Verifying costs about 50 ms of CPU, so a token that verified once is
remembered in memory under its SHA-256 (never the token itself), and
verification runs on a thread.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

from .._errors import UserError

Role = Literal["read", "chat", "approve", "admin"]
"""What a token may do: `read` sessions and approvals; `chat` (start sessions,
send messages); `approve` (approve and reject); `admin` (everything, and end)."""

ROLES: tuple[Role, ...] = get_args(Role)
_IMPLIED: dict[Role, frozenset[Role]] = {
    "read": frozenset({"read"}),
    "chat": frozenset({"chat", "read"}),
    "approve": frozenset({"approve", "read"}),
    "admin": frozenset(ROLES),
}
_SCRYPT = (2**14, 8, 1)
_SALT_BYTES = 16


def granted(roles: Iterable[Role]) -> frozenset[Role]:
    """Every role that `roles` grant: `chat` and `approve` read too, `admin` does all."""
    result: set[Role] = set()
    for role in roles:
        result |= _IMPLIED[role]
    return frozenset(result)


def hash_token(token: str, *, n: int = _SCRYPT[0]) -> str:
    """The `hash` to write in a token file for `token` (scrypt, random salt).

    `n` is scrypt's cost (a power of 2); lower it only for tests.
    """
    salt = secrets.token_bytes(_SALT_BYTES)
    _, r, p = _SCRYPT
    digest = hashlib.scrypt(token.encode(), salt=salt, n=n, r=r, p=p)
    return f"scrypt${n}${r}${p}${_b64(salt)}${_b64(digest)}"


def new_token() -> str:
    """A fresh random token (32 bytes, URL-safe): give it to one person or service."""
    return "dex_" + secrets.token_urlsafe(32)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, kw_only=True, slots=True)
class Token:
    """One entry of the token file: a name, its roles, and the token's hash."""

    name: str
    """Who holds it: shown as the approver of each approval or rejection it makes."""
    roles: frozenset[Role]
    hash: str = field(repr=False)

    def matches(self, token: str) -> bool:
        """Whether `token` is the one this entry's hash was made from."""
        kind, *params = self.hash.split("$")
        if kind != "scrypt" or len(params) != 5:
            return False
        n, r, p, salt, digest = params
        candidate = hashlib.scrypt(
            token.encode(), salt=_unb64(salt), n=int(n), r=int(r), p=int(p)
        )
        return hmac.compare_digest(candidate, _unb64(digest))


@dataclass(frozen=True, kw_only=True, slots=True)
class Principal:
    """Who made a request, and what their token grants."""

    name: str
    roles: frozenset[Role]
    """The granted roles (implied ones included, see `granted`)."""
    anonymous: bool = False
    """A loopback request of a `dev` app built with `allow_anonymous_loopback`."""

    def may(self, role: Role) -> bool:
        """Whether this principal holds `role`."""
        return role in self.roles


class TokenSet:
    """The tokens an app accepts; `verify` maps a presented token to its holder."""

    def __init__(self, tokens: Sequence[Token] = ()) -> None:
        names = [t.name for t in tokens]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise UserError(
                f"token names must be unique (they name the approver); "
                f"{duplicates!r} appear more than once: rename one of each"
            )
        self.tokens = tuple(tokens)
        self._verified: dict[bytes, Principal] = {}

    def __len__(self) -> int:
        return len(self.tokens)

    def remembered(self, token: str) -> Principal | None:
        """The holder of a token that verified before (fast: no scrypt), else None."""
        return self._verified.get(hashlib.sha256(token.encode()).digest())

    def verify(self, token: str) -> Principal | None:
        """The holder of `token`, or None; slow on first sight (call it on a thread)."""
        key = hashlib.sha256(token.encode()).digest()
        known = self._verified.get(key)
        if known is not None:
            return known
        for entry in self.tokens:
            if entry.matches(token):
                principal = Principal(name=entry.name, roles=granted(entry.roles))
                self._verified[key] = principal
                return principal
        return None

    @classmethod
    def from_text(cls, text: str, *, source: str) -> TokenSet:
        """Parse a token file's text: JSON when it starts with `{`, else TOML.

        Raises:
            UserError: the text is not a valid token file; the message names
                `source` and the entry at fault.
        """
        try:
            raw: Any = (
                json.loads(text)
                if text.lstrip().startswith("{")
                else tomllib.loads(text)
            )
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
            raise UserError(f"cannot parse the token file {source}: {err}") from err
        entries = (
            cast(dict[str, object], raw).get("tokens")
            if isinstance(raw, dict)
            else None
        )
        if not isinstance(entries, list):
            raise UserError(
                f"the token file {source} has no `tokens` list; write "
                '`[[tokens]]` tables (TOML) or {"tokens": [...]} (JSON)'
            )
        return cls(
            [_entry(e, i, source) for i, e in enumerate(cast(list[object], entries))]
        )


def _entry(value: object, index: int, source: str) -> Token:
    where = f"token {index + 1} of {source}"
    if not isinstance(value, Mapping):
        raise UserError(f"{where} must be a table with `name`, `roles` and `hash`")
    entry = cast(Mapping[str, object], value)
    name, roles, digest = entry.get("name"), entry.get("roles"), entry.get("hash")
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{where} needs a `name` (who holds it)")
    if not isinstance(roles, list) or not roles:
        raise UserError(f"{where} ({name!r}) needs `roles`, a list of {list(ROLES)}")
    unknown = [r for r in cast(list[object], roles) if r not in ROLES]
    if unknown:
        raise UserError(
            f"{where} ({name!r}) has unknown roles {unknown!r}; use {list(ROLES)}"
        )
    if not isinstance(digest, str) or not digest.startswith("scrypt$"):
        raise UserError(
            f"{where} ({name!r}) needs a `hash` made by `dex-agents serve "
            "--new-token NAME` (scrypt$...); the token itself never goes in the file"
        )
    problem = _hash_problem(digest)
    if problem is not None:
        raise UserError(
            f"{where} ({name!r}) has a `hash` that cannot be checked: {problem}; "
            "make a new one with `dex-agents serve --new-token NAME` and copy it whole"
        )
    return Token(name=name, roles=frozenset(cast(list[Role], roles)), hash=digest)


_SCRYPT_MAX_MEMORY = 32 * 1024 * 1024
"""What `hashlib.scrypt` may use by default (OpenSSL's limit): a cost that reaches it fails."""


def _hash_problem(digest: str) -> str | None:
    """Why `Token.matches` could not check against `digest`, or None.

    Checked when the file loads: a hash that fails only when a token is
    presented would answer every request with a 500, the valid tokens' too.
    """
    _, *params = digest.split("$")
    if len(params) != 5:
        return "it needs 5 fields after `scrypt$` (n, r, p, salt, digest)"
    n, r, p, salt, value = params
    if not all(x.isascii() and x.isdigit() for x in (n, r, p)):
        return f"n, r and p must be whole numbers, got {n!r}, {r!r}, {p!r}"
    cost, block, parallel = int(n), int(r), int(p)
    if cost < 2 or cost & (cost - 1) or block < 1 or parallel < 1:
        return f"n must be a power of 2 and r, p at least 1, got n={cost}, r={block}, p={parallel}"
    if 128 * cost * block >= _SCRYPT_MAX_MEMORY:
        return f"n={cost}, r={block} needs more memory than scrypt may use"
    try:
        decoded = (_unb64(salt), _unb64(value))
    except ValueError:
        return "its salt or digest is not base64"
    if not all(decoded):
        return "its salt or digest is empty"
    return None


def load_tokens(
    path: str | Path | None = None, *, env: Mapping[str, str] | None = None
) -> TokenSet:
    """The tokens of the file at `path`, else of `DEX_AGENTS_WEB_TOKENS` (the file's text).

    No file and no variable gives an empty set: every request is then refused,
    unless the app allows anonymous loopback requests (`dev`).

    Raises:
        UserError: the file cannot be read or parsed.
    """
    if path is not None:
        location = Path(path)
        try:
            text = location.read_text()
        except OSError as err:
            raise UserError(
                f"cannot read the token file {str(location)!r}: {err.strerror}; "
                "check the path given as `create_app(tokens=...)`, or as "
                "`dex-agents serve --tokens-file` / `DEX_AGENTS_WEB_TOKENS_FILE`"
            ) from err
        return TokenSet.from_text(text, source=repr(str(location)))
    inline = (env or {}).get("DEX_AGENTS_WEB_TOKENS")
    if inline:
        return TokenSet.from_text(inline, source="`DEX_AGENTS_WEB_TOKENS`")
    return TokenSet()


def token_entry(name: str, roles: Sequence[Role], token: str) -> str:
    """The TOML entry for `token` (hashed), to paste into a token file."""
    quoted = ", ".join(json.dumps(r) for r in roles)
    return (
        f"[[tokens]]\nname = {json.dumps(name)}\nroles = [{quoted}]\n"
        f"hash = {json.dumps(hash_token(token))}\n"
    )
