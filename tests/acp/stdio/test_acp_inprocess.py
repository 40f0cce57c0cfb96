"""The fast layer: producer and SDK client in one process over a socket pair.

Same transport code as stdio (newline-delimited frames over asyncio streams),
no subprocess: exact wire frames, and the scripted model's recorded input.
asyncio only: the ACP SDK is asyncio-bound (see conftest).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import acp
import anyio
import pytest
from acp.client.connection import ClientSideConnection
from agent_channel import ChatMessageAssistant, ChatMessageTool, ChatMessageUser
from agent_channel_acp import AcpServer, serve
from agent_channel_react import ScriptedAgentFactory
from agents import scripted_factory
from conftest import GUARD, Recorder

pytestmark = pytest.mark.anyio


@dataclass
class Pair:
    conn: ClientSideConnection
    rec: Recorder
    factory: ScriptedAgentFactory
    served: asyncio.Task[None]
    client_writer: asyncio.StreamWriter


@pytest.fixture
async def pair(anyio_backend: str) -> AsyncIterator[Pair]:
    a, b = socket.socketpair()
    server_reader, server_writer = await asyncio.open_connection(sock=a)
    client_reader, client_writer = await asyncio.open_connection(sock=b)
    factory = scripted_factory()
    served = asyncio.ensure_future(serve(AcpServer(factory), server_reader, server_writer))
    rec = Recorder()
    conn = ClientSideConnection(rec, client_writer, client_reader, observers=[rec.observe])
    try:
        yield Pair(conn, rec, factory, served, client_writer)
    finally:
        await conn.close()
        client_writer.close()  # EOF for the server
        with anyio.fail_after(GUARD):
            await served


async def test_a_prompt_on_the_wire_exactly(pair: Pair) -> None:
    with anyio.fail_after(GUARD):
        await pair.conn.initialize(protocol_version=1)
        sid = (await pair.conn.new_session(cwd="/", mcp_servers=[])).session_id
        await pair.conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
    frames = pair.rec.wire[2:]
    mid = frames[0]["params"]["update"]["messageId"]
    assert frames == [
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": sid,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "echo: hello"},
                    "messageId": mid,
                },
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {
                "stopReason": "end_turn",
                "usage": {"totalTokens": 8, "inputTokens": 6, "outputTokens": 2},
            },
        },
    ]


async def test_cancel_repairs_the_next_model_input_exactly(pair: Pair) -> None:
    with anyio.fail_after(GUARD):
        sid = (await pair.conn.new_session(cwd="/", mcp_servers=[])).session_id
        task = asyncio.ensure_future(
            pair.conn.prompt(session_id=sid, prompt=[acp.text_block("block now")])
        )
        await pair.rec.wait_until(lambda: "tool_call" in pair.rec.kinds(sid))
        await pair.conn.cancel(session_id=sid)
        assert (await task).stop_reason == "cancelled"
        await pair.conn.prompt(session_id=sid, prompt=[acp.text_block("next")])
    messages = pair.factory.models[-1].calls[-1].messages
    shapes: list[Any] = [type(m).__name__ for m in messages]
    assert shapes == [
        "ChatMessageSystem",
        "ChatMessageUser",
        "ChatMessageAssistant",
        "ChatMessageTool",
        "ChatMessageUser",
    ]
    user, assistant, result, new = messages[1], messages[2], messages[3], messages[4]
    assert isinstance(user, ChatMessageUser) and user.source == "operator"
    assert isinstance(assistant, ChatMessageAssistant)
    assert isinstance(result, ChatMessageTool) and result.error == "cancelled"
    assert result.tool_call_id == assistant.tool_calls[0].id
    assert isinstance(new, ChatMessageUser) and new.text == "next"


async def test_eof_ends_the_executions_and_the_server(pair: Pair) -> None:
    with anyio.fail_after(GUARD):
        sid = (await pair.conn.new_session(cwd="/", mcp_servers=[])).session_id
        task = asyncio.ensure_future(
            pair.conn.prompt(session_id=sid, prompt=[acp.text_block("block now")])
        )
        await pair.rec.wait_until(lambda: "tool_call" in pair.rec.kinds(sid))
        pair.client_writer.close()
        await pair.served
    task.cancel()


async def test_every_update_on_the_wire_is_the_sdks_own_serialisation(pair: Pair) -> None:
    """Some frames are built directly for speed: they must be byte-for-byte what the SDK's
    schema gives (validate each, serialise it back, compare)."""
    from acp.schema import SessionNotification
    from acp.utils import serialize_params

    with anyio.fail_after(GUARD):
        sid = (await pair.conn.new_session(cwd="/", mcp_servers=[])).session_id
        for text in ("quick one", "think hard"):
            await pair.conn.prompt(session_id=sid, prompt=[acp.text_block(text)])
        task = asyncio.ensure_future(
            pair.conn.prompt(session_id=sid, prompt=[acp.text_block("block now")])
        )
        await pair.rec.wait_until(lambda: "tool_call" in pair.rec.kinds(sid)[-1:])
        await pair.conn.cancel(session_id=sid)
        assert (await task).stop_reason == "cancelled"
    params = [m["params"] for m in pair.rec.wire if m.get("method") == "session/update"]
    kinds = {p["update"]["sessionUpdate"] for p in params}
    assert {"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update"} <= kinds
    for p in params:
        assert serialize_params(SessionNotification.model_validate(p)) == p
