"""Starting, joining and reading a cluster: the few calls an operator and a test need."""

from __future__ import annotations

import os
from typing import Any

# Read by ray when it is imported (see _quiet_uv): set before, for a driver importing us first.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

import ray

from ._ref import RayRef
from ._registry import registry
from ._wire import Record


def _quiet_uv() -> None:
    # Under `uv run`, Ray gives each worker a runtime env that runs `uv run` again, and the
    # workers die at start on a machine without the network; the driver's environment is
    # the workers' as it is.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


def start_cluster(num_cpus: int = 2, **options: Any) -> None:
    """Start a local cluster in this process, on the loopback only, without a dashboard.

    Always a new one (``address="local"``): a ``ray start`` cluster on the machine, the
    address file one left behind, or ``RAY_ADDRESS`` is never joined; :func:`connect`
    joins one on purpose.
    """
    _quiet_uv()
    if ray.is_initialized():
        return
    ray.init(
        address="local",
        num_cpus=num_cpus,
        _node_ip_address="127.0.0.1",
        include_dashboard=False,
        namespace="agent_channel",
        **options,
    )


def connect(address: str = "auto", **options: Any) -> None:
    """Join a running cluster (``auto``: the one started on this machine by ``ray start``)."""
    _quiet_uv()
    if not ray.is_initialized():
        ray.init(address=address, namespace="agent_channel", **options)


def executions() -> list[Record]:
    """Every execution the cluster's registry lists, oldest first, running or ended."""
    return ray.get(registry().list.remote())


def ref_for(execution_id: str) -> RayRef:
    """A ref to a listed execution, from any driver; ``LookupError`` if none is listed."""
    host = ray.get(registry().host.remote(execution_id))
    if host is None:
        raise LookupError(f"no execution {execution_id!r} in the cluster's registry")
    return RayRef(host, execution_id)
