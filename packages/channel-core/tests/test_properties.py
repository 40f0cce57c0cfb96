"""Random sequences of post / interrupt / scope enter-exit / drain / outer cancel.

Invariants: every posted item is drained exactly once and in order;
AgentInterrupted is raised iff an interrupt hit a bound scope (and no outer
cancel raced it); no outer cancellation is ever lost or converted.
"""

from __future__ import annotations

from types import TracebackType

import anyio
import anyio.lowlevel
import pytest
from agent_channel import AgentInterrupted, Cancel, ChannelItem, UserMessage, open_channel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

OPS = ("post", "interrupt", "enter", "exit", "drain", "outer_cancel")


async def _run(ops: list[str]) -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        posted: list[ChannelItem] = []
        drained: list[ChannelItem] = []
        outer: anyio.CancelScope | None = None
        scope = None
        interrupted = outer_cancelled = False

        async def leave() -> None:
            nonlocal outer, scope, interrupted, outer_cancelled
            assert outer is not None and scope is not None
            exc: BaseException | None = None
            try:
                await anyio.lowlevel.checkpoint()
            except BaseException as e:  # the cancellation, if any
                exc = e
            raised: BaseException | None = None
            try:
                tb: TracebackType | None = exc.__traceback__ if exc else None
                scope.__exit__(type(exc) if exc else None, exc, tb)
                if exc is not None:
                    raised = exc
            except BaseException as e:
                raised = e
            if interrupted and not outer_cancelled:
                assert isinstance(raised, AgentInterrupted)
            else:
                assert not isinstance(raised, AgentInterrupted)
            if outer_cancelled:
                assert raised is not None and not isinstance(raised, AgentInterrupted)
            swallowed = outer.__exit__(
                type(raised) if raised else None, raised, raised.__traceback__ if raised else None
            )
            assert outer.cancelled_caught == outer_cancelled  # never lost
            assert raised is None or swallowed or isinstance(raised, AgentInterrupted)
            outer = scope = None
            interrupted = outer_cancelled = False

        for op in ops:
            if op == "post":
                item = UserMessage(str(len(posted)))
                ref.post(item)
                posted.append(item)
            elif op == "interrupt":
                cancel = Cancel()
                ref.interrupt(cancel)
                posted.append(cancel)
                interrupted = interrupted or scope is not None
            elif op == "enter" and scope is None:
                outer = anyio.CancelScope()
                outer.__enter__()
                scope = ch.scope()
                scope.__enter__()
            elif op == "exit" and scope is not None:
                await leave()
            elif op == "outer_cancel" and outer is not None:
                outer.cancel()
                outer_cancelled = True
            elif op == "drain":
                drained.extend(ch.drain())
        if scope is not None:
            await leave()
        drained.extend(ch.drain())
        assert [i.id for i in drained] == [i.id for i in posted]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.sampled_from(OPS), max_size=40))
def test_random_sequences_keep_the_invariants(backend: str, ops: list[str]) -> None:
    anyio.run(_run, ops, backend=backend)
