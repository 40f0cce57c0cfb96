"""Helpers for the durable-execution tests: a run on a store that a test "crashes" (an
outer cancellation records no end), and the checks a model would make of a conversation."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio
from agent_channel import (
    AgentRef,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    open_channel,
)
from agent_channel_react import Agent, AgentState
from agent_channel_sqlite import open_store

from .helpers import Recorder

EID = "exec-1"
Until = Callable[[AgentRef, Recorder], Awaitable[None]]


class Run:
    """One process's life of a durable execution: what it returned (if it ended) and saw."""

    def __init__(self) -> None:
        self.result: AgentState | None = None
        self.recorder = Recorder()
        self.ref: AgentRef | None = None


async def run_durable(
    path: Path,
    agent: Agent,
    state: AgentState | None = None,
    *,
    until: Until | None = None,
    live: bool = False,
    wait: bool = False,
) -> Run:
    """Run ``agent`` on the store at ``path``; when ``until`` returns, crash it (cancel it
    from outside: the store keeps it ``running``). Without ``until`` it runs to its end."""
    run = Run()
    store = open_store(path)
    ready = anyio.Event()
    try:
        with anyio.fail_after(60):  # a hang is a failure, not a stuck suite
            async with anyio.create_task_group() as tg:

                async def body() -> None:
                    async with open_channel(journal=store.journal(EID, wait=wait)) as ch:
                        run.ref = ref = ch.ref()
                        ref.subscribe(run.recorder)
                        if live:
                            ref.mark_live()
                        ready.set()
                        run.result = await agent(state or AgentState())
                    tg.cancel_scope.cancel()  # it ended: nothing left to crash

                tg.start_soon(body)
                await ready.wait()
                if until is not None:
                    assert run.ref is not None
                    await until(run.ref, run.recorder)
                    tg.cancel_scope.cancel()  # the crash
                else:
                    await anyio.sleep_forever()
    finally:
        store.close()
    return run


def stored(path: Path) -> tuple[ChatMessage, ...]:
    """The execution's conversation as the store has it."""
    store = open_store(path)
    try:
        return store.messages(EID)
    finally:
        store.close()


def well_formed(messages: Sequence[ChatMessage], *, in_flight: bool = False) -> None:
    """Every tool call has exactly one result, right after its message; ids are unique.

    ``in_flight``: a stored conversation of a crashed run may end with the calls it was
    running (written ahead of them: a restart settles them), and nothing else unanswered.
    """
    if in_flight and messages:
        last = messages[-1]
        if isinstance(last, ChatMessageAssistant) and last.tool_calls:
            messages = [*messages[:-1], last.model_copy(update={"tool_calls": ()})]
    ids = Counter(
        c.id for m in messages if isinstance(m, ChatMessageAssistant) for c in m.tool_calls
    )
    assert all(n == 1 for n in ids.values()), f"repeated tool call ids: {ids}"
    results = Counter(m.tool_call_id for m in messages if isinstance(m, ChatMessageTool))
    assert results == Counter(dict.fromkeys(ids, 1)), (ids, results)
    i = 0
    while i < len(messages):
        m = messages[i]
        assert not isinstance(m, ChatMessageTool), f"result {i} follows no call"
        i += 1
        if isinstance(m, ChatMessageAssistant) and m.tool_calls:
            want = {c.id for c in m.tool_calls}
            got: set[str] = set()
            while i < len(messages) and isinstance(messages[i], ChatMessageTool):
                got.add(messages[i].tool_call_id)  # type: ignore[union-attr]
                i += 1
            assert got == want, f"message {i}: results {got} for calls {want}"


def numbers(messages: Sequence[ChatMessage], prefix: str = "msg ") -> list[int]:
    """The numbered operator messages in ``messages``, in order (a fold joins a run of them
    into one user message, a blank line between)."""
    out: list[int] = []
    for m in messages:
        if isinstance(m, ChatMessageUser):
            for part in m.text.split("\n\n"):
                if part.startswith(prefix) and part[len(prefix) :].isdigit():
                    out.append(int(part[len(prefix) :]))
    return out
