"""A tiny S3-compatible HTTP server on 127.0.0.1, for testing `S3MediaStore`.

It speaks just enough of the S3 REST API, path-style, for boto3's
`create_bucket`, `put_object`, `get_object` and `head_object`: objects live in
a dict, signatures are not checked, and `aws-chunked` upload bodies (which
botocore sends when it adds a trailing checksum) are decoded. It is a real
HTTP server in a daemon thread, so the store under test runs its real client
stack end to end.
"""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self
from urllib.parse import unquote, urlsplit


class S3TestServer:
    """An in-memory S3 endpoint; use as a context manager or `start`/`close`."""

    __test__ = False

    def __init__(self) -> None:
        self.buckets: dict[str, dict[str, tuple[bytes, str]]] = {}
        """Objects by bucket and key: bytes and content type."""
        self.requests: list[tuple[str, str]] = []
        """Method and path of every request, in arrival order."""
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        """The `endpoint_url` to hand boto3."""
        if self._server is None:
            raise RuntimeError("the S3 test server is not started; call `start()`")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        """Listen on a free loopback port and serve in a daemon thread."""
        owner = self

        class Handler(_Handler):
            server_owner = owner

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="s3-test-server", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Handler(BaseHTTPRequestHandler):
    server_owner: S3TestServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Stay quiet: tests read `S3TestServer.requests` instead."""

    def _target(self) -> tuple[str, str]:
        path = unquote(urlsplit(self.path).path)
        bucket, _, key = path.lstrip("/").partition("/")
        with self.server_owner._lock:  # pyright: ignore[reportPrivateUsage]
            self.server_owner.requests.append((self.command, path))
        return bucket, key

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raw = self._read_http_chunked()
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        encoding = self.headers.get("Content-Encoding", "")
        if "aws-chunked" in encoding or self.headers.get(
            "x-amz-decoded-content-length"
        ):
            return _decode_aws_chunked(raw)
        return raw

    def _read_http_chunked(self) -> bytes:
        data = bytearray()
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(data)
            data += self.rfile.read(size)
            self.rfile.readline()

    def do_PUT(self) -> None:
        bucket, key = self._target()
        body = self._body()
        buckets = self.server_owner.buckets
        if not key:
            buckets.setdefault(bucket, {})
            self._reply(200, b"")
            return
        if bucket not in buckets:
            self._error(404, "NoSuchBucket")
            return
        content_type = self.headers.get("Content-Type", "binary/octet-stream")
        buckets[bucket][key] = (body, content_type)
        self._reply(200, b"", etag=hashlib.md5(body).hexdigest())

    def do_GET(self) -> None:
        self._get(send_body=True)

    def do_HEAD(self) -> None:
        self._get(send_body=False)

    def _get(self, *, send_body: bool) -> None:
        bucket, key = self._target()
        found = self.server_owner.buckets.get(bucket, {}).get(key)
        if found is None:
            self._error(404, "NoSuchKey", send_body=send_body)
            return
        body, content_type = found
        self._reply(
            200,
            body,
            etag=hashlib.md5(body).hexdigest(),
            content_type=content_type,
            send_body=send_body,
        )

    def _error(self, status: int, code: str, *, send_body: bool = True) -> None:
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            f"<Error><Code>{code}</Code><Message>{code}</Message></Error>"
        ).encode()
        self._reply(status, body, content_type="application/xml", send_body=send_body)

    def _reply(
        self,
        status: int,
        body: bytes,
        *,
        etag: str | None = None,
        content_type: str = "application/xml",
        send_body: bool = True,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", content_type)
        if etag is not None:
            self.send_header("ETag", f'"{etag}"')
        self.end_headers()
        if send_body:
            self.wfile.write(body)


def _decode_aws_chunked(raw: bytes) -> bytes:
    """The payload of an `aws-chunked` body: sized chunks, a zero chunk, then trailers."""
    data = bytearray()
    position = 0
    while True:
        line_end = raw.index(b"\r\n", position)
        size = int(raw[position:line_end].split(b";")[0], 16)
        position = line_end + 2
        if size == 0:
            return bytes(data)
        data += raw[position : position + size]
        position += size + 2
