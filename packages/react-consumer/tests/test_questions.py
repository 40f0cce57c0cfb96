"""The ``ask_user`` tool (Q1, Q3; docs/questions.md), on asyncio and trio."""

from __future__ import annotations

import anyio
import pytest
from agent_channel import (
    AgentRef,
    Answer,
    ChatMessageTool,
    ChatMessageUser,
    Question,
    ToolCall,
)
from agent_channel_react import (
    AgentState,
    ScriptedModel,
    ask_user,
    call,
    react,
    reply,
    tool_call,
)

from .helpers import Recorder, drive

pytestmark = pytest.mark.anyio


def _input() -> AgentState:
    return AgentState(messages=[ChatMessageUser(content="Write the report.")])


def _results(state: AgentState) -> list[ChatMessageTool]:
    return [m for m in state.messages if isinstance(m, ChatMessageTool)]


def test_q1_ask_user_is_a_documented_tool_that_needs_no_approval() -> None:
    assert ask_user.name == "ask_user" and not ask_user.needs_approval
    assert "question" in ask_user.parameters["required"]
    assert set(ask_user.parameters["properties"]) == {"question", "choices", "fields"}
    assert ask_user.describe({"question": "Which?"}) == "Asking: Which?"


async def test_q1_unattended_the_model_reads_at_once_that_no_one_can_answer() -> None:
    model = ScriptedModel(
        [call(tool_call("ask_user", question="Which year?", choices=["2025", "2026"])), "Done."]
    )

    async def nothing(ref: AgentRef, rec: Recorder) -> None:
        return None

    state, _ = await drive(react(model=model, tools=[ask_user], submit=False), _input(), nothing)
    (result,) = _results(state)
    assert result.text == "No answer: no one can answer questions in this run."
    assert state.output.completion == "Done."


async def test_q1_the_routed_resolver_answers_and_the_turn_waits_for_it() -> None:
    asked: list[Question] = []
    approvals: list[ToolCall] = []
    release = anyio.Event()

    async def resolver(q: Question) -> Answer:
        asked.append(q)
        await release.wait()  # the turn waits for the operator
        return Answer("2026")

    async def approver(call: ToolCall) -> bool:
        approvals.append(call)
        return True

    model = ScriptedModel(
        [call(tool_call("ask_user", question="Which year?", choices=["2025", "2026"])), "Done."]
    )

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        ref.route_questions(resolver)
        ref.route_approvals(approver)
        await rec.seen("tool_call_started")
        assert rec.of("tool_call_finished") == []  # still waiting for the answer
        release.set()

    state, rec = await drive(react(model=model, tools=[ask_user], submit=False), _input(), producer)
    (result,) = _results(state)
    assert result.text == "2026"
    assert asked[0].text == "Which year?" and asked[0].choices == ("2025", "2026")
    assert approvals == []  # asking has no effect: no approval is asked
    assert rec.of("tool_call_started")[0].title == "Asking: Which year?"


async def test_q1_a_form_answer_reaches_the_model_as_its_values() -> None:
    async def resolver(q: Question) -> Answer:
        assert [f.name for f in q.fields] == ["city", "budget"]
        return Answer("", values={"city": "Oslo", "budget": "900"})

    model = ScriptedModel(
        [call(tool_call("ask_user", question="Trip?", fields=["city", "budget"])), "Done."]
    )

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        ref.route_questions(resolver)

    state, _ = await drive(react(model=model, tools=[ask_user], submit=False), _input(), producer)
    assert _results(state)[0].text == "city: Oslo\nbudget: 900"


async def test_q3_an_interrupt_cancels_the_pending_question_and_the_turn() -> None:
    voided: list[str] = []
    pending = anyio.Event()

    async def resolver(q: Question) -> Answer:
        try:
            pending.set()
            await anyio.sleep_forever()
        finally:
            voided.append(q.id)
        raise AssertionError("unreachable")

    model = ScriptedModel([call(tool_call("ask_user", question="Proceed?")), reply("Stopped.")])

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        ref.route_questions(resolver)
        await pending.wait()
        ref.interrupt()

    state, rec = await drive(react(model=model, tools=[ask_user], submit=False), _input(), producer)
    (result,) = _results(state)
    assert result.error == "cancelled"
    assert len(voided) == 1
    assert len(rec.of("turn_cancelled")) == 1
    assert rec.of("tool_call_finished")[0].status == "cancelled"
