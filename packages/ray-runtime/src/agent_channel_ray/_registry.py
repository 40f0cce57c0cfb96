"""The cluster's list of executions: a named, detached actor any driver finds by name.

Each entry is watched through its run's object ref: when the run returns, is cancelled or its
actor dies, the entry turns ``ended`` with how, so an execution whose worker was lost is never
listed as running forever.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError, TaskCancelledError

from ._wire import Record

_as_actor: Any = ray.remote  # its stubs know no max_concurrency

NAME = "agent_channel_registry"
NAMESPACE = "agent_channel"
RECORD_LIMIT = 10_000
"""Entries kept; past it the oldest ended ones are forgotten (running ones never are)."""
REASON_LIMIT = 500


class RegistryActor:
    """The registry's class; :func:`registry` returns the cluster's one actor of it."""

    def __init__(self) -> None:
        self._records: OrderedDict[str, Record] = OrderedDict()
        self._hosts: dict[str, Any] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}

    async def register(
        self,
        execution_id: str,
        title: str,
        host: Any,
        run: list[Any],
        parent: str | None = None,
    ) -> None:
        """List an execution; ``run`` holds its run's object ref (in a list, so Ray passes
        the ref rather than waiting for its value)."""
        self._records[execution_id] = Record(execution_id, title, "running", parent=parent)
        self._hosts[execution_id] = host
        self._watchers[execution_id] = asyncio.create_task(self._watch(execution_id, run[0]))
        self._trim()

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
        record = self._records.get(execution_id)
        if record is not None:
            self._records[execution_id] = Record(
                record.execution_id, record.title, "ended", reason[:REASON_LIMIT], record.parent
            )
        self._watchers.pop(execution_id, None)

    def _trim(self) -> None:
        while len(self._records) > RECORD_LIMIT:
            ended = next((k for k, r in self._records.items() if r.status == "ended"), None)
            if ended is None:
                return
            del self._records[ended]
            self._hosts.pop(ended, None)

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
        name=NAME, namespace=NAMESPACE, lifetime="detached", get_if_exists=True
    ).remote()
