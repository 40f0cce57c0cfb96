"""Messages and interrupts reaching the loop: when, and what the conversation becomes."""

from __future__ import annotations

import anyio
import pytest
from agent_channel import (
    AgentRef,
    Cancel,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    ExecutionEvent,
    NotOwner,
    UserMessage,
    agent_channel,
    open_channel,
)
from agent_channel_react import AgentState, ScriptedModel, call, react, reply, tool_call
from pydantic import ValidationError

from .helpers import Blocker, Recorder, add, drive

pytestmark = pytest.mark.anyio


def _input(text: str = "Start.") -> AgentState:
    return AgentState(messages=[ChatMessageUser(content=text)])


def _roles(state: AgentState) -> list[str]:
    return [m.role for m in state.messages]


async def test_message_mid_run_is_folded_at_the_next_boundary_not_before() -> None:
    gate = anyio.Event()
    model = ScriptedModel(
        [call(tool_call("add", a=1, b=2), wait=gate), call(tool_call("submit", answer="3"))]
    )

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("model_call_started")
        ref.post(UserMessage("Also mention the sum."))
        gate.set()

    state, rec = await drive(react(model=model, tools=[add]), _input(), producer)
    first, second = model.calls
    assert not any(m.text == "Also mention the sum." for m in first.messages)
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "tool", "user"]
    assert second.messages[-1].text == "Also mention the sum."
    assert rec.index("items_drained") > rec.index("turn_ended")
    assert state.output.completion == "3"


async def test_interrupt_during_generate_redirects_and_drops_partial_output() -> None:
    model = ScriptedModel(
        [reply("A partial answer that must never land.", delay=3600), reply("Redirected.")]
    )

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("model_delta")
        ref.interrupt()
        ref.post(UserMessage("Do this instead."))

    state, rec = await drive(react(model=model, submit=False), _input(), producer)
    assert [m.text for m in state.messages[1:]] == ["Start.", "Do this instead.", "Redirected."]
    assert not any("partial" in m.text for m in state.messages)
    cancelled = [e for e in rec.of("model_call_finished") if e.cancelled]
    assert len(cancelled) == 1 and cancelled[0].message is None
    assert rec.index("model_call_finished") < rec.index("turn_cancelled")
    drained = rec.of("items_drained")[0].items
    assert [i.type for i in drained] == ["user_message"]  # the Cancel came as the exception
    assert rec.of("awaiting_input") == []  # stop-then-redirect: no wait
    assert model.calls[1].messages[-1].text == "Do this instead."


async def test_interrupt_during_blocking_tool_repairs_then_waits_for_the_operator() -> None:
    blocker = Blocker()
    model = ScriptedModel([call(tool_call("block")), reply("After the stop.")])

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        release = ref.mark_live()  # an operator is there to answer the wait
        await blocker.started.wait()
        ref.interrupt()
        await rec.seen("awaiting_input")
        release()  # so the answer after "Carry on." ends the run instead of parking
        ref.post(UserMessage("Carry on."))

    agent = react(model=model, tools=[blocker.tool], submit=False)
    state, rec = await drive(agent, _input(), producer)
    assert _roles(state) == ["system", "user", "assistant", "tool", "user", "assistant"]
    repaired = state.messages[3]
    assert isinstance(repaired, ChatMessageTool) and repaired.error == "cancelled"
    assert repaired.tool_call_id == "call_1"
    assert rec.of("awaiting_input")[0].stop_reason == "cancelled"
    assert len(rec.of("turn_cancelled")) == 1
    tool_done = rec.of("tool_call_finished")[0]
    assert tool_done.status == "cancelled"
    order = [
        rec.index("tool_call_finished"),
        rec.index("turn_cancelled"),
        rec.index("awaiting_input"),
        rec.index("items_drained"),  # the operator's message, taken by the parked wait
    ]
    assert order == sorted(order)
    repair_event = next(
        e for e in rec.of("message_appended") if e.message.id == repaired.id and e.index == 3
    )
    assert rec.events.index(repair_event) < rec.index("awaiting_input")
    assert [m.role for m in model.calls[1].messages][-2:] == ["tool", "user"]
    assert state.output.completion == "After the stop."


async def test_messages_queued_before_the_interrupt_are_used_at_once() -> None:
    blocker = Blocker()
    model = ScriptedModel([call(tool_call("block")), reply("Got both.")])

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await blocker.started.wait()
        ref.post(UserMessage("First."))
        ref.post(UserMessage("Second."))
        ref.interrupt()

    agent = react(model=model, tools=[blocker.tool], submit=False)
    state, rec = await drive(agent, _input(), producer)
    assert rec.of("awaiting_input") == []
    folded = state.messages[4]
    assert isinstance(folded, ChatMessageUser) and folded.text == "First.\n\nSecond."
    assert folded.source == "operator"
    assert model.calls[1].messages[-1].text == "First.\n\nSecond."


async def test_finished_parallel_calls_keep_their_results_and_the_rest_are_repaired() -> None:
    blocker = Blocker()
    model = ScriptedModel(
        [call(tool_call("add", a=2, b=3), tool_call("block")), reply("Partly done.")]
    )

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await blocker.started.wait()
        await rec.seen("tool_call_finished")  # add has finished
        ref.interrupt()
        ref.post(UserMessage("Stop there."))

    agent = react(model=model, tools=[add, blocker.tool], submit=False)
    state, rec = await drive(agent, _input(), producer)
    results = {m.function: m for m in state.messages if isinstance(m, ChatMessageTool)}
    assert results["add"].text == "5" and results["add"].error is None
    assert results["block"].error == "cancelled"
    statuses = {e.name: e.status for e in rec.of("tool_call_finished")}
    assert statuses == {"add": "completed", "block": "cancelled"}


async def test_interrupt_between_turns_is_delivered_at_the_next_boundary() -> None:
    model = ScriptedModel([call(tool_call("add", a=1, b=1)), call(tool_call("submit", answer="2"))])
    refs: list[AgentRef] = []

    def interrupt_when_the_turn_ends(e: ExecutionEvent) -> None:
        if e.type == "turn_ended" and len(refs) == 1:
            refs.pop().interrupt()  # no scope is bound now: a plain delivery

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        ref.mark_live()  # an operator is there to answer the wait
        refs.append(ref)
        ref.subscribe(interrupt_when_the_turn_ends)
        await rec.seen("awaiting_input")
        ref.post(UserMessage("Go on."))

    state, rec = await drive(react(model=model, tools=[add]), _input(), producer)
    assert rec.index("turn_ended") < rec.index("turn_cancelled") < rec.index("awaiting_input")
    assert len(rec.of("turn_cancelled")) == 1  # published once, by whoever honours it
    assert rec.of("turn_cancelled")[0].cancel.reason == "user_cancel"
    assert rec.of("awaiting_input")[0].stop_reason == "cancelled"
    assert model.calls[1].messages[-1].text == "Go on."
    assert state.output.completion == "2"


async def test_interrupts_while_parked_do_not_wake_the_agent() -> None:
    model = ScriptedModel(["First answer.", "Second answer."])

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("awaiting_input")
        ref.interrupt()
        ref.interrupt(Cancel("system"))
        await anyio.wait_all_tasks_blocked()
        after = rec.types[rec.index("awaiting_input") + 1 :]
        assert set(after) <= {"items_drained"}  # it took the cancels, and did nothing
        assert len(model.calls) == 1
        release()
        ref.post(UserMessage("Next."))

    release = lambda: None  # noqa: E731 -- replaced once the ref exists

    async def attach(ref: AgentRef, rec: Recorder) -> None:
        nonlocal release
        release = ref.mark_live()
        await producer(ref, rec)

    agent = react(model=model, submit=False)
    state, rec = await drive(agent, _input(), attach)
    assert [m.text for m in state.messages[2:]] == ["First answer.", "Next.", "Second answer."]
    assert rec.of("turn_cancelled") == []
    assert not any(isinstance(m, ChatMessageTool) for m in state.messages)


async def test_interactive_agent_parks_at_start_and_after_each_answer_when_live() -> None:
    model = ScriptedModel(["One.", "Two."])

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("awaiting_input", 1)
        ref.post(UserMessage("Hi."))
        await rec.seen("awaiting_input", 2)
        ref.post(UserMessage("Again."))
        await rec.seen("awaiting_input", 3)
        release()
        ref.post(UserMessage("Bye."))

    release = lambda: None  # noqa: E731

    async def attach(ref: AgentRef, rec: Recorder) -> None:
        nonlocal release
        release = ref.mark_live()
        await producer(ref, rec)

    model = ScriptedModel(["One.", "Two.", "Three."])
    state, rec = await drive(react(model=model, submit=False, prompt=None), AgentState(), attach)
    assert [e.stop_reason for e in rec.of("awaiting_input")] == ["end_turn"] * 3
    assert [m.text for m in state.messages] == ["Hi.", "One.", "Again.", "Two.", "Bye.", "Three."]
    assert state.output.end == "answered"


async def test_max_turn_requests_parks_an_interactive_agent() -> None:
    model = ScriptedModel([call(tool_call("add", a=1, b=1))] * 2 + ["Fine."])

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        release = ref.mark_live()
        await rec.seen("awaiting_input")
        release()
        ref.post(UserMessage("Just answer."))

    agent = react(model=model, tools=[add], submit=False, max_turn_requests=2)
    state, rec = await drive(agent, _input(), producer)
    assert rec.of("awaiting_input")[0].stop_reason == "max_turn_requests"
    assert state.messages[-1].text == "Fine."


async def test_a_producer_cannot_write_the_conversation() -> None:
    seen_lengths: list[int] = []
    gate = anyio.Event()

    async def script(messages: object, tools: object) -> str:
        assert isinstance(messages, list)
        seen_lengths.append(len(messages))  # pyright: ignore[reportUnknownArgumentType]
        if len(seen_lengths) == 1:
            await gate.wait()
        return "Done."

    model = ScriptedModel(script)

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("model_call_started")
        assert not hasattr(ref, "drain") and not hasattr(ref, "state")
        with pytest.raises(NotOwner):
            agent_channel().drain()  # the ambient channel, from a task that does not own it
        ref.post(UserMessage("Sneaky."))
        gate.set()

    agent = react(model=model, submit=False)
    state, rec = await drive(agent, _input(), producer)
    assert seen_lengths == [2]  # the post never reached the in-flight call's conversation
    assert state.messages[-1].text == "Done."  # and, never drained, it was not appended
    assert [i.type for i in rec.of("execution_finished")[0].undelivered] == ["user_message"]
    appended = rec.of("message_appended")[0].message
    with pytest.raises(ValidationError):
        appended.content = "rewritten"


async def test_approver_can_reject_a_tool_call() -> None:
    async def approver(tc: object) -> bool:
        return False

    model = ScriptedModel([call(tool_call("add", a=1, b=1)), call(tool_call("submit", answer="x"))])
    rec = Recorder()
    async with open_channel(approver=approver) as ch:
        ch.ref().subscribe(rec)
        state = await react(model=model, tools=[add])(_input())
    results = [m for m in state.messages if isinstance(m, ChatMessageTool)]
    assert results[0].error == "rejected by the operator"
    assert rec.of("tool_call_finished")[0].status == "failed"
    assert rec.index("tool_call_started") < rec.index("tool_call_finished")


async def test_interrupt_while_the_approver_is_pending_abandons_it() -> None:
    asked = anyio.Event()

    async def approver(tc: object) -> bool:
        asked.set()
        await anyio.sleep_forever()
        return True

    model = ScriptedModel([call(tool_call("add", a=1, b=1)), reply("Not run.")])
    rec = Recorder()
    async with open_channel(approver=approver) as ch:
        ref = ch.ref()
        ref.subscribe(rec)

        async def producer() -> None:
            await asked.wait()
            ref.interrupt()
            ref.post(UserMessage("Never mind."))

        async with anyio.create_task_group() as tg:
            tg.start_soon(producer)
            state = await react(model=model, tools=[add], submit=False)(_input())
    assert state.messages[3].role == "tool" and isinstance(state.messages[3], ChatMessageTool)
    assert state.messages[3].error == "cancelled"
    assert rec.of("tool_call_finished")[0].status == "cancelled"
    assert isinstance(state.messages[-1], ChatMessageAssistant)


@pytest.mark.parametrize("submit", [True, False], ids=["submit", "interactive"])
async def test_an_interrupt_with_no_live_producer_carries_on_with_the_repaired_conversation(
    submit: bool,
) -> None:
    blocker = Blocker()
    second = call(tool_call("submit", answer="done")) if submit else reply("Done anyway.")
    model = ScriptedModel([call(tool_call("block")), second])
    parked: list[str] = []

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        def unpark(e: ExecutionEvent) -> None:
            if e.type == "awaiting_input":  # nobody is there to answer: record it, then free it
                parked.append(e.stop_reason)
                ref.post(UserMessage("Unparked by the test."))

        ref.subscribe(unpark)
        await blocker.started.wait()
        ref.interrupt(Cancel("limit"))

    agent = react(model=model, tools=[blocker.tool], submit=submit)
    state, _ = await drive(agent, _input(), producer)  # not live: no ref.mark_live()
    assert parked == []
    assert state.output.end == ("submitted" if submit else "answered")
    repaired = model.calls[1].messages[-1]
    assert isinstance(repaired, ChatMessageTool) and repaired.error == "cancelled"
    assert repaired.text == "Tool call cancelled by a limit."


async def test_an_interrupt_between_turns_with_no_live_producer_carries_on() -> None:
    model = ScriptedModel([call(tool_call("add", a=1, b=1)), call(tool_call("submit", answer="2"))])
    parked: list[str] = []

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        def on_event(e: ExecutionEvent) -> None:
            if e.type == "turn_ended" and rec.types.count("turn_ended") == 1:
                ref.interrupt()  # no scope is bound now: delivered at the next drain
            elif e.type == "awaiting_input":
                parked.append(e.stop_reason)
                ref.post(UserMessage("Unparked by the test."))

        ref.subscribe(on_event)

    state, rec = await drive(react(model=model, tools=[add]), _input(), producer)
    assert parked == []
    assert rec.of("turn_cancelled")
    assert state.output.completion == "2"


async def test_an_interrupt_queued_after_the_drain_stops_the_turn_before_the_model() -> None:
    gate = anyio.Event()
    model = ScriptedModel(
        [call(tool_call("add", a=1, b=1), wait=gate), call(tool_call("submit", answer="2"))]
    )

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        def on_event(e: ExecutionEvent) -> None:
            # The folded message is appended after the drain and before the next scope.
            if e.type == "message_appended" and e.message.text == "Redirect.":
                ref.interrupt()

        ref.subscribe(on_event)
        await rec.seen("model_call_started")
        ref.post(UserMessage("Redirect."))
        gate.set()

    state, rec = await drive(react(model=model, tools=[add]), _input(), producer)
    assert len(rec.of("turn_cancelled")) == 1
    assert rec.index("turn_cancelled") < rec.index("model_call_started", 2)
    assert len(model.calls) == 2  # the stopped turn never reached the model
    assert model.calls[1].messages[-1].text == "Redirect."
    assert state.output.completion == "2"
