"""The orchestrator demo (K10 shown end to end), driven as a producer drives a factory."""

from __future__ import annotations

import pytest
from agent_channel import (
    ChatMessageTool,
    ChildEnded,
    ChildStarted,
    ChildSteered,
    ExecutionEvent,
    open_channel,
)
from agent_channel_react.demo import (
    KILLED,
    RESEARCH,
    STEER,
    STEERED,
    orchestrator,
    orchestrator_agent,
    researcher_agent,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def quick_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    # Short, not zero: the researchers' different lengths decide who is still running
    # when the orchestrator steers and kills (a 6- and a 12-search one against a 2-search
    # one, with the orchestrator's few steps between).
    monkeypatch.setenv("AGENT_CHANNEL_DEMO_TOOL_SECONDS", "0.05")
    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENT_CHANNEL_MODEL"):
        monkeypatch.delenv(k, raising=False)


async def test_k10_the_orchestrator_spawns_three_steers_one_kills_one_and_answers_from_them() -> (
    None
):
    events: list[ExecutionEvent] = []
    async with open_channel() as ch:
        ch.ref().subscribe(events.append)
        state = await orchestrator()()
    results = {
        m.function: m.text for m in state.messages if isinstance(m, ChatMessageTool)
    }  # the last result of each tool
    started = [e.child for e in events if isinstance(e, ChildStarted)]
    assert sorted(c.name for c in started) == sorted(t for t, _ in RESEARCH)
    ids = {c.name: c.id for c in started}
    ended = {e.child.name: e.child.end for e in events if isinstance(e, ChildEnded)}
    assert ended == {"runtimes": "completed", STEERED: "completed", KILLED: "killed"}
    steered = [e for e in events if isinstance(e, ChildSteered)]
    assert [(s.child_id, s.outcome) for s in steered] == [(ids[STEERED], "delivered")]
    assert results["steer_agent"].startswith(f"Delivered: {STEERED} (id {ids[STEERED]})")
    assert results["kill_agent"] == (
        f"Child {KILLED} (id {ids[KILLED]}) was killed: too slow for this answer."
    )
    answer = state.messages[-1].text
    assert answer.startswith("Answer on interruptible agents, from 3 researcher report(s): ")
    assert "runtimes completed. Findings on runtimes: 2 searches" in answer
    assert f"{KILLED} was killed: too slow for this answer." in answer
    assert f"{STEERED} completed. Findings on {STEERED}: 6 searches" in answer
    assert f"As asked: {STEER}" in answer  # the steer reached the child's model
    assert state.output.end == "answered"


async def test_the_orchestrator_with_a_model_name_runs_it_and_its_researchers_on_that_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    for agent in (orchestrator_agent("gpt-test"), researcher_agent("gpt-test")):
        assert (type(agent.model).__name__, agent.model.name) == ("OpenAIModel", "gpt-test")
    scripted = orchestrator_agent()
    assert scripted.model.name == "orchestrator-scripted"
    assert sorted(scripted.tools) == [
        "ask_user",
        "kill_agent",
        "list_agents",
        "spawn_agent",
        "steer_agent",
        "wait_for_agent",
    ]


def test_an_operators_steer_of_a_child_mid_task_is_noted_and_the_plan_goes_on() -> None:
    """``send --child`` leaves the orchestrator a note; before its answer exists, it takes it
    in passing and goes on with its plan (it answered "The answer above stands" with none)."""
    from agent_channel import ChatMessageAssistant, ChatMessageUser, ToolCall
    from agent_channel_react import ScriptStep
    from agent_channel_react.demo import ORCHESTRATOR_TASK, orchestrator_script

    ids = {t: f"{i:016x}" for i, (t, _) in enumerate(RESEARCH)}
    calls = [ToolCall(id=f"c{i}", name="spawn_agent", arguments={}) for i in range(3)]
    note = f"The operator steered child {STEERED} (id {ids[STEERED]}): look at costs."
    messages = [
        ChatMessageUser(content=ORCHESTRATOR_TASK, source="task"),
        ChatMessageAssistant(content="Starting three researchers.", tool_calls=calls),
        *(
            ChatMessageTool(
                content=f"Started {t} (id {ids[t]}). It runs.",
                tool_call_id=f"c{i}",
                function="spawn_agent",
            )
            for i, t in enumerate(ids)
        ),
        ChatMessageUser(content=note, source="supervisor"),
    ]
    step = orchestrator_script(messages, [])
    assert isinstance(step, ScriptStep)
    assert [c.name for c in step.tool_calls] == ["wait_for_agent"]
    assert step.content.startswith(f"Noted: {note!r}. Going on: Waiting: {RESEARCH[0][0]}.")
