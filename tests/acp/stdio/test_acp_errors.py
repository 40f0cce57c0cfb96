"""Bad input over stdio: the process keeps serving and every request gets exactly one response.

asyncio only: the ACP SDK is asyncio-bound (see conftest).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import acp
import anyio
import pytest
from acp import RequestError
from conftest import GUARD, Agent

pytestmark = pytest.mark.anyio


async def error_of(agent: Agent, method: str, params: Any) -> RequestError:
    with anyio.fail_after(GUARD), pytest.raises(RequestError) as e:
        await agent.request(method, params)
    return e.value


@pytest.mark.parametrize(
    "method", ["no/such_method", "session/set_mode", "authenticate", "_agent_channel/nope"]
)
async def test_unknown_or_unimplemented_method_is_32601(agent: Agent, method: str) -> None:
    sid = await agent.session()
    e = await error_of(agent, method, {"sessionId": sid, "modeId": "x", "methodId": "x"})
    assert e.code == -32601


async def test_invalid_params_is_32602_with_the_validation_errors(agent: Agent) -> None:
    sid = await agent.session()
    e = await error_of(agent, "session/prompt", {"sessionId": sid, "prompt": "not a list"})
    assert e.code == -32602
    assert e.data and e.data["errors"][0]["loc"][0] == "prompt"
    e = await error_of(agent, "session/new", {})
    assert e.code == -32602 and "cwd" in json.dumps(e.data)


async def test_content_we_do_not_advertise_is_32602_with_a_reason(agent: Agent) -> None:
    """S1 advertises no audio: an audio block is refused as invalid params, not -32603."""
    sid = await agent.session()
    audio = [{"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="}]
    e = await error_of(agent, "session/prompt", {"sessionId": sid, "prompt": audio})
    assert e.code == -32602 and "audio" in e.data["reason"]
    e = await error_of(agent, "session/prompt", {"sessionId": sid, "prompt": []})
    assert e.code == -32602 and e.data["reason"] == "the prompt is empty"


async def test_unknown_session_is_32002_with_a_reason(agent: Agent) -> None:
    blocks = [{"type": "text", "text": "hello"}]
    e = await error_of(agent, "session/prompt", {"sessionId": "nope", "prompt": blocks})
    assert e.code == -32002 and "unknown session" in e.data["reason"]
    await agent.conn.cancel(session_id="nope")  # a notification: ignored, no answer
    sid = await agent.session()
    with anyio.fail_after(GUARD):
        r = await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
    assert r.stop_reason == "end_turn"


async def test_meta_keys_never_shadow_real_parameters(agent: Agent) -> None:
    sid = await agent.session()
    shadow = {"session_id": "bogus", "prompt": [], "self": 1, "agent_channel.note": "kept"}
    params = {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}], "_meta": shadow}
    with anyio.fail_after(GUARD):
        result = await agent.request("session/prompt", params)
    assert result["stopReason"] == "end_turn"
    await agent.notify("session/cancel", {"sessionId": sid, "_meta": {"session_id": "bogus"}})
    result = await agent.request(
        "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": [], "_meta": shadow}
    )
    assert result == {}


@pytest.mark.parametrize(
    "line",
    [b"this is not json", b"[1,2,3]", b"42", b'"x"', b"null", b'[{"jsonrpc":"2.0"}]', b"{"],
)
async def test_garbage_lines_get_an_error_and_the_process_keeps_serving(
    agent: Agent, line: bytes
) -> None:
    before = len(agent.rec.wire)
    agent.proc.stdin.write(line + b"\n")  # type: ignore[union-attr]
    with anyio.fail_after(GUARD):
        r = await agent.conn.initialize(protocol_version=1)
    assert r.protocol_version == 1
    errors = [m for m in agent.rec.wire[before:] if m.get("id") is None and "error" in m]
    assert len(errors) == 1
    assert errors[0]["error"]["code"] == (-32700 if line in (b"this is not json", b"{") else -32600)


async def test_request_shaped_garbage_is_32600(agent: Agent) -> None:
    before = len(agent.rec.wire)
    for frame in (
        {"jsonrpc": "2.0", "id": 9001},
        {"jsonrpc": "2.0", "id": 9002, "method": 7},
        {"jsonrpc": "2.0", "id": {"x": 1}, "method": "initialize"},
    ):
        agent.proc.stdin.write(json.dumps(frame).encode() + b"\n")  # type: ignore[union-attr]
    with anyio.fail_after(GUARD):
        await agent.conn.initialize(protocol_version=1)
    got = {m.get("id"): m["error"]["code"] for m in agent.rec.wire[before:] if "error" in m}
    assert got == {9001: -32600, 9002: -32600, None: -32600}


async def test_every_request_gets_exactly_one_response(agent: Agent) -> None:
    sid = await agent.session()
    with anyio.fail_after(GUARD):
        await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("quick")])
        await error_of(agent, "nope", {})
    ids = Counter(
        m["id"]
        for m in agent.rec.wire
        if "method" not in m and isinstance(m.get("id"), int) and m["id"] < 9000  # not raw ones
    )
    sent = {m["id"] for m in agent.rec.sent if "method" in m and "id" in m}
    assert set(ids) == sent
    assert set(ids.values()) == {1}
