"""Limits end a run with their reason at once, whether or not an operator is attached."""

from __future__ import annotations

import anyio
import pytest
from agent_channel import AgentRef, ChatMessageUser, ExecutionEvent, UserMessage
from agent_channel_react import AgentState, ScriptedModel, call, react, tool, tool_call

from .helpers import Blocker, Recorder, drive

pytestmark = pytest.mark.anyio


def _input() -> AgentState:
    return AgentState(messages=[ChatMessageUser(content="Go.")])


def _free_a_park(ref: AgentRef, parked: list[str]) -> None:
    """Record any park and answer it, so a regression fails an assertion, not the suite."""

    def on_event(e: ExecutionEvent) -> None:
        if e.type == "awaiting_input":
            parked.append(e.stop_reason)
            release()
            ref.post(UserMessage("Unparked by the test."))

    release = ref.mark_live()
    ref.subscribe(on_event)


@pytest.mark.parametrize(
    ("limit", "value"),
    # The answer is the 2nd message, and 1 word in + 2 words out = 3 tokens.
    [("message_limit", 2), ("token_limit", 3), ("max_turns", 1)],
)
async def test_the_answer_that_reaches_a_limit_ends_the_run_even_with_a_live_operator(
    limit: str, value: int
) -> None:
    model = ScriptedModel(["Hi there.", "Unreachable."])
    parked: list[str] = []

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        _free_a_park(ref, parked)

    agent = react(model=model, submit=False, prompt=None, **{limit: value})
    state, rec = await drive(agent, _input(), producer)
    assert parked == []
    assert state.output.end == limit
    assert len(model.calls) == 1
    assert [m.text for m in state.messages] == ["Go.", "Hi there."]
    assert rec.of("execution_finished")[0].stop_reason == (
        "max_tokens" if limit == "token_limit" else "max_turn_requests"
    )


@pytest.mark.parametrize(
    ("limit", "value"),
    # system-less: user, assistant(call), tool = 3 messages; 1 word in + 1 call out = 2 tokens.
    [("message_limit", 3), ("token_limit", 2)],
)
@pytest.mark.parametrize("submit", [True, False], ids=["submit", "interactive"])
async def test_a_message_queued_during_the_batch_that_reaches_a_limit_is_undelivered(
    limit: str, value: int, submit: bool
) -> None:
    started, gate = anyio.Event(), anyio.Event()

    @tool
    async def work() -> str:
        """Works until the test lets it finish."""
        started.set()
        await gate.wait()
        return "worked"

    model = ScriptedModel([call(tool_call("work")), "Unreachable."])
    parked: list[str] = []

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        _free_a_park(ref, parked)
        await started.wait()
        ref.post(UserMessage("Too late."))
        gate.set()

    agent = react(model=model, tools=[work], submit=submit, prompt=None, **{limit: value})
    state, rec = await drive(agent, _input(), producer)
    assert parked == []
    assert state.output.end == limit
    assert [m.role for m in state.messages] == ["user", "assistant", "tool"]
    assert rec.of("items_drained") == []
    undelivered = rec.of("execution_finished")[0].undelivered
    assert [i.text for i in undelivered] == ["Too late."]


async def test_an_accepted_submission_wins_over_a_limit_reached_by_its_call() -> None:
    model = ScriptedModel([call(tool_call("submit", answer="42"))])
    state = await react(model=model, prompt=None, message_limit=3)(_input())
    assert (state.output.end, state.output.completion) == ("submitted", "42")


async def test_a_redirect_after_an_interrupt_in_the_last_allowed_turn_is_undelivered() -> None:
    blocker = Blocker()
    model = ScriptedModel([call(tool_call("block")), "Unreachable."])

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        ref.mark_live()
        await blocker.started.wait()
        ref.interrupt()
        ref.post(UserMessage("Do this instead."))

    agent = react(model=model, tools=[blocker.tool], submit=False, prompt=None, max_turns=1)
    state, rec = await drive(agent, _input(), producer)
    assert state.output.end == "max_turns"
    assert [m.role for m in state.messages] == ["user", "assistant", "tool"]
    assert state.messages[-1].error == "cancelled"  # pyright: ignore[reportAttributeAccessIssue]
    undelivered = rec.of("execution_finished")[0].undelivered
    assert "Do this instead." in [getattr(i, "text", None) for i in undelivered]
