"""The model's questions over stdio, with the SDK's client (Q1-Q3; docs/questions.md).

A real ``agent-channel-acp stdio`` subprocess runs ``question_agents:asking_agent``; the
client advertises form elicitation or not, and answers as a person would.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from acp import spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    ClientCapabilities,
    DeclineElicitationResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    RequestPermissionResponse,
)
from conftest import GUARD, Recorder, agent_env, chosen

pytestmark = pytest.mark.anyio

AGENT = ("-m", "agent_channel_acp", "stdio", "--agent", "question_agents:asking_agent")
AGENTS = {
    "react": "question_agents:asking_agent",
    "pydantic-ai": "pai_agents:agent",
    "openai-agents": "oai_agents:agent",
    "langgraph": "lg_agents:graph",
}
"""The Q2 rules hold for a plain ``pydantic_ai.Agent``, a plain ``agents.Agent`` and a
compiled LangGraph graph whose authors added ``ask_user`` too."""
asking = AGENTS["react"]


@pytest.fixture(params=chosen(AGENTS))
def consumer(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs a test against each agent of :data:`AGENTS` (``client`` starts that one)."""
    global asking
    asking = AGENTS[request.param]
    try:
        yield request.param
    finally:
        asking = AGENTS["react"]


@dataclass
class Asked(Recorder):
    """A client that records the questions it is asked and answers from ``replies``."""

    forms: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    completed: list[str] = field(default_factory=list[str])
    form_reply: dict[str, Any] | None = None
    """What the person fills in; None: the form stays open until the agent voids it."""
    declines: bool = False

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.forms.append(
            {
                "message": message,
                "sessionId": mode.session_id,
                "schema": mode.requested_schema.model_dump(mode="json", exclude_none=True),
                "meta": kwargs,
            }
        )
        self._poke()
        if self.declines:
            return DeclineElicitationResponse(action="decline")
        if self.form_reply is None:
            await asyncio.Event().wait()  # the person never answers
        return AcceptElicitationResponse(action="accept", content=self.form_reply)

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        self.completed.append(elicitation_id)
        self._poke()


@asynccontextmanager
async def client(
    *, elicitation: bool, rec: Asked | None = None
) -> AsyncIterator[tuple[ClientSideConnection, Asked]]:
    rec = rec or Asked()
    async with (
        spawn_agent_process(
            rec,  # pyright: ignore[reportArgumentType] (the Client protocol lists every method)
            sys.executable,
            *AGENT[:-1],
            asking,
            env=agent_env(),
            transport_kwargs={"stderr": None},
            observers=[rec.observe],
            use_unstable_protocol=True,  # routes elicitation/complete to the client
        ) as (conn, _proc)
    ):
        caps = ClientCapabilities(
            elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())
            if elicitation
            else None
        )
        with anyio.fail_after(GUARD):
            await conn.initialize(protocol_version=1, client_capabilities=caps)
        yield conn, rec


def text_of(rec: Recorder, sid: str) -> str:
    return "".join(
        u["content"].get("text", "")
        for u in rec.updates[sid]
        if u["sessionUpdate"] == "agent_message_chunk"
    )


async def prompt(conn: ClientSideConnection, sid: str, text: str) -> Any:
    from acp.schema import TextContentBlock

    return await conn.prompt(session_id=sid, prompt=[TextContentBlock(type="text", text=text)])


@pytest.mark.usefixtures("consumer")
async def test_q2_with_elicitation_a_choice_is_a_form_with_an_enum() -> None:
    async with client(elicitation=True, rec=Asked(form_reply={"answer": "blue"})) as (conn, rec):
        sid = (await conn.new_session(cwd="/", mcp_servers=[])).session_id
        with anyio.fail_after(GUARD):
            response = await prompt(conn, sid, "choose")
        assert response.stop_reason == "end_turn"
        (form,) = rec.forms
        assert form["message"] == "Which colour?" and form["sessionId"] == sid
        assert form["schema"]["properties"]["answer"]["enum"] == ["red", "blue"]
        assert form["schema"]["required"] == ["answer"]
        assert form["meta"]["agent_channel.questionId"]
        assert rec.permissions == []  # the form, not a permission request
        assert "answer: blue" in text_of(rec, sid)


async def test_q2_with_elicitation_a_form_asks_each_field() -> None:
    reply = {"city": "Oslo", "days": "4"}
    async with client(elicitation=True, rec=Asked(form_reply=reply)) as (conn, rec):
        sid = (await conn.new_session(cwd="/", mcp_servers=[])).session_id
        with anyio.fail_after(GUARD):
            await prompt(conn, sid, "form")
        assert set(rec.forms[0]["schema"]["properties"]) == {"city", "days"}
        assert "answer: city: Oslo\ndays: 4" in text_of(rec, sid)


@pytest.mark.usefixtures("consumer")
async def test_q2_a_declined_form_tells_the_model_so() -> None:
    async with client(elicitation=True, rec=Asked(declines=True)) as (conn, rec):
        sid = (await conn.new_session(cwd="/", mcp_servers=[])).session_id
        with anyio.fail_after(GUARD):
            await prompt(conn, sid, "free")
        assert "answer: No answer: the operator declined to answer." in text_of(rec, sid)


@pytest.mark.usefixtures("consumer")
async def test_q2_without_elicitation_choices_become_a_permission_request() -> None:
    rec = Asked()

    async def pick_blue(request: dict[str, Any]) -> RequestPermissionResponse:
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="choice-1")
        )

    rec.policy = pick_blue
    async with client(elicitation=False, rec=rec) as (conn, rec):
        sid = (await conn.new_session(cwd="/", mcp_servers=[])).session_id
        with anyio.fail_after(GUARD):
            await prompt(conn, sid, "choose")
        assert rec.forms == []
        (asked,) = rec.permissions
        assert asked["options"] == ["choice-0", "choice-1", "decline"]
        card = asked["toolCall"]["toolCallId"]
        starts = [u for u in rec.updates[sid] if u.get("toolCallId") == card]
        assert starts[0]["sessionUpdate"] == "tool_call"  # the card comes before the request
        assert starts[-1]["status"] == "completed"
        assert "answer: blue" in text_of(rec, sid)


async def test_q2_without_elicitation_or_choices_the_next_prompt_answers() -> None:
    async with client(elicitation=False) as (conn, rec):
        sid = (await conn.new_session(cwd="/", mcp_servers=[])).session_id
        turn = asyncio.ensure_future(prompt(conn, sid, "free"))
        await rec.wait_until(lambda: "[question] What is the deadline?" in text_of(rec, sid))
        with anyio.fail_after(GUARD):
            answered = await prompt(conn, sid, "Friday noon")
            assert answered.field_meta["agent_channel.answered"]
            done = await turn
        assert done.stop_reason == "end_turn"
        assert "answer: Friday noon" in text_of(rec, sid)


async def test_q3_a_childs_question_reaches_the_client_naming_the_child() -> None:
    async with client(elicitation=True, rec=Asked(form_reply={"answer": "books"})) as (conn, rec):
        sid = (await conn.new_session(cwd="/", mcp_servers=[])).session_id
        with anyio.fail_after(GUARD):
            await prompt(conn, sid, "child")
        (form,) = rec.forms
        assert form["message"].startswith("[child researcher (")
        assert form["message"].endswith(")] Which source?")
        assert form["meta"]["agent_channel.childId"]
        assert "Result:\nbooks" in text_of(rec, sid)  # the child's announce, with the answer


async def test_q3_session_cancel_voids_a_pending_form() -> None:
    async with client(elicitation=True) as (conn, rec):  # the person never answers
        sid = (await conn.new_session(cwd="/", mcp_servers=[])).session_id
        turn = asyncio.ensure_future(prompt(conn, sid, "choose"))
        await rec.wait_until(lambda: rec.forms)
        await conn.cancel(session_id=sid)
        with anyio.fail_after(GUARD):
            done = await turn
        assert done.stop_reason == "cancelled"
        await rec.wait_until(lambda: rec.completed)
        assert rec.completed == [rec.forms[0]["meta"]["agent_channel.questionId"]]


async def test_q3_session_cancel_voids_a_question_asked_as_a_message() -> None:
    async with client(elicitation=False) as (conn, rec):
        sid = (await conn.new_session(cwd="/", mcp_servers=[])).session_id
        turn = asyncio.ensure_future(prompt(conn, sid, "free"))
        await rec.wait_until(lambda: "[question]" in text_of(rec, sid))
        await conn.cancel(session_id=sid)
        with anyio.fail_after(GUARD):
            assert (await turn).stop_reason == "cancelled"
        await rec.wait_until(lambda: "[question withdrawn]" in text_of(rec, sid))
        with anyio.fail_after(GUARD):  # the next prompt is a prompt again, not an answer
            again = await prompt(conn, sid, "hello")
        assert again.field_meta is None or "agent_channel.answered" not in again.field_meta
        assert "echo: hello" in text_of(rec, sid)


async def test_q3_session_cancel_voids_a_pending_permission_request_card() -> None:
    rec = Asked()

    async def never(request: dict[str, Any]) -> RequestPermissionResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    rec.policy = never
    async with client(elicitation=False, rec=rec) as (conn, rec):
        sid = (await conn.new_session(cwd="/", mcp_servers=[])).session_id
        turn = asyncio.ensure_future(prompt(conn, sid, "choose"))
        await rec.wait_until(lambda: rec.permissions)
        card = rec.permissions[0]["toolCall"]["toolCallId"]
        await conn.cancel(session_id=sid)
        with anyio.fail_after(GUARD):
            assert (await turn).stop_reason == "cancelled"
        states = [u.get("status") for u in rec.updates[sid] if u.get("toolCallId") == card]
        assert states[-1] == "failed"  # the question's card says it is void
        # and the request the client holds is withdrawn, naming it (its dialog can close)
        asked = [f["id"] for f in rec.wire if f.get("method") == "session/request_permission"]
        withdrawn = [f for f in rec.wire if f.get("method") == "$/cancel_request"]
        assert [f["params"]["requestId"] for f in withdrawn] == asked
