"""Attach mode, bad input: garbage frames, oversized frames, unknown session ids, prompts an
observer or a finished execution cannot take. The sender gets a precise error; the server
keeps serving it and every other client, and loses no queued message."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import pytest
from acp import RequestError
from attach_harness import bound, serving
from conftest import GUARD

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("transport")]


async def answer(reader: asyncio.StreamReader) -> dict[str, Any]:
    with anyio.fail_after(GUARD):
        while True:
            frame = json.loads(await reader.readline())
            if "method" not in frame:
                return frame


async def test_garbage_frames_get_errors_and_everyone_keeps_being_served() -> None:
    async with serving("--input", "gate=g1 start") as server:
        c, sid = await bound(server)
        await c.prompt(sid, "say=kept")  # queued while the garbage flies
        reader, writer = await server.raw()
        garbage = (b"not json", b"[1,2,3]", b"42", b'"x"', b"null", b'{"id": 3}', b'{"\xff": 1}')
        for line in garbage:  # the last is not UTF-8 (over WebSocket: a binary message)
            writer.write(line + b"\n")
            await writer.drain()
            reply = await answer(reader)
            assert reply["error"]["code"] in (-32700, -32600), (line, reply)
        writer.write(b"x" * (9 << 20) + b"\n")  # over the 8 MiB frame limit
        await writer.drain()
        assert (await answer(reader))["error"]["code"] == -32600
        request = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "initialize",
            "params": {"protocolVersion": 1},
        }
        writer.write(json.dumps(request).encode() + b"\n")
        await writer.drain()
        ok = await answer(reader)
        assert ok["id"] == 7 and ok["result"]["protocolVersion"] == 1
        writer.write(b'[{"jsonrpc":"2.0","id":8,"method":"initialize","params":{}}]\n')
        await writer.drain()
        assert (await answer(reader))["error"]["code"] == -32600
        writer.close()
        server.open("g1")
        await c.until(lambda: c.rec.texts(sid).endswith("kept"))  # the queued message arrived


async def test_unknown_session_ids_get_32002() -> None:
    async with serving("--input", "gate=g1 start") as server:
        c, sid = await bound(server)
        calls = [
            ("session/prompt", {"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}),
            ("session/load", {"sessionId": "nope", "cwd": "/", "mcpServers": []}),
            ("_agent_channel/queue", {"sessionId": "nope"}),
            ("_agent_channel/withdraw", {"sessionId": "nope", "messageId": "m"}),
            ("_agent_channel/messages", {"sessionId": "nope"}),
            ("_agent_channel/end", {"sessionId": "nope"}),
        ]
        for method, params in calls:
            with pytest.raises(RequestError) as e:
                await c.request(method, params)
            assert e.value.code == -32002, method
            assert "nope" in e.value.data["reason"]
        await c.cancel("nope")  # a notification: ignored
        with pytest.raises(RequestError) as e:
            await c.ext("no_such_method")
        assert e.value.code == -32601
        with pytest.raises(RequestError) as e:
            await c.ext("withdraw", sessionId=sid)
        assert e.value.code == -32602
        # a known execution this connection has not bound: -32002 saying so
        other = await server.connect()
        with pytest.raises(RequestError) as e:
            await other.prompt(sid, "x")
        assert e.value.code == -32002 and "session/load" in e.value.data["reason"]
        server.open("g1")
        await c.until(lambda: c.rec.states(sid)[-1:] == ["ended"])


async def test_a14_prompt_on_observer_is_32600() -> None:
    async with serving("--input", "gate=g1 start") as server:
        o = await server.connect()
        await o.load(server.ids[0], observe=True)
        await o.until(lambda: o.rec.states(server.ids[0]))
        with pytest.raises(RequestError) as e:
            await o.prompt(server.ids[0], "hi")
        assert e.value.code == -32600 and "observes only" in e.value.data["reason"]
        assert (await o.ext("queue", sessionId=server.ids[0]))["messages"] == []
        server.open("g1")


async def test_a16_prompt_after_the_loop_ended_is_32600() -> None:
    async with serving("--input", "gate=g1 start") as server:
        c, sid = await bound(server)
        await c.ext("end", sessionId=sid)
        observer = await server.connect()
        await observer.load(sid)
        await observer.until(lambda: observer.rec.states(sid))
        for client in (c, observer):
            with pytest.raises(RequestError) as e:
                await client.prompt(sid, "hello?")
            assert e.value.code == -32600
            assert "not currently attachable" in e.value.data["reason"]


async def test_a_client_opening_sessions_without_end_is_bounded_the_others_go_on() -> None:
    """Each ``session/new`` of a picker opens a session the connection keeps; past the limit
    one more is refused with the limit and what frees one, and nothing else changes."""
    from agent_channel_acp.agent.attach._client import AttachClient

    limit = AttachClient.sessions_limit
    async with serving("--count", "2", "--input", "gate=g1 start") as server:
        other = await server.connect()
        sid = await other.new()  # a picker too (two executions)
        c = await server.connect()
        opened = [await c.new() for _ in range(limit)]
        with pytest.raises(RequestError) as e:
            await c.new()
        assert e.value.code == -32603
        assert f"{limit} sessions" in e.value.data["reason"]
        assert "session/close" in e.value.data["reason"]
        await c.request("session/close", {"sessionId": opened[0]})
        assert await c.new() not in opened  # closing one made room for one
        await other.prompt(sid, "1")  # the other client picks and is served
        await other.until(lambda: other.rec.states(sid))
