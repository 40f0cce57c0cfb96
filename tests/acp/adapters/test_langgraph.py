"""A plain compiled LangGraph graph (its prebuilt ReAct agent) served by the CLI through its
adapter (found by entry point): messages after a tool step's results (F2), an interrupt in a
tool stops it, repaired and continued (F3, with the trap LangGraph sets: the tool must not
run to its end), restored after a crash with ``--store`` (F6), refused in one line when
nothing serves the object (F8), and ``attachable().run(graph)`` (F1). The rule suites run
against it too (``consumer`` in tests/acp/conftest.py). Real processes, a scripted
LangChain chat model (``lg_agents.Scripted``); checked from the client side only.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest
from adapter_scenarios import inspect, parked, restored_after_a_kill, sent_during_a_tool
from adapter_scenarios import said as said_by
from serving import ctl, execution, messages, one_line_failure, serving, wait_for

AGENT = "lg_agents:graph"
OPERATOR_CUT = "Tool call cancelled by the operator."
INSTALLED = "(installed adapters: langgraph, openai-agents, pydantic-ai)"


def test_f2_messages_sent_during_a_tool_reach_the_next_request_after_its_result_once(
    tmp_path: Path,
) -> None:
    seen = sent_during_a_tool(tmp_path, AGENT)
    read = [(m["role"], m["text"], m.get("tool_calls")) for m in seen]
    assert read == [
        ("system", "You are a test agent.", None),
        ("user", "gate=g1 start", None),
        ("assistant", "", ["gate"]),
        ("tool", "gate g1 opened", None),
        ("user", "first\n\nsecond", None),  # the next model call, after the result, in order
        ("assistant", "echo: first\n\nsecond", None),  # read before it answered, once
        ("user", "inspect", None),
    ]


def test_f3_an_interrupt_stops_the_tool_repairs_the_call_and_the_redirect_continues(
    tmp_path: Path,
) -> None:
    """The trap: cancelling a scope around LangGraph's stream leaves the running tool going
    to its end. Here the tool must be cancelled (``g1.cancelled``), and must not finish
    once its gate opens (no ``g1.done``) before the redirect is answered."""
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    gates = Path(tempfile.mkdtemp(prefix="acp-gates-"))
    with serving(
        rt, "--agent", AGENT, "--input", "gate=g1 start", AGENT_CHANNEL_TEST_GATES=str(gates)
    ) as s:
        (sid,) = s.ids()
        wait_for(lambda: execution(rt, sid)["runningToolCalls"], "the gate tool running")
        assert ctl(rt, "cancel", sid).returncode == 0
        wait_for(lambda: (gates / "g1.cancelled").exists(), "the gate tool cancelled")
        wait_for(lambda: not execution(rt, sid)["runningToolCalls"], "the gate tool stopped")
        (gates / "g1").touch()  # too late: a tool that went on would now finish
        seen = inspect(rt, sid)  # the redirect: the same conversation goes on
        said = said_by(rt, sid)
    assert not (gates / "g1.done").exists()
    read = [(m["role"], m["text"], m.get("tool_calls")) for m in seen[1:]]
    assert read == [
        ("user", "gate=g1 start", None),
        ("assistant", "", ["gate"]),
        ("tool", OPERATOR_CUT, None),  # answered: the tool did not run to its end
        ("user", "inspect", None),
    ]
    assert [m["error"] for m in seen if m["role"] == "tool"] == ["cancelled"]
    tools = [m for m in said if m["role"] == "tool"]
    assert [(m["content"], m["error"]) for m in tools] == [(OPERATOR_CUT, OPERATOR_CUT)]


def test_f3_an_interrupt_stops_the_model_stream_and_the_redirect_continues(
    tmp_path: Path,
) -> None:
    rt = tmp_path
    with serving(rt, "--agent", AGENT, "--input", "hang on") as s:
        (sid,) = s.ids()
        wait_for(lambda: execution(rt, sid)["status"] != "waiting for operator", "streaming")
        assert ctl(rt, "cancel", sid).returncode == 0
        wait_for(lambda: parked(rt, sid), "stopped, waiting for the redirect")
        seen = inspect(rt, sid)
    # the cut answer is not in the conversation the model reads; the prompt is, once
    assert [(m["role"], m["text"]) for m in seen[1:]] == [
        ("user", "hang on"),
        ("user", "inspect"),
    ]


def test_f6_a_killed_server_restores_the_conversation_and_every_acknowledged_message_once(
    tmp_path: Path,
) -> None:
    said, seen = restored_after_a_kill(tmp_path, AGENT)
    users = [m["text"] for m in said if m["role"] == "user"]
    assert users == ["quick first", "gate=g1 wait here", "say=after", "inspect"]  # once each
    cut = [m for m in said if m["role"] == "tool" and m["error"]]
    assert [m["content"] for m in cut] == ["Tool call interrupted by a restart."]
    assert any(m["role"] == "assistant" and m["text"] == "after" for m in said)
    # What the model read after the restart: the graph's messages, restored through
    # LangChain's own message dicts, the cut call kept and answered, each message once.
    assert [m["text"] for m in seen if m["role"] == "user"] == users
    calls = [m["tool_calls"] for m in seen if m.get("tool_calls")]
    assert calls == [["quick"], ["gate"]]
    assert [m["text"] for m in seen if m["role"] == "tool"] == [
        "done",
        "Tool call interrupted by a restart.",
    ]


@pytest.mark.parametrize("command", ["stdio", "serve"])
@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (
            "lg_agents:not_an_agent",
            "it is a builtins.object, not callable: expected an agent factory "
            f"(factory(model) -> async body) or an agent object an adapter serves {INSTALLED}",
        ),
        (
            "lg_agents_future:graph",
            "the langgraph adapter refused it: agent-channel-langgraph serves "
            "langgraph >=1.2.24,<1.3; found 1.99.0",
        ),
        (
            "lg_agents:no_messages",
            "the langgraph adapter refused it: its state has no 'messages' key "
            "(found: count): expected a graph whose state holds the conversation, "
            "e.g. MessagesState",
        ),
        (
            "lg_agents:not_compiled",
            "the langgraph adapter refused it: it is a StateGraph, not compiled: "
            "serve graph.compile()",
        ),
    ],
)
def test_f8_an_object_nothing_serves_is_one_line(
    tmp_path: Path, command: str, spec: str, says: str
) -> None:
    run = ctl(tmp_path, command, "--agent", spec)
    one_line_failure(run, f"cannot serve {spec}: {says}")
    assert run.stdout == ""


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # LangGraph runs on asyncio
async def test_f1_attachable_runs_the_graph_and_the_verbs_drive_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``attachable().run(graph)``: the plain compiled graph, served to the verbs of
    another process (``send``, then ``messages``) as ``serve`` serves it."""
    import anyio
    import lg_agents
    from agent_channel_acp import attachable

    monkeypatch.setenv("AGENT_CHANNEL_RUNTIME_DIR", str(tmp_path))
    async with attachable() as served, anyio.create_task_group() as tg:
        tg.start_soon(lambda: served.run(lg_agents.graph, title="lg"))
        with anyio.fail_after(30):  # a hang guard
            while not served.executions():
                await anyio.lowlevel.checkpoint()
        (sid,) = [e["id"] for e in served.executions()]
        sent = await anyio.to_thread.run_sync(ctl, tmp_path, "send", sid, "say=attached")
        assert sent.returncode == 0, sent.stderr

        def answered() -> bool:
            said = messages(tmp_path, sid)
            return bool(said) and said[-1]["text"] == "attached"

        await anyio.to_thread.run_sync(wait_for, answered, "the agent's answer")
        tg.cancel_scope.cancel()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # LangGraph runs on asyncio
async def test_f5_a_nodes_own_interrupt_is_a_question_and_its_answer_resumes_it() -> None:
    """``interrupt({"question": ..., "choices": [...]})`` in a node of the author's reaches
    the execution's question route (what a producer routes to its client), and the answer
    resumes the node (``Command(resume=...)``)."""
    import anyio
    import lg_agents
    from agent_channel import Answer, Question, UserMessage, open_channel
    from agent_channel_langgraph import adapt

    asked: list[Question] = []

    async def resolver(question: Question) -> Answer:
        asked.append(question)
        return Answer("blue")

    make = adapt(lg_agents.asking)
    assert make is not None
    with anyio.fail_after(30):  # a hang guard
        async with open_channel() as ch:
            ref = ch.ref()
            ref.route_questions(resolver)
            ref.post(UserMessage("go"))
            await make(None)()  # not live: ends once the prompt is answered
            said = [m.text for m in ref.messages()]
    assert [(q.text, q.choices) for q in asked] == [("Which colour?", ("red", "blue"))]
    assert said == ["go", "picked blue"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_f7_a_subgraph_runs_as_its_parent_nodes_work(tmp_path: Path) -> None:
    """A subgraph node (the suites' prebuilt agent inside another graph) is served: its
    answers land in the parent's messages and show; it is not a child execution."""
    import anyio
    import lg_agents
    from agent_channel import UserMessage, open_channel
    from agent_channel_langgraph import adapt

    make = adapt(lg_agents.nested)
    assert make is not None
    with anyio.fail_after(30):  # a hang guard
        async with open_channel() as ch:
            ref = ch.ref()
            ref.subscribe(lambda e: None)  # observed: every event built
            ref.post(UserMessage("quick now"))
            await make(None)()
            said = [(m.role, m.text) for m in ref.messages()]
    assert said == [  # each once: the subgraph hands back its whole state, the prompt too
        ("user", "quick now"),
        ("assistant", "calling quick"),
        ("tool", "done"),
        ("assistant", "results: done (None)"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_f2_hammer_messages_from_another_thread_reach_the_model_once_each_in_order() -> None:
    """F2 under a hammer: 60 messages posted from another thread while the graph runs 40
    tool steps; the model's last input holds each once, in post order, after the results."""
    import threading
    import time as clock

    import anyio
    import anyio.lowlevel
    from agent_channel import AwaitingInput, ExecutionEvent, UserMessage, open_channel
    from agent_channel_langgraph import adapt
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    inputs: list[list[BaseMessage]] = []

    @tool
    async def step() -> str:
        """One step."""
        await anyio.lowlevel.checkpoint()
        return "stepped"

    class Busy(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "busy"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Busy:  # type: ignore[override]
            return self

        def _generate(self, messages: list[BaseMessage], *a: Any, **k: Any) -> ChatResult:
            inputs.append(list(messages))
            done = sum(isinstance(m, ToolMessage) for m in messages)
            if done >= 40:
                answer = AIMessage(content="ok")
            else:
                call = {"name": "step", "args": {}, "id": f"s{done}"}
                answer = AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=answer)])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        busy = create_react_agent(Busy(), [step])
    make = adapt(busy)
    assert make is not None
    sent = [f"m{i}" for i in range(60)]
    posted = threading.Event()
    parked = anyio.Event()

    def on_event(event: ExecutionEvent) -> None:
        if isinstance(event, AwaitingInput) and posted.is_set():
            parked.set()

    with anyio.fail_after(60):  # a hang guard
        async with open_channel() as ch, anyio.create_task_group() as tg:
            ref = ch.ref()
            ref.mark_live()
            ref.subscribe(on_event)
            tg.start_soon(make(None))
            ref.post(UserMessage("go"))

            def hammer() -> None:
                for text in sent:
                    ref.post(UserMessage(text))
                    clock.sleep(0.0005)  # spread over the run (pacing, not synchronisation)
                posted.set()

            await anyio.to_thread.run_sync(hammer)
            while True:  # parked after the last post, every message taken
                await parked.wait()
                users = [m.text for m in ref.messages() if m.role == "user"]
                if "\n\n".join(users).split("\n\n") == ["go", *sent]:
                    break
                parked = anyio.Event()
            tg.cancel_scope.cancel()
    fed = {sum(isinstance(m, HumanMessage) for m in i) for i in inputs}
    assert len(fed) > 2, fed  # messages reached the model between tool steps, not only at the end
    last = inputs[-1]
    read = [t for m in last if isinstance(m, HumanMessage) for t in m.text.split("\n\n")]
    assert read == ["go", *sent]  # each once, in post order
    for i, m in enumerate(last):  # never between a call and its result
        if isinstance(m, HumanMessage) and i and isinstance(last[i - 1], AIMessage):
            assert not last[i - 1].tool_calls  # type: ignore[union-attr]
