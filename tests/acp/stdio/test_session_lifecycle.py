"""How sessions start, end and are forgotten: S14 (freed), S15 (undelivered prompts),
a factory without a runnable body, `session/close`, unknown session ids (-32002).

In process (a socket pair, the same transport code as stdio) where a test holds the
scripted model at a gate. asyncio only: the ACP SDK is asyncio-bound (see conftest).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import acp
import anyio
import pytest
from acp import RequestError
from agent_channel import ChatMessage, ChatMessageUser
from agent_channel_acp import AcpServer
from agent_channel_react import (
    ScriptItem,
    ScriptStep,
    ToolInfo,
    call,
    reply,
    scripted_agent_factory,
)
from agent_channel_react import tool_call as make_call
from agents import TOOLS, react_agent
from conftest import GUARD, Local, in_process

pytestmark = pytest.mark.anyio

NOT_READ = "the agent finished before reading this prompt"


def start(local: Local, sid: str, text: str) -> asyncio.Task[Any]:
    return asyncio.ensure_future(local.conn.prompt(session_id=sid, prompt=[acp.text_block(text)]))


async def error_of(awaitable: Any) -> RequestError:
    with anyio.fail_after(GUARD), pytest.raises(RequestError) as e:
        await awaitable
    return e.value


class Gate:
    """Holds the model's first call until the test opens it; says when the call began."""

    def __init__(self, then: ScriptStep) -> None:
        self.entered = asyncio.Event()
        self.open = anyio.Event()
        self.then = then

    def script(self, messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
        if not self.entered.is_set():
            self.entered.set()
            return ScriptStep(
                self.then.content,
                self.then.tool_calls,
                wait=self.open,
                error=self.then.error,
            )
        return reply("again")


# -- S15 -------------------------------------------------------------------------------


async def test_s15_a_prompt_still_queued_when_the_agent_finishes_is_answered_not_delivered() -> (
    None
):
    # A task agent that submits an answer (and so ends) while a prompt waits in its queue.
    gate = Gate(call(make_call("submit", answer="done")))
    factory = scripted_agent_factory(
        gate.script, submit=True, input=[ChatMessageUser(content="task", source="task")]
    )
    async with in_process(factory) as local:
        sid = await local.session()
        with anyio.fail_after(GUARD):
            await gate.entered.wait()
        queued = start(local, sid, "are you there?")
        await local.posted()
        gate.open.set()
        e = await error_of(queued)
        assert e.code == -32600
        assert e.data is not None and e.data["reason"] == NOT_READ
        seen = factory.models[-1].calls[-1].messages
        assert [m.text for m in seen if m.role == "user"] == ["task"]


async def test_s15_when_the_agent_fails_the_prompt_it_read_gets_the_failure_the_queued_one_not_read() -> (  # noqa: E501
    None
):
    gate = Gate(ScriptStep(error=RuntimeError("provider down")))
    async with in_process(scripted_agent_factory(gate.script)) as local:
        sid = await local.session()
        first = start(local, sid, "hello")
        with anyio.fail_after(GUARD):
            await gate.entered.wait()
        queued = start(local, sid, "and this")
        await local.posted()
        gate.open.set()
        failed, unread = await error_of(first), await error_of(queued)
        assert failed.code == -32603 and "provider down" in str(failed.data)
        assert unread.code == -32600 and unread.data is not None
        assert unread.data["reason"] == NOT_READ


# -- a factory without a runnable body ---------------------------------------------------


def returns_none(model: str | None = None) -> Any:
    return None


def returns_a_number(model: str | None = None) -> Any:
    return 42


def returns_a_sync_function(model: str | None = None) -> Any:
    return lambda: 42


@pytest.mark.parametrize("factory", [returns_none, returns_a_number, returns_a_sync_function])
async def test_a_factory_without_a_runnable_body_fails_session_new_with_the_reason(
    factory: Any,
) -> None:
    async with in_process(factory) as local:
        e = await error_of(local.session())
        assert e.code == -32603
        assert e.data is not None and "runnable body" in e.data["reason"]
        assert e.data["details"]  # what it returned instead


# -- unknown sessions: -32002 ------------------------------------------------------------


async def test_an_unknown_session_is_32002_with_a_reason_in_every_method() -> None:
    async with in_process(react_agent) as local:
        calls = {
            "session/prompt": {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]},
            "session/load": {"sessionId": "nope", "cwd": "/", "mcpServers": []},
            "session/close": {"sessionId": "nope"},
        }
        for method, params in calls.items():
            e = await error_of(local.request(method, params))
            assert e.code == -32002, method
            assert e.data is not None and "nope" in e.data["reason"], method
        await local.conn.cancel(session_id="nope")  # a notification: logged, no answer
        sid = await local.session()
        with anyio.fail_after(GUARD):
            r = await local.conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
        assert r.stop_reason == "end_turn"


# -- session/close ----------------------------------------------------------------------


async def test_session_close_stops_the_execution_answers_its_prompt_and_forgets_it() -> None:
    async with in_process(react_agent) as local:
        init = await local.conn.initialize(protocol_version=1)
        caps = init.agent_capabilities
        assert caps is not None and caps.session_capabilities is not None
        assert caps.session_capabilities.close is not None
        sid = await local.session()
        running = start(local, sid, "block now")
        await local.rec.wait_until(lambda: "tool_call" in local.rec.kinds(sid))
        with anyio.fail_after(GUARD):
            assert await local.request("session/close", {"sessionId": sid}) == {}
            assert (await running).stop_reason == "cancelled"
        e = await error_of(local.conn.prompt(session_id=sid, prompt=[acp.text_block("hello")]))
        assert e.code == -32002
        e = await error_of(local.conn.load_session(cwd="/", session_id=sid, mcp_servers=[]))
        assert e.code == -32002


# -- S14: finished sessions are freed ---------------------------------------------------


def finishing_factory() -> Any:
    """Each execution answers its task at once and ends (a submitting task agent)."""
    return scripted_agent_factory(
        [call(make_call("submit", answer="42"))],
        submit=True,
        tools=TOOLS,
        input=[ChatMessageUser(content="the task", source="task")],
    )


async def test_s14_finished_sessions_are_freed_and_a_bounded_number_kept_for_load() -> None:
    kept = AcpServer.finished_kept
    async with in_process(finishing_factory()) as local:
        baseline = len(asyncio.all_tasks())
        sids = [await local.session() for _ in range(kept + 10)]
        for sid in sids:  # each ran its task to the end: the tool card closed
            await local.rec.wait_until(
                lambda sid=sid: any(u.get("status") == "completed" for u in local.rec.updates[sid])
            )
        await local.posted()
        # nothing per finished session is left running (no sender, no execution)
        assert len(asyncio.all_tasks()) <= baseline + 2
        for sid in sids[-kept:]:
            local.rec.updates[sid].clear()
            with anyio.fail_after(GUARD):
                await local.conn.load_session(cwd="/", session_id=sid, mcp_servers=[])
            assert local.rec.kinds(sid)[0] == "user_message_chunk"
        for sid in sids[:10]:
            e = await error_of(local.conn.load_session(cwd="/", session_id=sid, mcp_servers=[]))
            assert e.code == -32002 and e.data is not None
            assert "no longer kept" in e.data["reason"]
        e = await error_of(local.conn.prompt(session_id=sids[-1], prompt=[acp.text_block("hello")]))
        assert e.code == -32600  # kept for load, but nobody reads prompts any more


# -- running sessions are bounded -------------------------------------------------------


async def test_running_sessions_are_bounded_one_more_is_refused_with_the_way_out() -> None:
    """A client that keeps opening sessions and never ends them: past the limit the next
    ``session/new`` is refused with the limit and what frees one; the others go on."""
    limit = AcpServer.running_limit
    async with in_process(react_agent) as local:
        sids = [await local.session() for _ in range(limit)]
        e = await error_of(local.session())
        assert e.code == -32603 and e.data is not None
        assert f"{limit} sessions" in e.data["reason"] and "session/close" in e.data["reason"]
        with anyio.fail_after(GUARD):  # the running ones go on
            reply = await local.conn.prompt(session_id=sids[0], prompt=[acp.text_block("hi")])
        assert reply.stop_reason == "end_turn"
        with anyio.fail_after(GUARD):
            assert await local.request("session/close", {"sessionId": sids[1]}) == {}
        assert await local.session() not in sids  # one closed: room for one more
        e = await error_of(local.session())
        assert e.code == -32603
