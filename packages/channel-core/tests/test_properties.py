"""Random sequences of post / interrupt / scope enter-exit / drain / outer cancel.

Invariants: every item is delivered exactly once (a Cancel by the scope it stopped,
or by the scope it stopped as it was entered, or else by a drain outside any scope) and
messages in order; AgentInterrupted is raised iff an interrupt hit a bound scope (and no outer
cancel raced it) or a Cancel was queued when a scope was entered; no outer
cancellation is ever lost or converted.
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
        pending: list[ChannelItem] = []  # the model of the queue
        outer: anyio.CancelScope | None = None
        scope = None
        interrupted = outer_cancelled = False
        first_cancel: Cancel | None = None

        async def leave() -> None:
            nonlocal outer, scope, interrupted, outer_cancelled, first_cancel
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
                assert raised.cancel is first_cancel
                pending.remove(raised.cancel)  # a drain inside the scope left it there
                drained.append(raised.cancel)
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
            first_cancel = None

        for op in ops:
            if op == "post":
                item = UserMessage(str(len(posted)))
                ref.post(item)
                posted.append(item)
                pending.append(item)
            elif op == "interrupt":
                cancel = Cancel()
                ref.interrupt(cancel)
                posted.append(cancel)
                pending.append(cancel)
                if scope is not None and first_cancel is None:
                    first_cancel = cancel
                interrupted = interrupted or scope is not None
            elif op == "enter" and scope is None:
                queued = [i for i in pending if isinstance(i, Cancel)]
                entering = ch.scope()
                if queued:  # a stop waiting since the last boundary: stopped as it is entered
                    with pytest.raises(AgentInterrupted) as caught:
                        entering.__enter__()
                    assert caught.value.cancel is queued[0]
                    pending.remove(queued[0])
                    drained.append(queued[0])
                    continue
                outer = anyio.CancelScope()
                outer.__enter__()
                scope = entering
                scope.__enter__()
            elif op == "exit" and scope is not None:
                await leave()
            elif op == "outer_cancel" and outer is not None:
                outer.cancel()
                outer_cancelled = True
            elif op == "drain":
                taken = ch.drain()
                if scope is not None:  # inside a scope a Cancel is the scope's to deliver
                    kept = [i for i in pending if isinstance(i, Cancel)]
                    assert taken == [i for i in pending if not isinstance(i, Cancel)]
                else:
                    kept = []
                    assert taken == pending
                drained.extend(taken)
                pending[:] = kept
        if scope is not None:
            await leave()
        drained.extend(ch.drain())
        assert sorted(i.id for i in drained) == sorted(i.id for i in posted)
        assert len({i.id for i in drained}) == len(drained)  # exactly once
        messages = [i.id for i in posted if isinstance(i, UserMessage)]
        assert [i.id for i in drained if isinstance(i, UserMessage)] == messages


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.sampled_from(OPS), max_size=40))
def test_random_sequences_keep_the_invariants(backend: str, ops: list[str]) -> None:
    anyio.run(_run, ops, backend=backend)
