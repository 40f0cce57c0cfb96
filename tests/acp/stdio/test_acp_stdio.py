"""The S-rules of docs/acp-behaviour.md, over stdio against a real subprocess.

asyncio only: the ACP SDK is asyncio-bound (see conftest).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import acp
import anyio
import pytest
from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    RequestPermissionResponse,
)
from agent_channel_acp import __version__
from conftest import CONSUMERS, GUARD, Agent, allow, chosen, deny, spawn

pytestmark = pytest.mark.anyio

STDIO_AGENTS = {
    "react": "agents:react_agent",
    "pydantic-ai": CONSUMERS["pydantic-ai"],
    "openai-agents": CONSUMERS["openai-agents"],
    "langgraph": CONSUMERS["langgraph"],
}
"""The S-rules hold for each consumer: the ReAct loop, a plain ``pydantic_ai.Agent``, a
plain ``agents.Agent`` and a compiled LangGraph graph."""


@pytest.fixture(scope="module", params=chosen(STDIO_AGENTS))
def consumer(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
async def agent(anyio_backend: str, consumer: str) -> AsyncIterator[Agent]:
    """This module's agent, one per consumer (the conftest's serves the ReAct loop alone)."""
    async with spawn("--agent", str(STDIO_AGENTS[consumer])) as a:
        yield a


@pytest.fixture(scope="module")
async def approving_agent(anyio_backend: str, consumer: str) -> AsyncIterator[Agent]:
    async with spawn("--agent", str(STDIO_AGENTS[consumer]), "--approve") as a:
        yield a


def react_only(consumer: str, why: str) -> None:
    """Skip a rule's test the pydantic-ai agent cannot express (``why``: which part)."""
    if consumer != "react":
        pytest.skip(f"the ReAct loop's own: {why}")


async def prompt(agent: Agent, sid: str, text: str) -> str:
    with anyio.fail_after(GUARD):
        r = await agent.conn.prompt(session_id=sid, prompt=[acp.text_block(text)])
    return r.stop_reason


def start(agent: Agent, sid: str, *blocks: Any) -> asyncio.Task[Any]:
    content = [acp.text_block(b) if isinstance(b, str) else b for b in blocks]
    return asyncio.ensure_future(agent.conn.prompt(session_id=sid, prompt=content))


def seen(agent: Agent, sid: str, kind: str, **match: Any) -> bool:
    return any(
        u["sessionUpdate"] == kind and all(u.get(k) == v for k, v in match.items())
        for u in agent.rec.updates[sid]
    )


def asked(agent: Agent, sid: str) -> bool:
    return any(p["sessionId"] == sid for p in agent.rec.permissions)


def last_text(agent: Agent, sid: str) -> str:
    """The text of the last agent message streamed to ``sid``."""
    chunks = [u for u in agent.rec.updates[sid] if u["sessionUpdate"] == "agent_message_chunk"]
    mid = chunks[-1]["messageId"]
    return "".join(c["content"]["text"] for c in chunks if c["messageId"] == mid)


def model_input(agent: Agent, sid: str) -> list[dict[str, Any]]:
    """The scripted model's own view of its input, as the ``inspect`` answer reports it."""
    return json.loads(last_text(agent, sid))


def updates_after_response(agent: Agent, sid: str) -> list[dict[str, Any]]:
    """Wire frames for ``sid``: session/update notifications and prompt responses, in order."""
    out: list[dict[str, Any]] = []
    for msg in agent.rec.wire:
        if msg.get("method") == "session/update" and msg["params"]["sessionId"] == sid:
            out.append({"update": msg["params"]["update"]["sessionUpdate"]})
        elif "result" in msg and isinstance(msg["result"], dict) and "stopReason" in msg["result"]:
            out.append({"response": msg["result"]["stopReason"], "id": msg["id"]})
    return out


# -- S1 ------------------------------------------------------------------------------


async def test_s1_initialize_states_version_and_real_capabilities(agent: Agent) -> None:
    r = await agent.conn.initialize(protocol_version=1)
    assert r.protocol_version == 1
    caps = r.agent_capabilities
    assert caps is not None and caps.load_session is True
    assert caps.prompt_capabilities is not None
    assert caps.prompt_capabilities.image is True
    assert caps.prompt_capabilities.embedded_context is True
    assert caps.prompt_capabilities.audio is False
    assert caps.mcp_capabilities is not None and not caps.mcp_capabilities.http
    assert caps.session_capabilities is not None
    assert caps.session_capabilities.close is not None  # session/close is served
    assert caps.session_capabilities.list is not None  # D5
    assert caps.session_capabilities.resume is not None  # D5 (routed: unstable protocol on)
    assert caps.session_capabilities.fork is None  # routed to nothing: not advertised
    assert r.agent_info is not None
    assert (r.agent_info.name, r.agent_info.version) == ("agent-channel-acp", __version__)
    newer = await agent.conn.initialize(protocol_version=7)
    assert newer.protocol_version == 1


# -- S2 ------------------------------------------------------------------------------


async def test_s2_new_session_starts_an_execution_and_updates_follow_the_response() -> None:
    async with spawn("--agent", "agents:task_agent") as agent:
        sid = await agent.session()
        await agent.rec.wait_until(lambda: seen(agent, sid, "tool_call_update", status="completed"))
        wire = agent.rec.wire
        response = next(
            i
            for i, m in enumerate(wire)
            if isinstance(m.get("result"), dict) and m["result"].get("sessionId") == sid
        )
        first_update = next(
            i
            for i, m in enumerate(wire)
            if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
        )
        assert response < first_update
        # the task message the agent started with is shown (it came from the agent, not us)
        assert agent.rec.updates[sid][0]["sessionUpdate"] == "user_message_chunk"
        assert agent.rec.updates[sid][0]["content"]["text"] == "quick task"
        other = await agent.session()
        assert other != sid


# -- S3 ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "stop"),
    [
        ("hello", "end_turn"),
        ("please refuse", "refusal"),
        ("go long", "max_tokens"),
        ("loop forever", "max_turn_requests"),
    ],
)
async def test_s3_prompt_answers_at_end_of_turn_with_its_stop_reason(
    agent: Agent, text: str, stop: str, consumer: str
) -> None:
    if stop != "end_turn":
        react_only(consumer, "its model's stop reasons and its turn-request limit")
    sid = await agent.session()
    assert await prompt(agent, sid, text) == stop
    frames = updates_after_response(agent, sid)
    assert frames[-1].get("response") == stop  # every update of the turn came before
    assert any("update" in f for f in frames)
    assert await prompt(agent, sid, "hello again") == "end_turn"  # and it goes on


async def test_s3_a_crashing_agent_answers_an_error_not_a_hang(agent: Agent) -> None:
    sid = await agent.session()
    with anyio.fail_after(GUARD), pytest.raises(RequestError) as e:
        await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("crash")])
    assert e.value.code == -32603
    with anyio.fail_after(GUARD), pytest.raises(RequestError) as e:
        await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
    assert e.value.code == -32600


# -- S4 ------------------------------------------------------------------------------


async def test_s4_prompt_during_a_turn_is_queued_and_answered_when_that_turn_ends(
    approving_agent: Agent,
) -> None:
    agent = approving_agent
    release = asyncio.Event()

    async def hold(request: dict[str, Any]) -> RequestPermissionResponse:
        await release.wait()
        return await allow(request)

    with agent.rec.answering(hold):
        sid = await agent.session()
        first = start(agent, sid, "quick one")
        await agent.rec.wait_until(lambda: agent.rec.asked(sid))
        second = start(agent, sid, "and another thing")
        # the second prompt is on the agent's stdin before the permission answer
        await agent.rec.wait_until(
            lambda: any(
                m.get("method") == "session/prompt"
                and m["params"]["prompt"][0]["text"] == "and another thing"
                for m in agent.rec.sent
            )
        )
        assert not first.done() and not second.done()
        release.set()
        with anyio.fail_after(GUARD):
            a, b = await asyncio.gather(first, second)
        assert (a.stop_reason, b.stop_reason) == ("end_turn", "end_turn")
        # folded in at the next boundary of the same turn: the model answered it there
        assert last_text(agent, sid) == "echo: and another thing"
        frames = updates_after_response(agent, sid)
        assert [f.get("response") for f in frames[-2:]] == ["end_turn", "end_turn"]


# -- S5 / S6 -------------------------------------------------------------------------


async def test_s5_cancel_during_a_blocking_tool_answers_cancelled_after_the_failed_update(
    agent: Agent,
) -> None:
    sid = await agent.session()
    task = start(agent, sid, "block now")
    await agent.rec.wait_until(lambda: seen(agent, sid, "tool_call", status="in_progress"))
    await agent.conn.cancel(session_id=sid)
    with anyio.fail_after(GUARD):
        r = await task
    assert r.stop_reason == "cancelled"
    frames = updates_after_response(agent, sid)
    assert frames[-1] == {"response": "cancelled", "id": frames[-1]["id"]}
    assert agent.rec.updates[sid][-1]["sessionUpdate"] == "tool_call_update"
    assert agent.rec.updates[sid][-1]["status"] == "failed"


async def test_s5_cancel_during_a_model_call_answers_cancelled(agent: Agent) -> None:
    sid = await agent.session()
    task = start(agent, sid, "hang on")
    await agent.rec.wait_until(lambda: seen(agent, sid, "agent_message_chunk"))
    await agent.conn.cancel(session_id=sid)
    with anyio.fail_after(GUARD):
        assert (await task).stop_reason == "cancelled"


async def test_s6_after_cancel_the_next_model_call_sees_the_repaired_conversation(
    agent: Agent,
) -> None:
    sid = await agent.session()
    task = start(agent, sid, "block now")
    await agent.rec.wait_until(lambda: seen(agent, sid, "tool_call"))
    await agent.conn.cancel(session_id=sid)
    with anyio.fail_after(GUARD):
        assert (await task).stop_reason == "cancelled"
    hang = start(agent, sid, "hang on")
    await agent.rec.wait_until(
        lambda: seen(
            agent, sid, "agent_message_chunk", content={"text": "thinking about it", "type": "text"}
        )
    )
    await agent.conn.cancel(session_id=sid)
    with anyio.fail_after(GUARD):
        assert (await hang).stop_reason == "cancelled"
    assert await prompt(agent, sid, "inspect") == "end_turn"
    seen_by_model = model_input(agent, sid)
    assert [m["role"] for m in seen_by_model] == [
        "system",
        "user",
        "assistant",
        "tool",
        "user",
        "user",
    ]
    assert seen_by_model[3]["error"] == "cancelled"  # the unanswered call got its result
    assert "thinking" not in json.dumps(seen_by_model)  # nothing partial leaked
    assert [m["text"] for m in seen_by_model if m["role"] == "user"] == [
        "block now",
        "hang on",
        "inspect",
    ]


# -- S7 ------------------------------------------------------------------------------


async def test_s7_a_cancel_with_no_turn_running_leaves_no_trace(agent: Agent) -> None:
    sid = await agent.session()
    await agent.conn.cancel(session_id=sid)  # before any prompt
    assert await prompt(agent, sid, "hello") == "end_turn"
    await agent.conn.cancel(session_id=sid)  # while parked after a turn
    await agent.conn.cancel(session_id=sid)
    before = len(agent.rec.updates[sid])
    assert await prompt(agent, sid, "inspect") == "end_turn"
    assert await prompt(agent, sid, "inspect") == "end_turn"
    assert [m["role"] for m in model_input(agent, sid)] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    kinds = {u["sessionUpdate"] for u in agent.rec.updates[sid][before:]}
    assert kinds == {"agent_message_chunk"}


# -- S8 ------------------------------------------------------------------------------


async def test_s8_sessions_are_isolated(agent: Agent) -> None:
    one, two = await agent.session(), await agent.session()
    a = start(agent, one, "block A")
    b = start(agent, two, "block B")
    await agent.rec.wait_until(
        lambda: seen(agent, one, "tool_call") and seen(agent, two, "tool_call")
    )
    await agent.conn.cancel(session_id=one)
    with anyio.fail_after(GUARD):
        assert (await a).stop_reason == "cancelled"
    assert not b.done()
    assert not seen(agent, two, "tool_call_update")  # the other tool still runs
    assert await prompt(agent, one, "hello") == "end_turn"
    await agent.conn.cancel(session_id=two)
    with anyio.fail_after(GUARD):
        assert (await b).stop_reason == "cancelled"
    assert await prompt(agent, two, "inspect") == "end_turn"
    assert "block A" not in last_text(agent, two)


# -- S9 ------------------------------------------------------------------------------


async def test_s9_tool_call_precedes_its_update_and_chunks_carry_a_stable_message_id(
    agent: Agent, consumer: str
) -> None:
    sid = await agent.session()
    assert await prompt(agent, sid, "quick please") == "end_turn"
    ups = agent.rec.updates[sid]
    kinds = [u["sessionUpdate"] for u in ups]
    start_at = kinds.index("tool_call")
    call = ups[start_at]
    assert call["status"] == "in_progress"
    if consumer == "react":  # its tools' own kind and title (a pydantic-ai tool has neither)
        assert call["kind"] == "read"
        assert call["title"] == "Quick: quick please"
    assert call["rawInput"] == {"why": "quick please"}
    done = [u for u in ups if u["sessionUpdate"] == "tool_call_update"]
    assert len(done) == 1 and kinds.index("tool_call_update") > start_at
    assert done[0]["toolCallId"] == call["toolCallId"]
    assert done[0]["status"] == "completed"
    assert done[0]["content"][0]["content"]["text"] == "done"
    assert await prompt(agent, sid, "think hard") == "end_turn"
    thought = [u for u in agent.rec.updates[sid] if u["sessionUpdate"] == "agent_thought_chunk"]
    text = [u for u in agent.rec.updates[sid] if u["sessionUpdate"] == "agent_message_chunk"]
    assert thought and thought[-1]["content"]["text"] == "pondering"
    assert thought[-1]["messageId"] == text[-1]["messageId"]
    ids = {u["messageId"] for u in text}
    assert len(ids) == 3  # "calling quick", "the tool is done", "thought about it"


# -- S10 -----------------------------------------------------------------------------


async def test_s10_tool_approval_through_request_permission(approving_agent: Agent) -> None:
    agent = approving_agent
    sid = await agent.session()
    assert await prompt(agent, sid, "quick yes") == "end_turn"
    request = agent.rec.permissions[-1]
    assert request["sessionId"] == sid and request["options"] == ["allow_once", "reject_once"]
    assert request["toolCall"]["rawInput"] == {"why": "quick yes"}
    kinds = agent.rec.kinds(sid)
    assert kinds.index("tool_call") < kinds.index("tool_call_update")
    assert agent.rec.updates[sid][kinds.index("tool_call")]["status"] == "pending"
    assert seen(agent, sid, "tool_call_update", status="in_progress")  # once allowed
    assert seen(agent, sid, "tool_call_update", status="completed")

    async def unknown(request: dict[str, Any]) -> RequestPermissionResponse:
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="no-such-option")
        )

    for policy in (deny, unknown):
        with agent.rec.answering(policy):
            n = len(agent.rec.updates[sid])
            assert await prompt(agent, sid, "quick no") == "end_turn"
        final = [u for u in agent.rec.updates[sid][n:] if u["sessionUpdate"] == "tool_call_update"]
        assert final[-1]["status"] == "failed"
        assert "rejected" in final[-1]["content"][0]["content"]["text"]


async def test_s10_cancel_while_approval_is_pending_answers_cancelled(
    approving_agent: Agent,
) -> None:
    agent = approving_agent
    never = asyncio.Event()

    async def pending(request: dict[str, Any]) -> RequestPermissionResponse:
        await never.wait()
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    try:
        with agent.rec.answering(pending):
            sid = await agent.session()
            task = start(agent, sid, "quick maybe")
            await agent.rec.wait_until(lambda: agent.rec.asked(sid))
            await agent.conn.cancel(session_id=sid)
            with anyio.fail_after(GUARD):
                assert (await task).stop_reason == "cancelled"
    finally:
        never.set()
    assert await prompt(agent, sid, "inspect") == "end_turn"
    roles = [m["role"] for m in model_input(agent, sid)]
    assert roles == ["system", "user", "assistant", "tool", "user"]


# -- S11 -----------------------------------------------------------------------------


async def test_s11_images_and_resources_reach_the_model(agent: Agent, consumer: str) -> None:
    sid = await agent.session()
    blocks = [
        acp.text_block("inspect this"),
        acp.image_block("aGVsbG8=", "image/png"),
        acp.resource_link_block("notes", "file:///tmp/notes.md", mime_type="text/markdown"),
        acp.resource_block(acp.embedded_text_resource("file:///tmp/a.py", "print(1)")),
    ]
    with anyio.fail_after(GUARD):
        r = await agent.conn.prompt(session_id=sid, prompt=blocks)
    assert r.stop_reason == "end_turn"
    user = model_input(agent, sid)[-1]
    # pydantic-ai's user content has images; resources reach its model as their text
    kinds = ["text", "image", "resource_link", "resource"]
    if consumer == "react":
        assert user["parts"] == kinds
        assert user["text"] == "inspect this"
    else:
        assert user["parts"] == ["text", "image", "text", "text"]
        assert user["text"].startswith("inspect this") and "print(1)" in user["text"]


# -- S12 -----------------------------------------------------------------------------


async def test_s12_stdout_carries_only_frames_and_eof_exits_zero() -> None:
    from conftest import RawPipe, agent_env, raw_agent

    proc = await raw_agent(agent_env(AGENT_CHANNEL_ACP_LOG="DEBUG"), stderr=asyncio.subprocess.PIPE)
    assert proc.stdin and proc.stdout and proc.stderr
    pipe = RawPipe(proc)
    send, reply, frames = pipe.send, pipe.reply, pipe.frames
    with anyio.fail_after(GUARD):
        send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        await reply(1)
        send({"id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
        sid = (await reply(2))["result"]["sessionId"]
        text = [{"type": "text", "text": "noisy tool"}]
        send({"id": 3, "method": "session/prompt", "params": {"sessionId": sid, "prompt": text}})
        assert (await reply(3))["result"]["stopReason"] == "end_turn"
        task = [{"type": "text", "text": "block it"}]
        send({"id": 4, "method": "session/prompt", "params": {"sessionId": sid, "prompt": task}})
        proc.stdin.close()  # EOF mid-turn, with a tool blocking
        rest = await proc.stdout.read()
        code = await proc.wait()  # the guard is a hang guard, not the 1 s target
        err = await proc.stderr.read()
    assert code == 0
    for line in rest.splitlines():
        frames.append(json.loads(line))
    assert all(isinstance(f, dict) and f.get("jsonrpc") == "2.0" for f in frames)
    assert b"a stray print from a tool" in err


# -- S13 -----------------------------------------------------------------------------


async def test_s13_load_replays_the_conversation_then_answers(agent: Agent) -> None:
    sid = await agent.session()
    assert await prompt(agent, sid, "quick first") == "end_turn"
    assert await prompt(agent, sid, "think second") == "end_turn"
    live = list(agent.rec.updates[sid])
    agent.rec.updates[sid].clear()
    mark = len(agent.rec.wire)
    with anyio.fail_after(GUARD):
        await agent.conn.load_session(cwd="/", session_id=sid, mcp_servers=[])
    replay = agent.rec.updates[sid]
    kinds = [u["sessionUpdate"] for u in replay]
    assert kinds == [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "agent_message_chunk",
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
    ]
    assert replay[0]["content"]["text"] == "quick first"
    assert (
        replay[2]["status"] == "completed" and replay[2]["content"][0]["content"]["text"] == "done"
    )
    live_ids = [u["messageId"] for u in live if u["sessionUpdate"] == "agent_message_chunk"]
    assert [u["messageId"] for u in replay if u["sessionUpdate"] == "agent_message_chunk"] == list(
        dict.fromkeys(live_ids)
    )
    frames = agent.rec.wire[mark:]
    assert "result" in frames[-1]  # every replayed update came before the response
    assert await prompt(agent, sid, "hello") == "end_turn"  # the session goes on
    with anyio.fail_after(GUARD), pytest.raises(RequestError) as e:
        await agent.conn.load_session(cwd="/", session_id="nope", mcp_servers=[])
    assert e.value.code == -32002


async def test_s14_a_request_past_the_in_flight_limit_is_refused_and_the_session_goes_on() -> None:
    """At most MAX_IN_FLIGHT requests of a connection wait for their answer (a prompt waits
    for its turn): while the agent sits in a tool, the next prompt gets a JSON-RPC error at
    once, the waiting ones are still answered (cancelled here), and prompts work again."""
    from agent_channel_acp.wire._transport import MAX_IN_FLIGHT
    from conftest import RawPipe, raw_agent

    pipe = RawPipe(await raw_agent())
    send, reply = pipe.send, pipe.reply

    def prompt(msg_id: int, text: str) -> None:
        params = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
        send({"id": msg_id, "method": "session/prompt", "params": params})

    with anyio.fail_after(GUARD * 3):
        send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        await reply(1)
        send({"id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
        sid = (await reply(2))["result"]["sessionId"]
        prompt(3, "block it")
        while "toolCallId" not in json.dumps(await pipe.read()):
            pass  # the agent is in the tool: it reads nothing until it is stopped
        for i in range(MAX_IN_FLIGHT - 1):  # with "block it", the limit
            prompt(10 + i, f"m{i}")
        prompt(9, "one too many")
        refused = await reply(9)
        assert refused["error"]["code"] == -32603
        assert f"{MAX_IN_FLIGHT} requests of this connection" in refused["error"]["data"]["reason"]
        send({"method": "session/cancel", "params": {"sessionId": sid}})
        await reply(3)
        answers = [f["result"]["stopReason"] for f in pipe.frames if f.get("id", 0) >= 10]
        assert answers == ["cancelled"] * (MAX_IN_FLIGHT - 1)  # every waiting one, answered
        prompt(4, "hello")
        assert (await reply(4))["result"]["stopReason"] == "end_turn"
        assert pipe.proc.stdin
        pipe.proc.stdin.close()
        assert await pipe.proc.wait() == 0


async def test_s14_a_prompt_into_a_full_channel_is_refused_with_a_reason() -> None:
    """Another producer filled the execution's queue to the channel's limit: the client's
    prompt gets -32600 saying the agent has not read what is queued, and the session and
    the connection go on."""
    from agent_channel.lowlevel import MAX_QUEUED
    from conftest import spawn

    async with spawn("--agent", "agents:crowded_agent") as a:
        sid = await a.session()
        with anyio.fail_after(GUARD):
            await a.rec.wait_until(lambda: seen(a, sid, "agent_message_chunk"))
            assert last_text(a, sid) == "filled"
            with pytest.raises(acp.RequestError) as refused:
                await a.conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
            assert refused.value.code == -32600
            reason = refused.value.data["reason"]
            assert reason.startswith("the agent has not read the messages already queued")
            assert f"{MAX_QUEUED} items already wait undrained" in reason
            await a.session()  # the connection still serves
