"""Temporal at the target every command resolves; a doctor never starts a server."""

from __future__ import annotations

import asyncio
import os
import shlex
from datetime import timedelta

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.service import RPCError, RPCStatusCode

from ..._errors import DexAgentsError, UserError
from ...temporal import EngineConfig
from ...temporal._engine import ADDRESS_ENV
from .._context import Target, connect
from .._errors import CommandError, prog
from ._check import Check, Subject, failed_check, reason

_CLUSTER_FIX = (
    "check `--address` (DEX_AGENTS_TEMPORAL_ADDRESS) and that Temporal runs there, "
    "with DEX_AGENTS_TEMPORAL_TLS / DEX_AGENTS_TEMPORAL_API_KEY if it needs them; "
    "or leave `--address` out for the embedded dev server, which `{prog} dev` starts"
)


async def check_temporal(target: Target, timeout: float) -> Check:
    try:
        config = EngineConfig.from_env()
        address = target.address or (config.address if config else None)
        cluster = (
            EngineConfig.from_env({**os.environ, ADDRESS_ENV: address})
            if address
            else None
        )
    except UserError as err:
        return failed_check("temporal", "Temporal", str(err))
    about = Subject(
        name="temporal",
        title=f"Temporal at {address}" if address else "Temporal",
        details={
            "address": address,
            "namespace": target.namespace,
            "embedded": address is None,
            "state_dir": str(target.state_dir) if address is None else None,
        },
    )
    try:
        async with asyncio.timeout(timeout):
            conn = await connect(target)
    except CommandError as err:
        return about.failed(err.format_message())
    except (TimeoutError, DexAgentsError, RuntimeError, OSError) as err:
        said = (
            f"no answer within {timeout:g} s" if isinstance(err, TimeoutError) else ""
        )
        return about.outcome(
            "fail",
            said or reason(err),
            _CLUSTER_FIX.format(prog=prog())
            if address
            else f"start it with `{prog()} dev`",
            sep=f" (namespace {target.namespace}{_tls(cluster)}): ",
        )
    about.details["address"] = conn.address
    about.title = f"Temporal at {conn.address}, namespace {conn.namespace}"
    try:
        await conn.client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=conn.namespace),
            timeout=timedelta(seconds=timeout),
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return about.outcome(
                "fail",
                "the namespace does not exist",
                "pass `--namespace` (DEX_AGENTS_TEMPORAL_NAMESPACE) one that "
                "does, or create it: `temporal operator namespace create --namespace "
                f"{shlex.quote(conn.namespace)} --address {conn.address}`",
            )
        if err.status != RPCStatusCode.PERMISSION_DENIED:  # a worker needs no describe
            return about.outcome(
                "fail",
                f"Temporal answered {err.status.name}: {err.message}",
                _CLUSTER_FIX.format(prog=prog()),
            )
    return about.outcome("pass", conn.where)


def _tls(config: EngineConfig | None) -> str:
    """How a cluster was reached, for a failed connection: TLS is easy to miss."""
    if config is None:
        return ""
    if config.api_key is not None and not config.tls:
        return ", over TLS, which the API key turns on"
    return ", over TLS" if config.tls else ""
