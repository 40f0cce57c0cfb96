"""The one-result rule: every assistant tool call is followed by exactly its results,
before any other message, whatever runs beside it and wherever an interrupt lands.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import anyio
import anyio.lowlevel
import pytest
from agent_channel import (
    AgentRef,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    ExecutionEvent,
    UserMessage,
    open_channel,
)
from agent_channel_react import (
    AgentState,
    ScriptedModel,
    ScriptStep,
    ToolInfo,
    call,
    handoff,
    react,
    reply,
    tool,
    tool_call,
)

from .helpers import Blocker, Recorder, add, drive

pytestmark = pytest.mark.anyio


def assert_one_result_rule(messages: Sequence[ChatMessage]) -> None:
    """Each assistant message with tool calls is followed at once by one result per call."""
    claimed: set[int] = set()
    for i, m in enumerate(messages):
        if isinstance(m, ChatMessageAssistant) and m.tool_calls:
            n = len(m.tool_calls)
            after = messages[i + 1 : i + 1 + n]
            ids = [r.tool_call_id if isinstance(r, ChatMessageTool) else None for r in after]
            assert sorted(map(str, ids)) == sorted(c.id for c in m.tool_calls), (
                f"message {i} asks for {[c.id for c in m.tool_calls]} but is followed by "
                f"{[(r.role, getattr(r, 'tool_call_id', None), r.text[:30]) for r in after]}"
            )
            claimed.update(range(i + 1, i + 1 + n))
    strays = [
        i for i, m in enumerate(messages) if isinstance(m, ChatMessageTool) and i not in claimed
    ]
    assert not strays, f"tool results at {strays} answer no call just before them"


async def test_a_handoff_beside_another_call_keeps_both_results_next_to_their_call() -> None:
    child_model = ScriptedModel(["Specialist here: 42."])
    specialist = handoff(
        react(model=child_model, submit=False, prompt="You are the specialist."),
        name="specialist",
        description="Hand over to the specialist.",
    )
    parent = ScriptedModel(
        [
            call(tool_call("specialist"), tool_call("add", a=1, b=2), content="Two things."),
            call(tool_call("submit", answer="42")),
        ]
    )
    agent = react(model=parent, tools=[specialist, add])
    state = await agent(AgentState(messages=[ChatMessageUser(content="Go.")]))
    assert_one_result_rule(state.messages)
    assert_one_result_rule(parent.calls[1].messages)
    assert "[specialist] Specialist here: 42." in [m.text for m in state.messages]


async def test_a_handoff_does_not_bring_back_the_parents_own_narration() -> None:
    child_model = ScriptedModel(["Specialist here."])
    specialist = handoff(
        react(model=child_model, submit=False, prompt="You are the specialist."),
        name="specialist",
        description="Hand over to the specialist.",
    )
    parent = ScriptedModel(
        [
            call(tool_call("specialist"), content="Let me hand this over."),
            call(tool_call("submit", answer="done")),
        ]
    )
    state = await react(model=parent, tools=[specialist])(
        AgentState(messages=[ChatMessageUser(content="Go.")])
    )
    back = [m.text for m in state.messages if m.text.startswith("[specialist]")]
    assert back == ["[specialist] Specialist here."]


async def test_an_interrupt_after_a_handoff_finished_repairs_the_call_beside_it() -> None:
    child_model = ScriptedModel(["Specialist done."])
    specialist = handoff(
        react(model=child_model, submit=False, prompt="You are the specialist."),
        name="specialist",
        description="Hand over to the specialist.",
    )
    blocker = Blocker()
    parent = ScriptedModel(
        [call(tool_call("specialist"), tool_call("block")), reply("After the stop.")]
    )

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await blocker.started.wait()
        await rec.seen("tool_call_finished")  # the handoff has finished
        ref.interrupt()
        ref.post(UserMessage("Stop there."))

    agent = react(model=parent, tools=[specialist, blocker.tool], submit=False)
    state, _ = await drive(agent, AgentState(messages=[ChatMessageUser(content="Go.")]), producer)
    assert_one_result_rule(parent.calls[-1].messages)
    assert_one_result_rule(state.messages)
    results = {m.function: m for m in state.messages if isinstance(m, ChatMessageTool)}
    assert results["block"].error == "cancelled"
    assert results["specialist"].error is None
    assert "[specialist] Specialist done." in [m.text for m in state.messages]


async def _checkpoints(rng: random.Random, most: int = 6) -> None:
    for _ in range(rng.randrange(most)):
        await anyio.lowlevel.checkpoint()


@pytest.mark.parametrize("seed", range(40))
async def test_the_one_result_rule_holds_under_concurrent_tools_and_random_interrupts(
    seed: int,
) -> None:
    """A seeded hammer: random batches of concurrent calls (handoffs among them), each
    taking a random number of scheduler steps, and interrupts fired at random events
    (mid-model-call, mid-tool, mid-handoff, between turns, during repairs)."""
    rng = random.Random(seed)

    async def child_script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> str:
        assert_one_result_rule(messages)  # the child's input too
        await _checkpoints(rng)
        return rng.choice(["Child: one.", "Child: two.", ""])

    child = react(model=ScriptedModel(child_script), submit=False, prompt="Child system.")
    helper = handoff(child, name="helper", description="Hand over to the helper.")

    @tool
    async def slow(n: int) -> str:
        """Takes a few scheduler steps."""
        await _checkpoints(rng, 10)
        return f"slow {n}"

    tools = [helper, add, slow]
    choices = [
        lambda: tool_call("helper"),
        lambda: tool_call("add", a=rng.randrange(9), b=1),
        lambda: tool_call("slow", n=rng.randrange(9)),
        lambda: tool_call("nope"),
    ]

    async def parent_script(
        messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]
    ) -> ScriptStep | str:
        assert_one_result_rule(messages)  # every model input obeys the rule
        # A19: the shared view is this very list, through repairs, folds and handoffs
        assert refs[0].messages() == tuple(messages)
        lists.add(id(messages))
        await _checkpoints(rng)
        if rng.random() < 0.15:
            return "Thinking aloud."
        calls = [rng.choice(choices)() for _ in range(rng.randrange(1, 4))]
        return call(*calls, content=rng.choice(["", "Working."]))

    parent = ScriptedModel(parent_script)
    live = rng.random() < 0.5
    agent = react(model=parent, tools=tools, max_turns=12, submit=rng.random() < 0.5)
    fire_at = set(rng.sample(range(1, 120), rng.randrange(1, 8)))
    refs: list[AgentRef] = []
    lists: set[int] = set()
    seen = 0

    def hammer(e: ExecutionEvent) -> None:
        nonlocal seen
        seen += 1
        ref = refs[0]
        if e.type == "awaiting_input":
            ref.post(UserMessage(f"Go on ({seen})."))  # an operator answering the park
        elif seen in fire_at:
            ref.interrupt()
            if rng.random() < 0.5:
                ref.post(UserMessage(f"Redirect ({seen})."))

    async with open_channel() as ch:
        ref = ch.ref()
        refs.append(ref)
        ref.subscribe(hammer)
        release = ref.mark_live() if live else None
        with anyio.fail_after(30):  # a hang is a failure, not a stuck suite
            state = await agent(AgentState(messages=[ChatMessageUser(content="Go.")]))
        if release is not None:
            release()
    assert_one_result_rule(state.messages)
    assert state.output.end is not None
    assert lists == {id(state.messages)}  # one list, mutated in place, the whole run
    assert ref.messages() == tuple(state.messages)


async def test_after_an_interrupt_results_follow_their_calls_in_call_order() -> None:
    """A call that finished after one still running keeps its real result, in its place:
    the repaired call's synthetic result comes first, as the calls were asked."""
    blocker = Blocker()
    model = ScriptedModel(
        [call(tool_call("block"), tool_call("add", a=2, b=3)), reply("Partly done.")]
    )

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await blocker.started.wait()
        await rec.seen("tool_call_finished")  # add has finished, block has not
        ref.interrupt()
        ref.post(UserMessage("Stop there."))

    agent = react(model=model, tools=[blocker.tool, add], submit=False)
    state, rec = await drive(agent, AgentState(messages=[ChatMessageUser(content="Go.")]), producer)
    asked = state.messages[2]
    assert isinstance(asked, ChatMessageAssistant)
    results = state.messages[3:5]
    assert [getattr(r, "tool_call_id", None) for r in results] == [c.id for c in asked.tool_calls]
    assert [(r.text, getattr(r, "error", None)) for r in results] == [
        ("Tool call cancelled by the operator.", "cancelled"),
        ("5", None),
    ]
    appended = [e.message.id for e in rec.of("message_appended")]
    assert appended == [m.id for m in state.messages]  # published in that order too
