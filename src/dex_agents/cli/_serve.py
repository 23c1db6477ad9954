"""`dex-agents serve`: the web app alone, on uvicorn, next to workers that run elsewhere.

It holds no logic: it connects like every other command (`--address`,
`--state-dir`, `--store`), builds `create_app`, and serves it. `--new-token
NAME` makes a token and prints the entry for the token file instead.
"""

from __future__ import annotations

import errno
import os
import shlex
import socket
from pathlib import Path

import click

from ..web._app import cors_origin_problem, create_app
from ..web._auth import is_loopback_name
from ..web._server import serving
from ..web._tokens import (
    ROLES,
    Role,
    TokenSet,
    load_tokens,
    new_token,
    token_entry,
)
from ._agent_ref import load_flow
from ._context import Target, connect, open_store, target_options
from ._errors import (
    BadArgumentError,
    CommandError,
    prog,
    release_engine_runtime,
    run,
)

_AGENT_HELP = (
    "A flow `POST /api/sessions` may start: `module:attr` or `path/to/file.py:attr` "
    "(repeat for several). Without it the app serves existing sessions only."
)


_SERVE_HELP = """Serve the sessions' HTTP + SSE API and the approval inbox (uvicorn).

\b
Make a token, and put its entry in the token file:
  dex-agents serve --new-token alice --role approve
then:
  dex-agents serve --tokens-file tokens.toml --agent module:flow
"""


@click.command("serve", help=_SERVE_HELP)
@click.option(
    "--agent", "agents", multiple=True, metavar="MODULE:FLOW", help=_AGENT_HELP
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port to listen on (0: any free one; the URL is printed).",
)
@click.option(
    "--tokens-file",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="DEX_AGENTS_WEB_TOKENS_FILE",
    show_envvar=True,
    help="The token file (TOML or JSON, hashed tokens). Default: the text of "
    "DEX_AGENTS_WEB_TOKENS.",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    metavar="ORIGIN",
    help="An origin (`https://app.example.com`: no path, no trailing slash) whose "
    "pages may call the API; repeat for several, or `*` for any (refused with "
    "--allow-anonymous-loopback). Default: none (CORS off).",
)
@click.option(
    "--root-path",
    default="",
    help="The path prefix a reverse proxy serves the app under (`/agents`).",
)
@click.option(
    "--forwarded-allow-ips",
    default=None,
    help="Proxies whose X-Forwarded-* headers to trust (uvicorn's option); "
    "default: 127.0.0.1.",
)
@click.option(
    "--allow-anonymous-loopback",
    is_flag=True,
    help="Requests from this machine need no token and act as admin. Only with a "
    "loopback --host and no proxy in front: for development.",
)
@click.option(
    "--new-token",
    "new_token_name",
    metavar="NAME",
    help="Print a new token for NAME and its token-file entry, then exit.",
)
@click.option(
    "--role",
    "roles",
    multiple=True,
    type=click.Choice(ROLES),
    help="With --new-token: a role of the token (repeat). Default: read.",
)
@target_options
def serve(
    *,
    target: Target,
    agents: tuple[str, ...],
    host: str,
    port: int,
    tokens_file: Path | None,
    cors_origins: tuple[str, ...],
    root_path: str,
    forwarded_allow_ips: str | None,
    allow_anonymous_loopback: bool,
    new_token_name: str | None,
    roles: tuple[Role, ...],
) -> None:
    """The `dex-agents serve` command (see `_SERVE_HELP` for its help text)."""
    if new_token_name is not None:
        if not new_token_name.strip():
            raise BadArgumentError(
                f"bad `--new-token {shlex.quote(new_token_name)}`: a token needs the "
                "name of who holds it, e.g. `--new-token alice`"
            )
        token = new_token()
        click.echo(f"token for {new_token_name!r} (shown once; give it to them):")
        click.echo(token)
        click.echo("\nentry for the token file:\n")
        click.echo(
            token_entry(new_token_name, list(roles) or ["read"], token), nl=False
        )
        return
    if allow_anonymous_loopback and not is_loopback_name(host):
        raise BadArgumentError(
            f"--allow-anonymous-loopback needs a loopback --host, not {host!r}: "
            "anyone who reaches the port would be admin; use a token file instead"
        )
    if allow_anonymous_loopback and "*" in cors_origins:
        raise BadArgumentError(
            "--cors-origin '*' with --allow-anonymous-loopback would let any "
            "website open in this machine's browser read every session as admin; "
            "name the front end's origin (`--cors-origin http://127.0.0.1:9100`), "
            "or drop --allow-anonymous-loopback and use --tokens-file"
        )
    for origin in cors_origins:
        problem = cors_origin_problem(origin)
        if problem is not None:
            raise BadArgumentError(
                f"bad `--cors-origin {shlex.quote(origin)}`: {problem}"
            )

    async def serve_app() -> None:
        """Serve the app with these options until it is stopped."""
        flows = [load_flow(ref) for ref in agents]
        tokens = _tokens(tokens_file, allow_anonymous_loopback)
        connection = await connect(target)
        taken = listen_error(host, port, "--port")
        if taken is not None:
            raise taken
        store = await open_store(target)
        try:
            app = create_app(
                connection.client,
                flows,
                store,
                tokens=tokens,
                allow_anonymous_loopback=allow_anonymous_loopback,
                cors_origins=cors_origins,
            )
            proxy: dict[str, object] = {"root_path": root_path, "log_level": "info"}
            if forwarded_allow_ips is not None:
                proxy["forwarded_allow_ips"] = forwarded_allow_ips
            async with serving(
                app, host=host, port=port, handle_signals=True, **proxy
            ) as running:
                who = (
                    "no token needed from this machine"
                    if allow_anonymous_loopback
                    else f"{len(tokens)} token(s)"
                )
                click.echo(
                    f"dex-agents web on {running.url}{root_path}/inbox "
                    f"(API {running.url}{root_path}/api, {who}; {connection.where}); "
                    "Ctrl-C stops",
                    err=False,
                )
                await running.wait()
        finally:
            await store.close()

    try:
        run(serve_app())
    except KeyboardInterrupt:
        pass
    finally:
        release_engine_runtime()


def listen_error(host: str, port: int, option: str) -> CommandError | None:
    """Why the web app cannot listen on `host:port`, in `option`'s words; None if it can.

    Binds every address of `host` the way uvicorn's server will (address reuse,
    IPv6 sockets IPv6-only), then lets go: uvicorn itself reports a failed bind
    as a logged error and `SystemExit(3)` out of the event loop, which a command
    cannot turn into one line. Port 0 (any free one) always works.
    """
    if port == 0:
        return None
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        addresses = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        for family, kind, proto, _, address in addresses:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind(address)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            return CommandError(
                f"cannot serve on {shown}: the port is in use by another process; "
                f"pass another `{option} N` (0: any free port) or stop that process"
            )
        reason = err.strerror or str(err)
        other_host = ", or another `--host`" if option == "--port" else ""
        return CommandError(
            f"cannot serve on {shown}: {reason}; pass another `{option} N`{other_host}"
        )
    return None


def _tokens(path: Path | None, allow_anonymous_loopback: bool) -> TokenSet:
    """The tokens `serve` accepts, or an error in its options' words.

    Raises:
        CommandError: the token file cannot be read, or there are no tokens and
            anonymous loopback requests are not allowed.
    """
    if path is not None:
        try:
            path.read_text()
        except OSError as err:
            raise CommandError(
                f"cannot read the token file {str(path)!r} (`--tokens-file`, or "
                f"DEX_AGENTS_WEB_TOKENS_FILE): {err.strerror}; check the path, or make "
                f"a token and its file entry with `{prog()} serve --new-token NAME`"
            ) from err
    tokens = load_tokens(path, env=os.environ)
    if not len(tokens) and not allow_anonymous_loopback:
        raise CommandError(
            "no tokens, so the web app would refuse every request; pass "
            "`--tokens-file FILE` (make a token and its entry with "
            f"`{prog()} serve --new-token NAME`), set DEX_AGENTS_WEB_TOKENS, or, for "
            "development on this machine, `--allow-anonymous-loopback`"
        )
    return tokens
