"""Starting an execution on the cluster: a host actor, its run, its entry in the registry."""

from __future__ import annotations

import contextlib
from typing import Any

import ray
from agent_channel import new_id
from agent_channel.lowlevel import MAX_QUEUED
from ray.exceptions import RayActorError

from ._host import Body, ExecutionHostActor
from ._ref import RayRef
from ._registry import NAMESPACE, registry
from ._wire import Outcome

_as_actor: Any = ray.remote  # its stubs know no max_concurrency

ExecutionHost: Any = _as_actor(num_cpus=0, max_concurrency=10_000)(ExecutionHostActor)
"""The host actor: ``ExecutionHost.remote()`` starts one, to pass as ``launch(..., host=)``.
It takes no CPU: executions wait on models and tools, not compute. A pool that should
outlive its driver is started detached: ``ExecutionHost.options(lifetime="detached",
namespace="agent_channel").remote()`` (and ``ray.kill``-ed when done)."""


def launch(
    body: str | Body,
    *args: Any,
    title: str = "",
    host: Any = None,
    execution_id: str | None = None,
    parent: str | None = None,
    max_queued: int = MAX_QUEUED,
    live: bool = False,
    store: str | None = None,
    options: dict[str, Any] | None = None,
) -> RayRef:
    """Run ``body(*args)`` as an execution on the cluster; a ref to it, open for posting.

    ``body`` is a ``module:attr`` spec (imported on the worker) or a picklable async
    callable; it runs inside its own channel (``agent_channel()`` is that channel), so the
    ReAct loop is a body as it is (``functools.partial(agent, state)``). Without ``host``
    the execution gets an actor of its own, detached: it keeps running after this driver
    exits, until its body returns or it is ended (:meth:`RayRef.end`, the ``end`` verb),
    and the actor is freed then. ``live=True`` marks it live for its whole run, as
    ``serve`` does its own: an interactive agent then waits for its operator's next
    message after each answer (an operator may attach later, through ``serve --ray``)
    instead of ending when nobody is attached.

    ``store``: a spec ``agent_channel.open_store`` opens on the node that hosts the
    execution (a path every node reaches, or a database URL): the execution is durable, and
    its own actor is restarted on a surviving node when its node dies (``max_restarts``),
    its run submitted again and restored from the store under the same id; refs go on
    with it. ``options``: Ray actor options for its own actor (``resources``,
    ``scheduling_strategy``: where it may run).
    """
    own = host is None
    if own:
        actor: dict[str, Any] = {"lifetime": "detached", "namespace": NAMESPACE}
        if store is not None:
            actor["max_restarts"] = -1  # restarted wherever it can, until ended
        host = ExecutionHost.options(**actor, **(options or {})).remote()
    elif options:
        raise ValueError("launch(options=...) applies to an actor of its own, not to host=")
    eid = execution_id or new_id()
    call = (body, args, max_queued, live, store)
    outcome: Outcome = ray.get(registry().launch.remote(eid, title or eid, host, call, parent, own))
    run = outcome.unwrap()[0]
    with contextlib.suppress(RayActorError):  # a body that failed at once: its actor is freed
        ray.get(host.opened.remote(eid))
    return RayRef(host, eid, run)
