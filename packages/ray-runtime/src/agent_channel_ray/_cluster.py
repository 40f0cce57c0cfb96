"""Starting, joining and reading a cluster: the few calls an operator and a test need."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

# Read by ray when it is imported (see _quiet_uv): set before, for a driver importing us first.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

import ray

from ._ref import RayRef
from ._registry import registry
from ._wire import Record

AUTH_MODE = "RAY_AUTH_MODE"
_HEALTH_CHECK = {
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 3,
}
"""The GCS's node health check in a cluster ``start_cluster`` starts: a node that died is
marked dead in about 3 s, not Ray's 15 s (a check every 3 s, 5 misses), so a durable
execution on it accepts prompts again within the 10 s the fleet's figure asks (docs/ray.md
gives ``ray start`` users the same line)."""


def _quiet_uv() -> None:
    # Under `uv run`, Ray gives each worker a runtime env that runs `uv run` again, and the
    # workers die at start on a machine without the network; the driver's environment is
    # the workers' as it is.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


def start_cluster(num_cpus: int = 2, *, token_auth: bool = True, **options: Any) -> None:
    """Start a local cluster in this process, without a dashboard, its token authentication on.

    Always a new one (``address="local"``): a ``ray start`` cluster on the machine, the
    address file one left behind, or ``RAY_ADDRESS`` is never joined; :func:`connect`
    joins one on purpose. Ray listens on every interface whatever the node address (it
    rewrites the loopback's to the host's), so the guard is its token: on here whatever
    ``RAY_AUTH_MODE`` the environment carries (``token_auth=False`` turns it off, and then
    anyone who reaches the machine's ports can run code on it). The token is read from
    ``RAY_AUTH_TOKEN``, else ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``, made
    there if missing, readable by its owner alone; other drivers need it (and
    ``RAY_AUTH_MODE=token``) to join.

    Nodes that join it (``ray start --address``) are checked every second and taken for
    dead after 3 missed checks (a durable execution on a dead node is back on another in
    ~6 s, not ~18 s); the price is that a node too busy to answer for ~3 s is taken for
    dead. ``_system_config`` keys given in ``options`` win over these.
    """
    _quiet_uv()
    if ray.is_initialized():
        return
    if token_auth:
        _own_token()
    _set_auth_mode("token" if token_auth else "disabled")
    system_config = {**_HEALTH_CHECK, **(options.pop("_system_config", None) or {})}
    ray.init(
        address="local",
        num_cpus=num_cpus,
        _node_ip_address="127.0.0.1",
        include_dashboard=False,
        namespace="agent_channel",
        _system_config=system_config,
        **options,
    )


def _set_auth_mode(mode: str) -> None:
    """Ray's authentication mode for this process and the cluster it starts (its workers
    inherit the environment). Ray caches its config, the mode in it, when first loaded: it
    is loaded again, as Ray does when it turns the mode on by itself."""
    from ray._raylet import Config  # pyright: ignore[reportMissingModuleSource, reportAttributeAccessIssue]

    os.environ[AUTH_MODE] = mode
    Config.initialize("")


def _own_token() -> None:
    """The token Ray will read, made (``0600``) if there is none; an existing token file of
    this user's that others could read is made the owner's alone."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        info = path.stat()
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            path.chmod(0o600)
        return
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(32))


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
