"""Shared test helpers: tools, an event recorder and id normalisation for snapshots."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
from agent_channel import AgentRef, ExecutionEvent, open_channel
from agent_channel_react import Agent, AgentState, ToolError, tool


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool(kind="read", title="Echo {text}")
async def echo(text: str) -> str:
    """Say the text back."""
    return text


@tool
async def fail(why: str = "broken") -> str:
    """Always fails."""
    raise ToolError(f"it failed: {why}")


@tool
async def crash() -> str:
    """Raises an unexpected exception."""
    raise ZeroDivisionError("division by zero")


class Recorder:
    """A subscriber that keeps every event; tests await ``seen(kind, n)`` to synchronise."""

    def __init__(self) -> None:
        self.events: list[ExecutionEvent] = []
        self._waiters: list[tuple[str, int, anyio.Event]] = []

    def __call__(self, event: ExecutionEvent) -> None:
        self.events.append(event)
        for kind, n, ev in self._waiters:
            if len(self.of(kind)) >= n:
                ev.set()

    async def seen(self, kind: str, n: int = 1) -> None:
        """Return once ``n`` events of ``kind`` have been published."""
        if len(self.of(kind)) < n:
            ev = anyio.Event()
            self._waiters.append((kind, n, ev))
            await ev.wait()

    def index(self, kind: str, n: int = 1) -> int:
        """Position of the ``n``-th event of ``kind`` in the log."""
        hits = [i for i, e in enumerate(self.events) if e.type == kind]
        return hits[n - 1]

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]


_ID_KEYS = {"id", "call_id", "message_id", "tool_call_id"}
_TOOL_EVENTS = {"tool_call_started", "tool_call_finished"}


def normalise(value: Any) -> Any:
    """Replace random ids with ``id-N`` in order of first appearance (JSON-like input)."""
    seen: dict[str, str] = {}

    def walk(v: Any, key: str | None = None) -> Any:
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}  # pyright: ignore[reportUnknownVariableType]
        if isinstance(v, list):
            return [walk(x) for x in v]  # pyright: ignore[reportUnknownVariableType]
        if key in _ID_KEYS and isinstance(v, str) and not re.fullmatch(r"call_\d+", v):
            return seen.setdefault(v, f"id-{len(seen) + 1}")
        return v

    return walk(value)


def event_log(events: list[ExecutionEvent]) -> list[dict[str, Any]]:
    """Events as JSON; concurrent tool events (whose order the scheduler picks) are sorted."""
    out: list[dict[str, Any]] = [json.loads(e.model_dump_json()) for e in events]
    i = 0
    while i < len(out):
        j = i
        while j < len(out) and out[j]["type"] in _TOOL_EVENTS:
            j += 1
        if j > i + 1:
            out[i:j] = sorted(
                out[i:j], key=lambda e: (e["type"] != "tool_call_started", e["tool_call_id"])
            )
        i = max(j, i + 1)
    return out


Producer = Callable[[AgentRef, Recorder], Awaitable[None]]


async def drive(
    agent: Agent, state: AgentState, producer: Producer, *, live: bool = False
) -> tuple[AgentState, Recorder]:
    """Run ``agent`` in this task on a fresh channel while ``producer`` works its ref."""
    recorder = Recorder()
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(recorder)
        if live:
            ref.mark_live()
        async with anyio.create_task_group() as tg:
            # Started (not merely scheduled) before the agent: its setup up to its first
            # await has run, so a fast agent cannot finish before the producer attaches.
            await tg.start(_producing, producer, ref, recorder)
            with anyio.fail_after(60):  # a hang is a failure, not a stuck suite
                result = await agent(state)
    return result, recorder


async def _producing(
    producer: Producer,
    ref: AgentRef,
    recorder: Recorder,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    task_status.started()
    await producer(ref, recorder)


class Blocker:
    """A tool that blocks until cancelled; ``started`` is set once it runs."""

    def __init__(self, name: str = "block") -> None:
        self.started = anyio.Event()

        async def block(reason: str = "") -> str:
            """Blocks until cancelled."""
            self.started.set()
            await anyio.sleep_forever()
            return "unreachable"

        self.tool = tool(name=name, kind="execute")(block)
