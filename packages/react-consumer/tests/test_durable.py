"""Durable executions in the react loop (issue 19): checkpoints at every boundary (D3) and
the resume after a crash (D4). A crash is an outer cancellation of the run (the store keeps
the execution ``running``); the store is closed, opened again, and the agent run again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_channel import (
    AgentChannel,
    AgentRef,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    UserMessage,
    open_channel,
)
from agent_channel_react import (
    AgentState,
    ScriptedModel,
    ScriptItem,
    call,
    react,
    reply,
    tool,
    tool_call,
)
from agent_channel_react._execute import INTERRUPTED
from agent_channel_sqlite import open_store

from .durable import EID, run_durable, stored, well_formed
from .helpers import Blocker, Recorder, add

pytestmark = pytest.mark.anyio


def task(text: str = "Add things.") -> AgentState:
    return AgentState(messages=[ChatMessageUser(content=text)])


def results(messages: tuple[ChatMessage, ...] | list[ChatMessage]) -> list[ChatMessageTool]:
    return [m for m in messages if isinstance(m, ChatMessageTool)]


async def started(ref: AgentRef, rec: Recorder, n: int = 1) -> None:
    await rec.seen("tool_call_started", n)


# -- D3 --------------------------------------------------------------------------------


async def test_d3_every_boundary_is_checkpointed_and_the_end_keeps_it_all(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    model = ScriptedModel([call(tool_call("add", a=1, b=2)), call(tool_call("submit", answer="3"))])
    agent = react(model=model, tools=[add])
    run = await run_durable(path, agent, task())
    assert run.result is not None and run.result.output.end == "submitted"
    assert [m.id for m in stored(path)] == [m.id for m in run.result.messages]
    store = open_store(path)
    try:
        row = store.get(EID)
        assert row is not None and row.status == "ended" and row.messages == 6
    finally:
        store.close()


async def test_d3_the_calls_are_written_before_they_run_with_the_progress(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    block = Blocker()
    model = ScriptedModel([call(tool_call("add", a=1, b=2)), call(tool_call("block"))])
    await run_durable(path, react(model=model, tools=[add, block.tool]), task(), until=started_2)
    messages = stored(path)
    last = messages[-1]
    assert isinstance(last, ChatMessageAssistant) and last.tool_calls[0].name == "block"
    store = open_store(path)
    try:
        journal = store.journal(EID)
        restored = journal.restored()
        assert restored is not None and restored.state is not None
        state: dict[str, Any] = dict(restored.state)
        assert (state["turns"], state["requests"], state["submitted"]) == (2, 2, 0)
        assert state["message"] == last.id
        assert state["output"]["usage"]["total_tokens"] > 0
    finally:
        store.close()


async def started_2(ref: AgentRef, rec: Recorder) -> None:
    await rec.seen("tool_call_started", 2)


async def test_d3_without_a_journal_the_loop_builds_no_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    called: list[object] = []
    monkeypatch.setattr(AgentChannel, "checkpoint", lambda self, state=None: called.append(state))
    model = ScriptedModel([call(tool_call("add", a=1, b=2)), call(tool_call("submit", answer="3"))])
    async with open_channel():
        out = await react(model=model, tools=[add])(task())
    assert out.output.end == "submitted" and called == []


# -- D4: calls in flight ---------------------------------------------------------------


async def test_d4_a_call_in_flight_of_a_tool_not_idempotent_is_interrupted_by_the_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    block = Blocker()
    script: list[ScriptItem] = [
        call(tool_call("add", a=1, b=2), tool_call("block")),
        call(tool_call("submit", answer="done")),
    ]
    first = ScriptedModel(script)
    agent = react(model=first, tools=[add, block.tool])
    await run_durable(path, agent, task(), until=started_2)
    again = Blocker()
    second = ScriptedModel(script)  # a new process: a fresh model on the same script
    run = await run_durable(path, react(model=second, tools=[add, again.tool]), task("ignored"))
    assert run.result is not None and run.result.output.end == "submitted"
    messages = run.result.messages
    well_formed(messages)
    assert [m.text for m in messages if isinstance(m, ChatMessageUser)] == ["Add things."]
    add_result, block_result, _ = results(messages)
    assert add_result.error == INTERRUPTED  # add is not declared idempotent: not run again
    assert block_result.error == INTERRUPTED
    assert block_result.text == "Tool call interrupted by a restart."
    assert not again.started.is_set()
    assert len(second.calls) == 1  # the script went on at its second step
    # nothing ran again; the submit call is the next turn's (call_3: ids go on)
    assert [(e.name, e.tool_call_id) for e in run.recorder.of("tool_call_started")] == [
        ("submit", "call_3")
    ]


async def test_d4_a_call_in_flight_of_an_idempotent_tool_runs_again(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    runs: list[str] = []
    hold = anyio.Event()

    @tool(idempotent=True)
    async def lookup(key: str) -> str:
        """Look a key up."""
        runs.append(key)
        if len(runs) == 1:
            await hold.wait()  # the first process dies in here
        return f"value of {key}"

    script: list[ScriptItem] = [
        call(tool_call("lookup", key="k"), tool_call("block")),
        call(tool_call("submit", answer="done")),
    ]
    block = Blocker()
    await run_durable(
        path,
        react(model=ScriptedModel(script), tools=[lookup, block.tool]),
        task(),
        until=started_2,
    )
    assert runs == ["k"]
    assert lookup.idempotent and not block.tool.idempotent
    run = await run_durable(
        path, react(model=ScriptedModel(script), tools=[lookup, Blocker().tool]), task()
    )
    assert run.result is not None and run.result.output.end == "submitted"
    assert runs == ["k", "k"]
    well_formed(run.result.messages)
    looked, blocked, _ = results(run.result.messages)
    assert (looked.function, looked.text, looked.error) == ("lookup", "value of k", None)
    assert blocked.error == INTERRUPTED  # call order kept: the rerun's result comes first
    assert [e.name for e in run.recorder.of("tool_call_started")] == ["lookup", "submit"]


async def test_d4_a_rerun_asks_the_approver_again(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    hold = anyio.Event()

    @tool(idempotent=True)
    async def lookup(key: str) -> str:
        """Look a key up."""
        await hold.wait()
        return key

    script: list[ScriptItem] = [call(tool_call("lookup", key="k")), reply("ok")]
    agent = react(model=ScriptedModel(script), tools=[lookup], submit=False)
    await run_durable(path, agent, task(), until=started)
    asked: list[str] = []
    hold.set()

    async def approve(c: Any) -> bool:
        asked.append(c.name)
        return False

    store = open_store(path)
    try:
        async with open_channel(journal=store.journal(EID), approver=approve):
            out = await react(model=ScriptedModel(script), tools=[lookup], submit=False)(task())
    finally:
        store.close()
    assert asked == ["lookup"]
    assert results(out.messages)[0].error == "rejected by the operator"


# -- D4: the run goes on ---------------------------------------------------------------


async def test_d4_turns_and_usage_carry_over_and_max_turns_binds_across_a_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    block = Blocker()
    script: list[ScriptItem] = [
        call(tool_call("add", a=1, b=1)),
        call(tool_call("block")),
        call(tool_call("add", a=2, b=2)),
        call(tool_call("add", a=3, b=3)),
    ]
    first = react(model=ScriptedModel(script), tools=[add, block.tool], max_turns=3)
    await run_durable(path, first, task(), until=started_2)
    store = open_store(path)
    try:
        before = store.journal(EID).restored()
        assert before is not None and before.state is not None
        used = dict(before.state)["output"]["usage"]["total_tokens"]  # type: ignore[index]
    finally:
        store.close()
    second_model = ScriptedModel(script)
    second = react(model=second_model, tools=[add, Blocker().tool], max_turns=3)
    run = await run_durable(path, second, task())
    out = run.result
    assert out is not None and out.output.end == "max_turns"
    assert len(second_model.calls) == 1  # turns 1 and 2 were the first process's
    assert sum(isinstance(m, ChatMessageAssistant) for m in out.messages) == 3
    assert out.output.usage.total_tokens > used
    assert [r.text for r in results(out.messages)] == [
        "2",
        "Tool call interrupted by a restart.",
        "4",
    ]
    # tool call ids go on after the conversation's: none is repeated
    well_formed(out.messages)


async def test_d4_operator_messages_queued_at_the_crash_arrive_once(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    block = Blocker()

    async def post_then_crash(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("tool_call_started")
        ref.post(UserMessage("msg 1"))
        ref.post(UserMessage("msg 2"))

    script: list[ScriptItem] = [call(tool_call("block")), call(tool_call("submit", answer="x"))]
    await run_durable(
        path, react(model=ScriptedModel(script), tools=[block.tool]), task(), until=post_then_crash
    )
    run = await run_durable(path, react(model=ScriptedModel(script), tools=[block.tool]), task())
    assert run.result is not None
    well_formed(run.result.messages)
    users = [m.text for m in run.result.messages if isinstance(m, ChatMessageUser)]
    assert users == ["Add things.", "msg 1\n\nmsg 2"]


def answering(messages: Any, tools: Any) -> ScriptItem:
    """An interactive model: it answers the last user message."""
    last = [m for m in messages if isinstance(m, ChatMessageUser)][-1]
    return reply(f"You said {last.text}")


async def test_d4_an_interactive_agent_parked_after_answering_parks_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"

    async def answered_then_crash(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("awaiting_input")
        ref.post(UserMessage("hi"))
        await rec.seen("awaiting_input", 2)

    first = ScriptedModel(answering)
    agent = react(model=first, tools=[add], submit=False)
    await run_durable(path, agent, live=True, until=answered_then_crash)
    assert len(first.calls) == 1

    async def parked_then_talk(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("awaiting_input")
        assert len(second.calls) == 0  # parked again, without asking the model
        ref.post(UserMessage("again"))
        await rec.seen("awaiting_input", 2)

    second = ScriptedModel(answering)
    await run_durable(
        path, react(model=second, tools=[add], submit=False), live=True, until=parked_then_talk
    )
    messages = stored(path)
    assert [type(m).__name__ for m in messages] == [
        "ChatMessageSystem",
        "ChatMessageUser",
        "ChatMessageAssistant",
        "ChatMessageUser",
        "ChatMessageAssistant",
    ]
    assert messages[-1].text == "You said again"


async def test_d4_a_run_stopped_and_waiting_waits_again(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    block = Blocker()

    async def stop_then_crash(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("tool_call_started")
        ref.interrupt()
        await rec.seen("awaiting_input")

    script: list[ScriptItem] = [call(tool_call("block")), reply("after the stop")]
    agent = react(model=ScriptedModel(script), tools=[block.tool], submit=False)
    await run_durable(path, agent, task(), live=True, until=stop_then_crash)
    second = ScriptedModel(script)

    async def waits(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("awaiting_input")
        assert second.calls == []
        ref.post(UserMessage("go on"))
        await rec.seen("awaiting_input", 2)

    await run_durable(
        path, react(model=second, tools=[block.tool], submit=False), live=True, until=waits
    )
    messages = stored(path)
    well_formed(messages)
    assert results(messages)[0].error == "cancelled"
    assert [m.text for m in messages[-2:]] == ["go on", "after the stop"]


async def test_d4_wait_parks_until_an_operator_message_and_runs_nothing_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    runs: list[int] = []
    hold = anyio.Event()

    @tool(idempotent=True)
    async def lookup() -> str:
        """Look up."""
        runs.append(1)
        await hold.wait()
        return "found"

    script: list[ScriptItem] = [call(tool_call("lookup")), call(tool_call("submit", answer="a"))]
    await run_durable(
        path, react(model=ScriptedModel(script), tools=[lookup]), task(), until=started
    )
    second = ScriptedModel(script)

    async def parked(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("awaiting_input")
        assert second.calls == [] and runs == [1]
        ref.post(UserMessage("carry on"))
        await rec.seen("model_call_finished")

    run = await run_durable(
        path, react(model=second, tools=[lookup]), task(), wait=True, until=parked
    )
    assert run.ref is not None
    messages = stored(path)
    well_formed(messages)
    assert results(messages)[0].error == INTERRUPTED
    assert runs == [1]


async def test_d4_a_run_that_ended_before_its_end_was_recorded_ends_again(
    tmp_path: Path,
) -> None:
    """The end's checkpoint was written, then the process died: the restored run returns
    its output without a model call."""
    path = tmp_path / "s.db"
    store = open_store(path)
    model = ScriptedModel([call(tool_call("submit", answer="42"))])
    try:
        journal = store.journal(EID)
        ended = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def body() -> None:
                async with open_channel(journal=journal):
                    await react(model=model, tools=[])(task())
                    ended.set()
                    await anyio.sleep_forever()  # ended, but the channel never closed

            tg.start_soon(body)
            await ended.wait()
            tg.cancel_scope.cancel()
    finally:
        store.close()
    again = ScriptedModel([call(tool_call("submit", answer="wrong"))])
    run = await run_durable(path, react(model=again, tools=[]), task())
    assert run.result is not None
    assert (run.result.output.end, run.result.output.completion) == ("submitted", "42")
    assert again.calls == []


def test_d4_a_scripted_model_resumes_at_the_run_s_model_calls() -> None:
    model = ScriptedModel(["a", "b", "c"])
    history: list[ChatMessage] = [
        ChatMessageAssistant(
            tool_calls=(tool_call("add", a=1, b=2).model_copy(update={"id": "call_7"}),)
        )
    ]
    model.resume(2, history)
    assert model._next == 2  # pyright: ignore[reportPrivateUsage]
    assert model._with_id(tool_call("add")).id == "call_8"  # pyright: ignore[reportPrivateUsage]
