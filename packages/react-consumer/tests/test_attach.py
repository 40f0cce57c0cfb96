"""Attach mode, consumer side: the shared conversation, one tool call cancelled alone,
and approvals routed by a producer that did not open the execution.

Rules (docs/acp-behaviour.md): A6 (the conversation is there from its start), A18/A19
(the view is the top-level one, never a nested run's), A22 (cancel one tool call).
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Sequence

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from agent_channel import (
    AgentRef,
    ChatMessage,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ExecutionEvent,
    ToolCall,
    UserMessage,
    agent_channel,
    open_channel,
)
from agent_channel_react import (
    AgentState,
    ScriptedModel,
    ScriptStep,
    ToolInfo,
    as_tool,
    call,
    handoff,
    react,
    reply,
    tool,
    tool_call,
)

from .helpers import Blocker, Recorder, add, drive
from .test_tool_results import assert_one_result_rule

pytestmark = pytest.mark.anyio

CANCELLED_TEXT = "Tool call cancelled by the operator."
SEEDS = int(os.environ.get("AGENT_CHANNEL_HAMMER_SEEDS", "12"))
"""Hammer runs per backend; the long form is ``AGENT_CHANNEL_HAMMER_SEEDS=500``."""


def _input(text: str = "Go.") -> AgentState:
    return AgentState(messages=[ChatMessageUser(content=text, source="task")])


# -- A6 / A19: the shared conversation --------------------------------------------------


async def test_a6_system_prompt_and_task_are_shared_before_the_first_model_call() -> None:
    gate = anyio.Event()
    model = ScriptedModel([reply("Hello.", wait=gate)])
    seen: list[tuple[ChatMessage, ...]] = []

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("model_call_started")
        seen.append(ref.messages())
        snapshot, unwatch = ref.watch(lambda e: None)
        unwatch()
        seen.append(snapshot.messages)
        gate.set()

    agent = react(model=model, submit=False, prompt="Be brief.")
    state, rec = await drive(agent, _input("Say hello."), producer)
    assert [m.text for m in seen[0]] == ["Be brief.", "Say hello."]
    assert isinstance(seen[0][0], ChatMessageSystem)
    assert seen[1] == seen[0]
    # ... and announced too, in order, before the model call began
    appended = rec.of("message_appended")
    assert [(e.index, e.message.text) for e in appended[:2]] == [
        (0, "Be brief."),
        (1, "Say hello."),
    ]
    assert rec.index("message_appended", 2) < rec.index("model_call_started")
    assert rec.of("execution_finished")  # the run ended normally
    assert [m.text for m in state.messages] == ["Be brief.", "Say hello.", "Hello."]


async def test_a19_the_view_is_the_loops_one_list_at_every_model_call() -> None:
    lists: list[int] = []
    views: list[bool] = []
    refs: list[AgentRef] = []

    def script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptStep:
        lists.append(id(messages))
        views.append(refs[0].messages() == tuple(messages))
        if len(lists) < 4:
            return call(tool_call("add", a=len(lists), b=1), content="Adding.")
        return call(tool_call("submit", answer="done"))

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        refs.append(ref)

    state, _ = await drive(react(model=ScriptedModel(script), tools=[add]), _input(), producer)
    assert views == [True] * 4
    assert set(lists) == {id(state.messages)}  # one list, mutated in place, the whole run
    assert refs[0].messages() == tuple(state.messages)  # and still readable once finished


async def test_a19_snapshots_from_another_thread_are_always_a_prefix_of_the_final_list() -> None:
    """A thread reads the view as fast as it can while interrupts, redirects and repairs
    happen: a list swapped behind the view (or a message inserted) breaks the prefix."""
    rng = random.Random(7)
    blocker = Blocker()
    snapshots: list[tuple[ChatMessage, ...]] = []

    async def script(
        messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]
    ) -> ScriptStep | str:
        # Each model call waits for the reader to take a few more snapshots, so reads
        # really interleave with the run (polled: the reader is another thread).
        wanted = len(snapshots) + 3
        while len(snapshots) < wanted:
            await anyio.lowlevel.checkpoint()
        n = sum(isinstance(m, ChatMessageTool) for m in messages)
        if n >= 20:
            return call(tool_call("submit", answer="done"))
        pick = rng.choice([lambda: tool_call("block"), lambda: tool_call("add", a=n, b=1)])
        return call(pick(), tool_call("add", a=1, b=1), content=f"Step {n}.")

    stop = threading.Event()

    def reader(ref: AgentRef) -> None:
        while not stop.is_set():
            snapshots.append(ref.messages())

    async def interrupter(ref: AgentRef) -> None:
        while True:
            await blocker.started.wait()
            blocker.started = anyio.Event()
            ref.interrupt()
            ref.post(UserMessage("Go on."))

    agent = react(model=ScriptedModel(script), tools=[add, blocker.tool], max_turns=200)
    async with open_channel() as ch:
        ref = ch.ref()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, reader, ref)
                tg.start_soon(interrupter, ref)
                with anyio.fail_after(30):
                    state = await agent(_input())
                stop.set()
                tg.cancel_scope.cancel()
        finally:
            stop.set()
    final = tuple(state.messages)
    assert ref.messages() == final
    assert len(snapshots) > 1
    for s in snapshots:
        assert final[: len(s)] == s
    assert_one_result_rule(final)
    assert sum(m.error == "cancelled" for m in final if isinstance(m, ChatMessageTool)) > 5


@pytest.mark.parametrize("kind", ["handoff", "as_tool"])
async def test_a18_a_nested_agent_never_replaces_the_parents_view(kind: str) -> None:
    child_views: list[tuple[ChatMessage, ...]] = []
    parent_views: list[tuple[ChatMessage, ...]] = []
    refs: list[AgentRef] = []

    def child_script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> str:
        child_views.append(agent_channel().ref().messages())  # the child's own channel
        parent_views.append(refs[0].messages())
        return "Child: done."

    child = react(model=ScriptedModel(child_script), submit=False, prompt="Child system.")
    helper = (
        handoff(child, name="helper", description="Hand over.")
        if kind == "handoff"
        else as_tool(child, name="helper", description="Ask.")
    )
    arguments = {} if kind == "handoff" else {"input": "Help."}
    parent_model = ScriptedModel(
        [call(tool_call("helper", **arguments)), call(tool_call("submit", answer="ok"))]
    )

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        refs.append(ref)

    state, _ = await drive(react(model=parent_model, tools=[helper]), _input(), producer)
    assert child_views and child_views[0][0].text == "Child system."
    # mid-child, the parent's view is the parent's conversation up to the pending call
    assert parent_views[0] == tuple(state.messages[: len(parent_views[0])])
    assert parent_views[0][-1].role == "assistant"
    assert "Child system." not in [m.text for m in parent_views[0]]
    assert refs[0].messages() == tuple(state.messages)  # and after it, still the parent's


async def test_a19_outside_any_execution_nothing_is_shared() -> None:
    state = await react(model=ScriptedModel(["Hi."]), submit=False)(_input())
    assert len(state.messages) == 3
    assert agent_channel().ref().messages() == ()


# -- A22: one tool call cancelled alone --------------------------------------------------


async def test_a22_cancel_one_tool_call_turn_goes_on() -> None:
    blocker = Blocker()
    model = ScriptedModel(
        [
            call(tool_call("block"), tool_call("add", a=1, b=2), content="Both."),
            call(tool_call("submit", answer="3")),
        ]
    )
    answers: list[bool] = []

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await blocker.started.wait()
        block_id = next(e.tool_call_id for e in rec.of("tool_call_started") if e.name == "block")
        answers.append(ref.cancel_region(block_id))
        answers.append(ref.cancel_region(block_id))  # already cancelled
        answers.append(ref.cancel_region("no-such-call"))
        assert ref.turn_state == "started"

    agent = react(model=model, tools=[blocker.tool, add])
    state, rec = await drive(agent, _input(), producer)
    assert answers == [True, False, False]
    assert state.output.end == "submitted"
    assert "turn_cancelled" not in rec.types
    assert [e.type for e in rec.events if e.type.startswith("turn_")].count("turn_ended") == 2
    # the model read the error on its next call, the other call's result beside it
    second = model.calls[1].messages
    results = {m.function: m for m in second if isinstance(m, ChatMessageTool)}
    assert results["block"].error == "cancelled" and results["block"].text == CANCELLED_TEXT
    assert results["add"].error is None and results["add"].text == "3"
    assert_one_result_rule(second)
    finished = {e.name: e for e in rec.of("tool_call_finished")}
    assert finished["block"].status == "cancelled"
    assert finished["block"].content == CANCELLED_TEXT
    assert finished["add"].status == "completed"


async def test_a22_cancelling_one_of_several_concurrent_calls_leaves_the_others_running() -> None:
    blocker = Blocker()
    gate = anyio.Event()
    running = anyio.Event()

    @tool
    async def gated() -> str:
        """Runs until the test lets it finish."""
        running.set()
        await gate.wait()
        return "finished"

    model = ScriptedModel(
        [
            call(tool_call("block"), tool_call("gated"), tool_call("add", a=1, b=1)),
            call(tool_call("submit", answer="done")),
        ]
    )

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await blocker.started.wait()
        await running.wait()
        started = {e.name: e.tool_call_id for e in rec.of("tool_call_started")}
        assert ref.cancel_region(started["block"])
        await rec.seen("tool_call_finished", 2)  # add, and block's cancellation
        assert sorted(e.name for e in rec.of("tool_call_finished")) == ["add", "block"]
        assert not gate.is_set()  # gated is still running: only block was stopped
        gate.set()

    agent = react(model=model, tools=[blocker.tool, gated, add])
    state, rec = await drive(agent, _input(), producer)
    results = [m for m in state.messages if isinstance(m, ChatMessageTool)]
    assert [(r.function, r.text) for r in results[:3]] == [
        ("block", CANCELLED_TEXT),
        ("gated", "finished"),
        ("add", "2"),
    ]
    statuses = {e.name: e.status for e in rec.of("tool_call_finished")}
    assert statuses == {
        "block": "cancelled",
        "gated": "completed",
        "add": "completed",
        "submit": "completed",
    }
    assert "turn_cancelled" not in rec.types


async def test_a22_a_call_is_cancellable_as_soon_as_its_card_is_announced() -> None:
    """A producer that sees ToolCallStarted and cancels at once (in the callback, before
    the loop takes another step) must reach the call: its region is already there."""
    blocker = Blocker()
    model = ScriptedModel([call(tool_call("block")), call(tool_call("submit", answer="ok"))])
    answers: list[bool] = []
    refs: list[AgentRef] = []

    def on_event(e: ExecutionEvent) -> None:
        if e.type == "tool_call_started" and e.name == "block":
            answers.append(refs[0].cancel_region(e.tool_call_id))

    rec = Recorder()
    async with open_channel() as ch:
        refs.append(ch.ref())
        refs[0].subscribe(on_event)
        refs[0].subscribe(rec)
        with anyio.fail_after(10):
            state = await react(model=model, tools=[blocker.tool])(_input())
    assert answers == [True]
    result = next(m for m in state.messages if isinstance(m, ChatMessageTool))
    assert result.text == CANCELLED_TEXT
    assert [e.status for e in rec.of("tool_call_finished")][:1] == ["cancelled"]


async def test_a22_a_call_that_finished_cannot_be_cancelled() -> None:
    model = ScriptedModel([call(tool_call("add", a=1, b=2)), call(tool_call("submit", answer="3"))])
    answers: list[bool] = []

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("tool_call_finished")
        answers.append(ref.cancel_region(rec.of("tool_call_finished")[0].tool_call_id))

    state, _ = await drive(react(model=model, tools=[add]), _input(), producer)
    assert answers == [False]
    assert next(m for m in state.messages if isinstance(m, ChatMessageTool)).text == "3"


async def test_a22_a_cancelled_call_pending_approval_stops_waiting_for_it() -> None:
    asked = anyio.Event()

    async def approver(tc: ToolCall) -> bool:
        asked.set()
        await anyio.sleep_forever()
        return True

    model = ScriptedModel([call(tool_call("add", a=1, b=1)), reply("Carried on.")])
    rec = Recorder()
    async with open_channel(approver=approver) as ch:
        ref = ch.ref()
        ref.subscribe(rec)

        async def producer() -> None:
            await asked.wait()
            assert ref.cancel_region(rec.of("tool_call_started")[0].tool_call_id)

        async with anyio.create_task_group() as tg:
            tg.start_soon(producer)
            state = await react(model=model, tools=[add], submit=False)(_input())
    result = next(m for m in state.messages if isinstance(m, ChatMessageTool))
    assert result.error == "cancelled" and result.text == CANCELLED_TEXT
    assert state.messages[-1].text == "Carried on."
    assert "turn_cancelled" not in rec.types


@pytest.mark.parametrize("kind", ["handoff", "as_tool"])
async def test_a22_cancelling_a_call_that_runs_a_sub_agent_stops_the_sub_agent(kind: str) -> None:
    child_refs: list[AgentRef] = []
    child_rec = Recorder()

    def on_child(ref: AgentRef) -> None:
        ref.subscribe(child_rec)
        child_refs.append(ref)

    child = react(model=ScriptedModel([reply("Slow child.", delay=3600)]), submit=False)
    helper = (
        handoff(child, name="helper", description="-", on_ref=on_child)
        if kind == "handoff"
        else as_tool(child, name="helper", description="-", on_ref=on_child)
    )
    arguments = {} if kind == "handoff" else {"input": "Work."}
    parent_model = ScriptedModel(
        [call(tool_call("helper", **arguments), tool_call("add", a=2, b=2)), reply("Without it.")]
    )

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await child_rec.seen("model_delta")
        helper_id = next(e.tool_call_id for e in rec.of("tool_call_started") if e.name == "helper")
        assert ref.cancel_region(helper_id)

    agent = react(model=parent_model, tools=[helper, add], submit=False)
    state, rec = await drive(agent, _input(), producer)
    assert child_refs[0].closed
    assert child_rec.of("execution_finished")[0].stop_reason == "cancelled"
    results = {m.function: m for m in state.messages if isinstance(m, ChatMessageTool)}
    assert results["helper"].text == CANCELLED_TEXT and results["add"].text == "4"
    assert not any(m.text.startswith("[helper]") for m in state.messages)
    assert state.messages[-1].text == "Without it."
    assert "turn_cancelled" not in rec.types
    assert_one_result_rule(state.messages)


async def test_a22_a_repeated_call_id_still_runs_each_call() -> None:
    twin = ToolCall(id="same", name="add", arguments={"a": 1, "b": 1})
    model = ScriptedModel([call(twin, twin), call(tool_call("submit", answer="2"))])
    state, _ = await drive(react(model=model, tools=[add]), _input(), _idle)
    assert [m.text for m in state.messages if isinstance(m, ChatMessageTool)][:2] == ["2", "2"]


async def _idle(ref: AgentRef, rec: Recorder) -> None:
    return None


def _assert_results_in_call_order(messages: Sequence[ChatMessage]) -> None:
    for i, m in enumerate(messages):
        calls = getattr(m, "tool_calls", ())
        if calls:
            after = messages[i + 1 : i + 1 + len(calls)]
            assert [getattr(r, "tool_call_id", None) for r in after] == [c.id for c in calls]


@pytest.mark.parametrize("interrupts", [False, True], ids=["regions", "regions+interrupts"])
@pytest.mark.parametrize("seed", range(SEEDS))
async def test_a22_hammer_thread_cancelling_random_tool_calls(seed: int, interrupts: bool) -> None:
    """A foreign thread cancels random tool calls (running, finished or not yet started,
    handoffs among them) at random moments, optionally interrupting turns too: every call
    gets exactly one result, in call order, before any other message, and a region cancel
    never stops a turn."""
    rng = random.Random(seed)
    thread_rng = random.Random(seed + 1000)

    async def steps(most: int) -> None:
        for _ in range(rng.randrange(most)):
            await anyio.lowlevel.checkpoint()

    async def child_script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> str:
        await steps(20)
        return "Child: done."

    child = react(model=ScriptedModel(child_script), submit=False, prompt="Child system.")

    @tool
    async def slow(n: int) -> str:
        """Takes a few scheduler steps."""
        await steps(40)
        return f"slow {n}"

    choices = [
        lambda: tool_call("helper"),
        lambda: tool_call("slow", n=rng.randrange(9)),
        lambda: tool_call("add", a=rng.randrange(9), b=1),
    ]

    async def script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptStep:
        assert_one_result_rule(messages)
        await steps(5)
        return call(*[rng.choice(choices)() for _ in range(rng.randrange(1, 4))])

    ids: list[str] = []  # appended in the consumer's task, read by the thread
    cancelled: list[str] = []
    stop = threading.Event()

    def hammer(ref: AgentRef) -> None:
        while not stop.is_set():
            if ids:
                key = thread_rng.choice(ids[-4:])
                if ref.cancel_region(key):
                    cancelled.append(key)
            if interrupts and thread_rng.random() < 0.02:
                ref.interrupt()
                ref.post(UserMessage("Go on."))
            for _ in range(thread_rng.randrange(200)):
                pass  # a random moment, without sleeping

    def on_event(e: ExecutionEvent) -> None:
        if e.type == "tool_call_started":
            ids.append(e.tool_call_id)

    helper = handoff(child, name="helper", description="Hand over.")
    agent = react(model=ScriptedModel(script), tools=[helper, slow, add], max_turns=15)
    rec = Recorder()
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(on_event)
        ref.subscribe(rec)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, hammer, ref)
                with anyio.fail_after(30):
                    state = await agent(_input())
                stop.set()
        finally:
            stop.set()
    messages = state.messages
    assert_one_result_rule(messages)
    _assert_results_in_call_order(messages)
    assert state.output.end == "max_turns"
    by_id = {m.tool_call_id: m for m in messages if isinstance(m, ChatMessageTool)}
    for key in cancelled:  # True from cancel_region means the call's result says so
        assert by_id[key].error == "cancelled", (key, by_id[key])
    if not interrupts:
        assert "turn_cancelled" not in rec.types
        assert all(m.text == CANCELLED_TEXT for m in messages if getattr(m, "error", None))
        assert sorted(cancelled) == sorted(k for k, m in by_id.items() if m.error == "cancelled")


# -- approvals routed by a producer ------------------------------------------------------


async def test_routed_approvals_take_effect_at_the_next_call_and_release_restores() -> None:
    asked: list[str] = []

    async def owner(tc: ToolCall) -> bool:
        asked.append(f"owner {tc.arguments['a']}")
        return True

    async def server(tc: ToolCall) -> bool:
        asked.append(f"server {tc.arguments['a']}")
        return False

    releases: list[object] = []

    def script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptStep:
        n = sum(isinstance(m, ChatMessageTool) for m in messages)
        if n == 1:
            releases.append(refs[0].route_approvals(server))
        if n == 2:
            releases.pop()()  # type: ignore[operator]
        if n == 3:
            return call(tool_call("submit", answer="done"))
        return call(tool_call("add", a=n, b=1))

    refs: list[AgentRef] = []
    async with open_channel(approver=owner) as ch:
        refs.append(ch.ref())
        state = await react(model=ScriptedModel(script), tools=[add])(_input())
    assert asked == ["owner 0", "server 1", "owner 2"]  # the submit tool asks nobody
    results = [m for m in state.messages if isinstance(m, ChatMessageTool)]
    assert [r.error for r in results] == [None, "rejected by the operator", None, None]


async def test_routed_approvals_apply_when_the_owner_installed_none() -> None:
    async def server(tc: ToolCall) -> bool:
        return False

    model = ScriptedModel([call(tool_call("add", a=1, b=1)), call(tool_call("submit", answer="x"))])
    async with open_channel() as ch:
        release = ch.ref().route_approvals(server)
        state = await react(model=model, tools=[add])(_input())
        release()
        assert ch.approver is None
    results = [m for m in state.messages if isinstance(m, ChatMessageTool)]
    assert results[0].error == "rejected by the operator"
