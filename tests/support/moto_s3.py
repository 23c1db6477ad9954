"""Moto's S3 server in its own process, with signatures checked.

Moto checks request signatures only once its IAM is enforced: the server starts
with `INITIAL_NO_AUTH_ACTION_COUNT=3`, enough to create one IAM user, its
policy and its access key; every later request must be signed with that key,
so a wrong secret is refused (`SignatureDoesNotMatch`) as Amazon S3 would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
import httpx

_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
}


@dataclass(frozen=True, kw_only=True, slots=True)
class MotoS3:
    """A running moto S3 server and the one key it accepts."""

    endpoint_url: str
    access_key_id: str
    secret_access_key: str
    region: str = "us-east-1"

    def env(self) -> dict[str, str]:
        """The variables a default boto3 client (and a worker process) reads."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_DEFAULT_REGION": self.region,
        }

    def client(self, *, secret: str | None = None) -> Any:
        """A boto3 S3 client for this server (`secret` overrides the key's)."""
        # boto3 ships no type information.
        return boto3.client(  # pyright: ignore[reportUnknownMemberType]
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=secret or self.secret_access_key,
            region_name=self.region,
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited with code {proc.returncode}")
        try:
            httpx.get(f"{url}/moto-api/", timeout=1)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def moto_s3() -> Iterator[MotoS3]:
    """Start moto's S3 server on 127.0.0.1 and make the one key it accepts."""
    port = _free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, proc)
        iam: Any = boto3.client(  # pyright: ignore[reportUnknownMemberType]
            "iam",
            endpoint_url=url,
            aws_access_key_id="bootstrap",
            aws_secret_access_key="bootstrap",
            region_name="us-east-1",
        )
        iam.create_user(UserName="media")
        iam.put_user_policy(
            UserName="media", PolicyName="s3", PolicyDocument=json.dumps(_POLICY)
        )
        key = iam.create_access_key(UserName="media")["AccessKey"]
        yield MotoS3(
            endpoint_url=url,
            access_key_id=key["AccessKeyId"],
            secret_access_key=key["SecretAccessKey"],
        )
    finally:
        # A default boto3 client made while this server ran cached its keys in
        # boto3's default session; the next server's keys differ.
        boto3.DEFAULT_SESSION = None
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
