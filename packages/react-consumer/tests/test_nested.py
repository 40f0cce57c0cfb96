"""Nested executions: a child's channel is real and its own; the parent's producer cannot see it."""

from __future__ import annotations

import anyio
import pytest
from agent_channel import AgentRef, ChatMessageTool, ChatMessageUser, UserMessage
from agent_channel_react import (
    AgentState,
    ScriptedModel,
    as_tool,
    call,
    handoff,
    react,
    reply,
    run,
    tool_call,
)

from .helpers import Recorder, drive

pytestmark = pytest.mark.anyio


def _input(text: str = "Start.") -> AgentState:
    return AgentState(messages=[ChatMessageUser(content=text)])


async def test_run_gives_the_child_a_working_channel_of_its_own() -> None:
    model = ScriptedModel([reply("Stalled.", delay=3600), "Child redirected."])
    child = react(model=model, submit=False)
    child_rec = Recorder()

    def attach(ref: AgentRef) -> None:
        ref.subscribe(child_rec)

    async with anyio.create_task_group() as tg:
        refs: list[AgentRef] = []

        async def producer() -> None:
            await child_rec.seen("model_delta")
            refs[0].interrupt()
            refs[0].post(UserMessage("Child, do this."))

        tg.start_soon(producer)
        state = await run(child, "Go.", on_ref=lambda r: (refs.append(r), attach(r)))
    assert [m.text for m in state.messages[1:]] == ["Go.", "Child, do this.", "Child redirected."]
    assert child_rec.of("turn_cancelled") and refs[0].closed


async def test_a_child_tool_is_interrupted_through_its_own_ref_unseen_by_the_parent() -> None:
    child_model = ScriptedModel([reply("Thinking hard.", delay=3600), "Child answer."])
    child = react(model=child_model, submit=False, name="helper")
    child_refs: list[AgentRef] = []
    child_rec = Recorder()

    def on_child(ref: AgentRef) -> None:
        ref.subscribe(child_rec)
        child_refs.append(ref)

    helper = as_tool(child, name="helper", description="Asks the helper.", on_ref=on_child)
    parent_model = ScriptedModel(
        [call(tool_call("helper", input="Help me.")), call(tool_call("submit", answer="ok"))]
    )

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await child_rec.seen("model_delta")
        child_refs[0].interrupt()
        child_refs[0].post(UserMessage("Be quick."))

    state, parent_rec = await drive(react(model=parent_model, tools=[helper]), _input(), producer)
    result = next(m for m in state.messages if isinstance(m, ChatMessageTool))
    assert result.text == "Child answer." and result.error is None
    assert parent_rec.of("turn_cancelled") == []  # the child's interrupt stayed in the child
    assert len(parent_rec.of("model_call_started")) == len(parent_model.calls) == 2
    child_ids = {m.id for m in child_model.calls[-1].messages}
    parent_seen = {e.message.id for e in parent_rec.of("message_appended")}
    assert not child_ids & parent_seen
    assert child_rec.of("turn_cancelled")


async def test_interrupting_the_parent_aborts_a_child_running_as_a_tool() -> None:
    child_model = ScriptedModel([reply("Slow child.", delay=3600)])
    child_refs: list[AgentRef] = []
    child_rec = Recorder()

    def on_child(ref: AgentRef) -> None:
        ref.subscribe(child_rec)
        child_refs.append(ref)

    helper = as_tool(
        react(model=child_model, submit=False), name="helper", description="-", on_ref=on_child
    )
    parent_model = ScriptedModel([call(tool_call("helper", input="Work.")), reply("Redirected.")])

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await child_rec.seen("model_delta")
        ref.interrupt()
        ref.post(UserMessage("Forget the helper."))

    agent = react(model=parent_model, tools=[helper], submit=False)
    state, rec = await drive(agent, _input(), producer)
    result = next(m for m in state.messages if isinstance(m, ChatMessageTool))
    assert result.error == "cancelled"
    assert child_refs[0].closed
    finished = child_rec.of("execution_finished")[0]
    assert finished.stop_reason == "cancelled"
    assert [e.status for e in rec.of("tool_call_finished")] == ["cancelled"]
    assert state.messages[-1].text == "Redirected."


async def test_handoff_brings_the_childs_replies_back() -> None:
    child_model = ScriptedModel(["I took it from here: 42."])
    specialist = handoff(
        react(model=child_model, submit=False, prompt="You are the specialist."),
        name="specialist",
        description="Hand over to the specialist.",
    )
    parent_model = ScriptedModel(
        [call(tool_call("specialist")), call(tool_call("submit", answer="42"))]
    )
    state = await react(model=parent_model, tools=[specialist])(_input("What is it?"))
    texts = [m.text for m in state.messages]
    assert "[specialist] I took it from here: 42." in texts
    seen = child_model.calls[0].messages
    assert [m.role for m in seen] == ["system", "user", "assistant"]
    assert seen[0].text == "You are the specialist." and seen[1].text == "What is it?"
    assert state.output.completion == "42"
