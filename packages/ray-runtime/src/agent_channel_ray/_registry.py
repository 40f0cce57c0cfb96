"""The cluster's list of executions: a named, detached actor any driver finds by name.

The registry starts each execution's run itself (:meth:`RegistryActor.launch`), so the run's
object ref is the registry's, not the launching driver's: a driver that exits takes nothing
with it (Ray's owner fate-sharing would end a run, and lose its result, with its caller).
Each entry is watched through that ref: when the run returns, is cancelled or its actor
dies, the entry turns ``ended`` with how, so an execution whose worker was lost is never
listed as running forever; an actor started for that execution alone is then freed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import OrderedDict, deque
from typing import Any

import ray
from agent_channel import ExecutionFinished
from ray.exceptions import RayActorError, RayTaskError, TaskCancelledError

from ._wire import Outcome, Record

_as_actor: Any = ray.remote  # its stubs know no max_concurrency

NAME = "agent_channel_registry"
NAMESPACE = "agent_channel"
RUNNING_LIMIT = 10_000
"""Running executions the registry lists at most: one more is refused at launch."""
ENDED_LIMIT = 1_000
"""Ended executions listed (with how they ended); past it the oldest are forgotten."""
REASON_LIMIT = 500
FINAL_WAIT = 10.0
"""Seconds the registry waits for an ended execution's host to say how it ended."""
HEAD = "node:__internal_head__"
"""The resource Ray gives the head node alone."""


class RegistryActor:
    """The registry's class; :func:`registry` returns the cluster's one actor of it."""

    def __init__(self) -> None:
        self._records: OrderedDict[str, Record] = OrderedDict()
        self._hosts: dict[str, Any] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._runs: dict[str, Any] = {}
        self._ended: deque[str] = deque()
        self._own: set[str] = set()  # executions whose host actor was started for them alone
        self._finals: dict[str, ExecutionFinished] = {}  # how each ended, its host freed or not

    async def launch(
        self,
        execution_id: str,
        title: str,
        host: Any,
        call: tuple[Any, ...],
        parent: str | None = None,
        own_host: bool = False,
    ) -> Outcome:
        """Start ``host.run(execution_id, *call)`` and list it; its run's object ref, in a
        list (Ray passes a ref in a list as it is). The registry owns the run: it outlives
        the driver that asked. ``own_host``: the actor is this execution's alone, freed
        (``ray.kill``) once it ends."""
        if execution_id in self._records:
            return Outcome(error="ValueError", message=f"execution {execution_id!r} is listed")
        running = sum(1 for r in self._records.values() if r.status == "running")
        if running >= RUNNING_LIMIT:
            message = f"the cluster runs {RUNNING_LIMIT} executions, the registry's limit"
            return Outcome(error="RuntimeError", message=message)
        durable = call[-1] is not None  # a store: submitted again if its host restarts
        run = host.run.options(max_task_retries=-1 if durable else 0).remote(execution_id, *call)
        self._records[execution_id] = Record(execution_id, title, "running", parent=parent)
        self._hosts[execution_id] = host
        self._runs[execution_id] = run
        if own_host:
            self._own.add(execution_id)
        self._watchers[execution_id] = asyncio.create_task(self._watch(execution_id, run))
        return Outcome(value=[run])

    async def end(self, execution_id: str, wait: float = 10.0) -> bool:
        """End a running execution (``ray.cancel`` of its run: an outer cancellation, as
        ``end`` is anywhere) and wait up to ``wait`` s for it to be listed ended (its own
        actor freed); ``False`` if it was not running."""
        run = self._runs.get(execution_id)
        watcher = self._watchers.get(execution_id)
        if run is None or watcher is None:
            return False
        ray.cancel(run)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(watcher), wait)
        return True

    async def _watch(self, execution_id: str, run: Any) -> None:
        try:
            await run
            reason = "finished"
        except TaskCancelledError:
            reason = "cancelled"
        except RayActorError as exc:
            reason = f"its actor died: {_first_line(exc)}"
        except RayTaskError as exc:  # the body raised: it ended with that error
            cause = exc.cause
            reason = f"failed: {type(cause).__name__}: {_first_line(cause)}"
        except Exception as exc:  # the body raised: it ended with that error
            reason = f"failed: {_first_line(exc)}"
        final = await self._final(execution_id)
        if final is not None:
            self._finals[execution_id] = final
        record = self._records.get(execution_id)
        if record is not None:
            self._records[execution_id] = Record(
                record.execution_id, record.title, "ended", reason[:REASON_LIMIT], record.parent
            )
        self._watchers.pop(execution_id, None)
        self._runs.pop(execution_id, None)
        if execution_id in self._own:  # its actor hosted it alone: free the process
            self._own.discard(execution_id)
            with contextlib.suppress(Exception):
                ray.kill(self._hosts[execution_id])
        self._ended.append(execution_id)
        while len(self._ended) > ENDED_LIMIT:
            gone = self._ended.popleft()
            self._records.pop(gone, None)
            self._hosts.pop(gone, None)
            self._finals.pop(gone, None)

    async def _final(self, execution_id: str) -> ExecutionFinished | None:
        """The host's own ``ExecutionFinished`` for the execution, read before its actor is
        freed (``None`` if the actor died, or does not answer in :data:`FINAL_WAIT` s)."""
        try:
            final = self._hosts[execution_id].final.remote(execution_id, FINAL_WAIT)
            return await asyncio.wait_for(final, FINAL_WAIT * 2)
        except Exception:
            return None

    async def finished(self, execution_id: str) -> ExecutionFinished | None:
        """How an ended execution ended, as its host published it (``None`` if unknown, or
        its actor died before it could say): what a watcher that had not read its end when
        the actor was freed delivers instead of "its actor died"."""
        return self._finals.get(execution_id)

    async def list(self) -> list[Record]:
        """Every execution known, oldest first."""
        return list(self._records.values())

    async def host(self, execution_id: str) -> Any:
        """The actor hosting ``execution_id`` (``None`` if unknown)."""
        return self._hosts.get(execution_id)


def _first_line(exc: BaseException) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip() or type(exc).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


_Registry = _as_actor(num_cpus=0, max_concurrency=10_000)(RegistryActor)


def registry() -> Any:
    """The cluster's registry actor, started (detached) by the first driver that asks."""
    return _Registry.options(  # type: ignore[attr-defined]
        name=NAME,
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        resources={HEAD: 0.001},  # on the head: it lives as long as the cluster does
    ).remote()
