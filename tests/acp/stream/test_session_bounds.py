"""S14: what a client that stops reading costs, and what happens past the stated cap.

In process (a socket pair with small kernel buffers, the same transport code as stdio):
the SDK client's socket stops being read while the agent streams, then reads again.
Memory itself is measured in benchmarks/acp_backlog.py. asyncio only (see conftest).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import acp
import anyio
import pytest
from agent_channel import ChatMessage, ChatMessageUser
from agent_channel_acp import AcpServer
from agent_channel_react import (
    GenerateConfig,
    ModelOutput,
    ScriptedModel,
    ScriptItem,
    Stream,
    ToolInfo,
    react,
    reply,
)
from conftest import GUARD, Local, Recorder, in_process

pytestmark = pytest.mark.anyio

WORDS = 30_000  # "w " each: 60 KB of text in 10,000 streamed pieces of three words


class Streaming:
    """A react agent whose model streams ``w `` as many times as the prompt says; ``done`` is set
    when a call has streamed its last piece."""

    def __init__(self) -> None:
        self.done = asyncio.Event()
        self.inner = ScriptedModel(self.script)
        self.name: str | None = "streaming"

    def script(self, messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
        last = next(m for m in reversed(messages) if isinstance(m, ChatMessageUser))
        words = last.text.split()
        return reply("w " * int(words[1])) if words[0] == "stream" else reply("ok")

    async def generate(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolInfo],
        config: GenerateConfig,
        stream: Stream,
    ) -> ModelOutput:
        out = await self.inner.generate(messages, tools, config, stream)
        self.done.set()
        return out

    def factory(self, model: str | None = None) -> Any:
        agent = react(model=self, prompt=None, submit=False)

        async def body() -> Any:
            from agent_channel_react import AgentState

            return await agent(AgentState())

        return body


def chunk_frames(rec: Recorder, sid: str) -> list[dict[str, Any]]:
    return [u for u in rec.updates[sid] if u["sessionUpdate"] == "agent_message_chunk"]


async def stalled_stream(local: Local, model: Streaming, words: int) -> tuple[str, Any]:
    """Stream ``words`` words to a client that is not reading; it reads again once the model
    is done (the agent never waited for it). Returns the session and the prompt's answer."""
    sid = await local.session()
    local.stop_reading()
    model.done.clear()
    task = asyncio.ensure_future(
        local.conn.prompt(session_id=sid, prompt=[acp.text_block(f"stream {words}")])
    )
    with anyio.fail_after(GUARD):
        await model.done.wait()
    local.read_again()
    with anyio.fail_after(GUARD):
        return sid, await task


async def test_s14_chunks_queued_for_a_client_that_stopped_reading_merge_and_lose_nothing() -> None:
    model = Streaming()
    async with in_process(model.factory, buffer=4096) as local:
        sid, answer = await stalled_stream(local, model, WORDS)
        assert answer.stop_reason == "end_turn"
        frames = chunk_frames(local.rec, sid)
        assert "".join(f["content"]["text"] for f in frames) == "w " * WORDS
        assert len({f["messageId"] for f in frames}) == 1
        assert len(frames) < WORDS // 3 // 10  # merged while queued: far fewer frames than pieces


async def test_s14_past_the_cap_queued_updates_are_dropped_with_a_notice_and_answers_kept() -> None:
    model = Streaming()
    words = 512 * 1024  # 1 MiB of text against a 64 KiB cap
    async with in_process(model.factory, buffer=4096, backlog_limit=64 * 1024) as local:
        sid, answer = await stalled_stream(local, model, words)
        assert answer.stop_reason == "end_turn"  # the answer is never dropped
        frames = chunk_frames(local.rec, sid)
        notices = [f for f in frames if "not sent" in f["content"]["text"]]
        assert len(notices) == 1 and "session/load" in notices[0]["content"]["text"]
        sent = sum(len(f["content"]["text"]) for f in frames if f not in notices)
        assert sent < 2 * words // 4  # most of it was dropped, not buffered
        # the session goes on, and the conversation itself lost nothing
        with anyio.fail_after(GUARD):
            r = await local.conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
        assert r.stop_reason == "end_turn"
        local.rec.updates[sid].clear()
        with anyio.fail_after(GUARD):
            await local.conn.load_session(cwd="/", session_id=sid, mcp_servers=[])
        replayed = chunk_frames(local.rec, sid)
        assert "".join(f["content"]["text"] for f in replayed).startswith("w " * words)


def test_a_backlog_limit_too_small_for_one_chunk_is_refused_where_the_server_is_made() -> None:
    with pytest.raises(ValueError, match="backlog_limit must be at least"):
        AcpServer(lambda model: None, backlog_limit=1000)
