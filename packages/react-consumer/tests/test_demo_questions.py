"""The orchestrator demo asks the operator one question with choices (Q1 shown end to end)."""

from __future__ import annotations

import pytest
from agent_channel import Answer, ChatMessageTool, Question, open_channel
from agent_channel_react.demo import QUESTION, RESEARCH, orchestrator

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def quick_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_CHANNEL_DEMO_TOOL_SECONDS", "0.05")
    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENT_CHANNEL_MODEL"):
        monkeypatch.delenv(k, raising=False)


async def test_q1_the_orchestrator_asks_which_findings_lead_and_its_answer_follows_the_choice() -> (
    None
):
    asked: list[Question] = []

    async def operator(q: Question) -> Answer:
        asked.append(q)
        return Answer(q.choices[1])

    async with open_channel() as ch:
        ch.ref().route_questions(operator)
        state = await orchestrator()()
    (question,) = asked
    assert question.text == QUESTION
    assert question.choices == tuple(t for t, _ in RESEARCH[:2])
    assert question.child_id is None  # the orchestrator itself asks
    results = [m for m in state.messages if isinstance(m, ChatMessageTool)]
    assert [m.text for m in results if m.function == "ask_user"] == [question.choices[1]]
    assert state.messages[-1].text.endswith(
        f" Leading with {question.choices[1]}, as the operator chose."
    )


async def test_q1_unattended_the_orchestrator_reads_no_answer_and_still_answers() -> None:
    async with open_channel():
        state = await orchestrator()()
    (result,) = [
        m for m in state.messages if isinstance(m, ChatMessageTool) and m.function == "ask_user"
    ]
    assert result.text.startswith("No answer: no one can answer")
    answer = state.messages[-1].text
    assert answer.startswith("Answer on interruptible agents") and "Leading with" not in answer
