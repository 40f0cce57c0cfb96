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
from agent_channel_react.demo import demo, task_demo

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def fast_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_CHANNEL_DEMO_TOOL_SECONDS", "0")
    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENT_CHANNEL_MODEL"):
        monkeypatch.delenv(k, raising=False)


async def _converse(
    factory_name: str, prompts: list[str]
) -> tuple[AgentState, list[ExecutionEvent]]:
    body = {"demo": demo, "task_demo": task_demo}[factory_name](None)
    events: list[ExecutionEvent] = []
    pending = list(prompts)
    async with open_channel() as ch:
        ref = ch.ref()
        release = ref.mark_live()

        def on_event(e: ExecutionEvent) -> None:
            events.append(e)
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
    assert tools == ["search", "read_notes", "word_count", "search"]
    assert state.messages[-1].text.startswith("You said: 'thanks'")
    assert [e.type for e in events].count("awaiting_input") == 1
