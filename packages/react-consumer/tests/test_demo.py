"""The demo agent, driven the way a producer drives it (factory -> body on an open channel)."""

from __future__ import annotations

import pytest
from agent_channel import (
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    ExecutionEvent,
    UserMessage,
    open_channel,
)
from agent_channel_react import AgentState
from agent_channel_react.demo import PLAN, SECTIONS, demo, task_demo

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def fast_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_CHANNEL_DEMO_TOOL_SECONDS", "0")
    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENT_CHANNEL_MODEL"):
        monkeypatch.delenv(k, raising=False)


async def _converse(
    factory_name: str, prompts: list[str], *, mid_task: dict[int, str] | None = None
) -> tuple[AgentState, list[ExecutionEvent]]:
    """Run the demo; post each of ``prompts`` when it waits, and ``mid_task[n]`` as its
    ``n``-th tool call starts."""
    body = {"demo": demo, "task_demo": task_demo}[factory_name](None)
    events: list[ExecutionEvent] = []
    pending = list(prompts)
    during = dict(mid_task or {})
    async with open_channel() as ch:
        ref = ch.ref()
        release = ref.mark_live()
        if not pending:
            release()  # nothing to say when it waits: the agent ends after its answer

        def on_event(e: ExecutionEvent) -> None:
            events.append(e)
            started = sum(x.type == "tool_call_started" for x in events)
            if e.type == "tool_call_started" and started in during:
                ref.post(UserMessage(during.pop(started), source="operator"))
            if e.type == "awaiting_input":
                if len(pending) == 1:
                    release()  # the last message: the agent ends after answering it
                ref.post(UserMessage(pending.pop(0)))

        ref.subscribe(on_event)
        state = await body()
    return state, events


async def test_every_message_gets_a_tool_call_then_a_streamed_answer() -> None:
    state, events = await _converse("demo", ["first", "second", "third"])
    users = [m for m in state.messages if isinstance(m, ChatMessageUser)]
    assert [u.text for u in users] == ["first", "second", "third"]
    answers = [
        m for m in state.messages if isinstance(m, ChatMessageAssistant) and not m.tool_calls
    ]
    for a, u in zip(answers, users, strict=True):
        assert a.text.startswith(f"You said: {u.text!r}")
    assert sum(isinstance(m, ChatMessageTool) for m in state.messages) == 3
    # Each answer streamed as several deltas whose text adds up to the message.
    for a in answers:
        deltas = [e.text for e in events if e.type == "model_delta" and e.message_id == a.id]
        assert len(deltas) > 1 and "".join(deltas) == a.text
    assert [e.type for e in events].count("awaiting_input") == 3
    assert state.output.end == "answered"


async def test_task_demo_works_alone_then_takes_messages() -> None:
    state, events = await _converse("task_demo", ["thanks"])
    first = state.messages[1]
    assert isinstance(first, ChatMessageUser) and first.source == "task"
    tools = [m.function for m in state.messages if isinstance(m, ChatMessageTool)]
    plan = ["search", "read_notes", "write_section", "word_count"] * len(SECTIONS)
    assert tools == [*plan, "search"]
    assert any(m.text.startswith("Briefing:") for m in state.messages)
    assert state.messages[-1].text.startswith("You said: 'thanks'")
    assert [e.type for e in events].count("awaiting_input") == 1


def test_the_task_is_a_dozen_or_more_steps_of_one_to_two_seconds() -> None:
    assert len(PLAN) >= 12
    # Tool durations are tool_seconds() (1.5 by default) times these factors.
    import inspect

    from agent_channel_react import demo as module

    factors = {"search": 1.0, "read_notes": 4 / 3, "write_section": 1.0, "word_count": 2 / 3}
    for name, factor in factors.items():
        assert 1.0 <= 1.5 * factor <= 2.0, name
        assert name in inspect.getsource(module)


async def test_a_question_during_the_task_is_answered_in_passing_and_the_task_goes_on() -> None:
    state, _ = await _converse("task_demo", ["thanks"], mid_task={3: "What are you doing?"})
    tools = [m.function for m in state.messages if isinstance(m, ChatMessageTool)]
    assert len(tools) == len(PLAN) + 1  # every task step, then the search for "thanks"
    asked = next(i for i, m in enumerate(state.messages) if m.text == "What are you doing?")
    answer = state.messages[asked + 1]
    assert isinstance(answer, ChatMessageAssistant) and answer.tool_calls
    assert answer.text.startswith("You asked 'What are you doing?': I am writing a briefing")
    assert "step 4 of 20" in answer.text
    assert any(m.text.startswith("Briefing:") for m in state.messages)


async def test_an_instruction_during_the_task_replaces_it() -> None:
    state, _ = await _converse("task_demo", [], mid_task={2: "Brief me on consoles instead."})
    tools = [m.function for m in state.messages if isinstance(m, ChatMessageTool)]
    assert tools == ["search", "read_notes", "search"]
    assert state.messages[-1].text.startswith("You said: 'Brief me on consoles instead.'")
    assert not any(m.text.startswith("Briefing:") for m in state.messages)


@pytest.mark.parametrize("variable", ["OPENAI_API_KEY", "OPENAI_BASE_URL"])
async def test_a_key_or_url_alone_keeps_the_scripted_model(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """Many shells have a key or URL set: only a model name switches to a real model."""
    monkeypatch.setenv(variable, "http://127.0.0.1:9/v1")
    state, _ = await _converse("demo", ["hello"])
    assert state.messages[-1].text.startswith("You said: 'hello'")


async def test_a_note_during_the_task_is_acknowledged_and_the_task_goes_on() -> None:
    state, _ = await _converse("task_demo", [], mid_task={2: "Also mention the costs."})
    tools = [m.function for m in state.messages if isinstance(m, ChatMessageTool)]
    assert len(tools) == len(PLAN)  # the note replaced nothing: every step ran
    noted = next(i for i, m in enumerate(state.messages) if m.text == "Also mention the costs.")
    answer = state.messages[noted + 1]
    assert isinstance(answer, ChatMessageAssistant) and answer.tool_calls
    assert answer.text.startswith("Noted: 'Also mention the costs.'")
    briefing = next(m.text for m in state.messages if m.text.startswith("Briefing:"))
    assert "Also mention the costs." in briefing


async def test_a_change_of_plan_searches_for_what_it_asks_not_for_its_words() -> None:
    state, _ = await _converse(
        "task_demo", [], mid_task={2: "Change of plan: brief me on consoles."}
    )
    searches = [
        c.arguments["query"]
        for m in state.messages
        if isinstance(m, ChatMessageAssistant)
        for c in m.tool_calls or ()
        if c.name == "search"
    ]
    assert searches[-1] == "brief me on consoles"
    assert not any(m.text.startswith("Briefing:") for m in state.messages)
