"""Outer cancellation of a react run: a time limit or a task-group shutdown.

Issue 10's rule: cut during generation, during a tool, while parked after an interrupt (or
after an answer), or in the same step as an interrupt, the run ends by the caller's own
cancellation (the scope catches it), never as ``AgentInterrupted``; the execution reports
``stop_reason == "cancelled"`` with no error, and what an operator queued and nobody read is
in ``undelivered``. A23 (``_agent_channel/end``) is this path seen from ACP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

import anyio
import pytest
from agent_channel import (
    AgentRef,
    ChatMessageTool,
    ChatMessageUser,
    ExecutionFinished,
    UserMessage,
    open_channel,
)
from agent_channel_react import AgentState, ScriptedModel, ScriptItem, call, react, reply, tool_call

from .helpers import Blocker, Recorder
from .test_tool_results import assert_one_result_rule

pytestmark = pytest.mark.anyio

How = Literal["deadline", "task_group"]
HOWS: list[How] = ["deadline", "task_group"]
Moment = Callable[[AgentRef, Recorder, Blocker], Awaitable[None]]
"""Waits (on events) for the moment to cut; may act on the ref first."""


async def _cut_run(
    moment: Moment, how: How, *, live: bool = False, state: AgentState | None = None
) -> tuple[Recorder, bool]:
    """Run an interactive react agent on a fresh channel and cut it at ``moment``.

    Returns the events and whether the caller's own scope caught the cancellation. An
    ``AgentInterrupted`` (or any error) escaping the agent fails the test as it propagates.
    ``state`` (the caller's, which the run mutates in place) is read back by some tests.
    """
    state = state or AgentState(messages=[ChatMessageUser(content="Start.")])
    blocker = Blocker()
    model = ScriptedModel(lambda messages, tools: _script(messages[-1].text if messages else ""))
    agent = react(model=model, tools=[blocker.tool], submit=False)
    rec = Recorder()
    caught = False
    with anyio.fail_after(30):  # a hang is a failure, not a stuck suite
        async with anyio.create_task_group() as outer:
            with anyio.move_on_after(3600) as limit:
                async with open_channel() as ch:
                    ref = ch.ref()
                    ref.subscribe(rec)
                    if live:
                        ref.mark_live()

                    async def cutter() -> None:
                        await moment(ref, rec, blocker)
                        if how == "deadline":
                            limit.deadline = anyio.current_time()  # the time limit expires now
                        else:
                            outer.cancel_scope.cancel()

                    outer.start_soon(cutter)
                    await agent(state)
                    pytest.fail("the run ended on its own; the cut never landed")
            caught = limit.cancelled_caught
    return rec, caught or outer.cancel_scope.cancelled_caught


def _script(last: str) -> ScriptItem:
    if last == "Start.":
        return reply("A long answer that is cut.", delay=3600)
    if last == "block":
        return call(tool_call("block"), content="blocking")
    return reply(f"answered: {last}")


def _finished(rec: Recorder) -> ExecutionFinished:
    last = rec.events[-1]
    assert isinstance(last, ExecutionFinished), rec.types
    return last


def _assert_clean_end(rec: Recorder, caught: bool) -> ExecutionFinished:
    assert caught, "the caller's scope did not catch its own cancellation"
    finished = _finished(rec)
    assert finished.stop_reason == "cancelled"
    assert finished.error is None
    assert not any("AgentInterrupted" in str(e) for e in rec.events)
    return finished


@pytest.mark.parametrize("how", HOWS)
async def test_outer_cancel_during_generation_ends_the_run_cancelled(how: How) -> None:
    async def moment(ref: AgentRef, rec: Recorder, blocker: Blocker) -> None:
        await rec.seen("model_delta")
        ref.post(UserMessage("queued during the cut"))

    rec, caught = await _cut_run(moment, how)
    finished = _assert_clean_end(rec, caught)
    assert [i.text for i in finished.undelivered] == ["queued during the cut"]  # type: ignore[attr-defined]
    (mc,) = rec.of("model_call_finished")
    assert mc.cancelled and mc.message is None  # the partial answer never lands
    assert rec.of("turn_cancelled") == []  # outer cancellation is not an interrupt
    assert not any(
        "cut" in e.message.text for e in rec.of("message_appended") if e.message.role == "assistant"
    )


@pytest.mark.parametrize("how", HOWS)
async def test_outer_cancel_during_a_tool_ends_the_run_cancelled(how: How) -> None:
    async def moment(ref: AgentRef, rec: Recorder, blocker: Blocker) -> None:
        await rec.seen("model_delta")
        ref.interrupt()
        ref.post(UserMessage("block"))
        await blocker.started.wait()
        ref.post(UserMessage("queued while the tool runs"))

    rec, caught = await _cut_run(moment, how)
    finished = _assert_clean_end(rec, caught)
    assert [i.text for i in finished.undelivered] == ["queued while the tool runs"]  # type: ignore[attr-defined]
    (tool_done,) = rec.of("tool_call_finished")
    assert tool_done.status == "cancelled"


@pytest.mark.parametrize("how", HOWS)
async def test_outer_cancel_during_a_tool_leaves_every_call_with_one_result(how: How) -> None:
    """The caller's state and the published conversation stay well-formed (one result per
    call, right after it), so they can be logged, read over A19 or resumed."""

    async def moment(ref: AgentRef, rec: Recorder, blocker: Blocker) -> None:
        await rec.seen("model_delta")
        ref.interrupt()
        ref.post(UserMessage("block"))
        await blocker.started.wait()

    state = AgentState(messages=[ChatMessageUser(content="Start.")])
    rec, caught = await _cut_run(moment, how, state=state)
    _assert_clean_end(rec, caught)
    assert_one_result_rule(state.messages)
    published = [e.message for e in rec.of("message_appended")]
    assert [m.id for m in published] == [m.id for m in state.messages]
    last = state.messages[-1]
    assert isinstance(last, ChatMessageTool) and last.error == "cancelled"
    assert last.text == "Tool call cancelled by the system."


@pytest.mark.parametrize("how", HOWS)
async def test_outer_cancel_while_parked_after_an_interrupt_ends_the_run_cancelled(
    how: How,
) -> None:
    async def moment(ref: AgentRef, rec: Recorder, blocker: Blocker) -> None:
        await rec.seen("model_delta")
        ref.interrupt()
        await rec.seen("awaiting_input")
        assert rec.of("awaiting_input")[0].stop_reason == "cancelled"
        ref.interrupt()  # a cancel while parked changes nothing (A12), nor does it survive
        await anyio.wait_all_tasks_blocked()

    rec, caught = await _cut_run(moment, how, live=True)
    finished = _assert_clean_end(rec, caught)
    assert finished.undelivered == ()
    assert len(rec.of("turn_cancelled")) == 1


@pytest.mark.parametrize("how", HOWS)
async def test_outer_cancel_while_parked_after_an_answer_ends_the_run_cancelled(
    how: How,
) -> None:
    async def moment(ref: AgentRef, rec: Recorder, blocker: Blocker) -> None:
        await rec.seen("model_delta")
        ref.interrupt()
        ref.post(UserMessage("say something"))
        await rec.seen("awaiting_input")
        assert rec.of("awaiting_input")[0].stop_reason == "end_turn"

    rec, caught = await _cut_run(moment, how, live=True)
    _assert_clean_end(rec, caught)


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("where", ["generation", "tool"])
async def test_outer_cancel_in_the_same_step_as_an_interrupt_wins_and_keeps_the_cancel(
    how: How, where: str
) -> None:
    """The race: the interrupt is in flight when the outer cut lands. The cut wins (the
    caller's scope catches it), and the interrupt is neither raised nor lost."""

    async def moment(ref: AgentRef, rec: Recorder, blocker: Blocker) -> None:
        await rec.seen("model_delta")
        if where == "tool":
            ref.interrupt()
            ref.post(UserMessage("block"))
            await blocker.started.wait()
        ref.interrupt()

    rec, caught = await _cut_run(moment, how)
    _assert_clean_end(rec, caught)
