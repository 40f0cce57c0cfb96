"""What the client sees of a turn, and in which order: S9 (messages from any consumer),
S16 (answers before the next turn, one card per tool call), one policy for a bad update.

Over stdio against test agents, and in process (a socket pair, the same transport code)
where a test holds the scripted model at a gate or stops the client reading.
asyncio only: the ACP SDK is asyncio-bound (see conftest).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import acp
import anyio
import pytest
from agent_channel import ChatMessage, ChatMessageAssistant, ChatMessageUser, Usage
from agent_channel_react import (
    ModelOutput,
    ScriptItem,
    ToolInfo,
    call,
    reply,
    scripted_agent_factory,
)
from agent_channel_react import tool_call as make_call
from agents import TOOLS
from conftest import GUARD, Agent, Local, Recorder, in_process, spawn

pytestmark = pytest.mark.anyio


def start(conn: Any, sid: str, text: str) -> asyncio.Task[Any]:
    return asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block(text)]))


def texts(rec: Recorder, sid: str, kind: str = "agent_message_chunk") -> dict[str, str]:
    """Each message's text, joined from its chunks, by message id."""
    out: dict[str, str] = {}
    for u in rec.updates[sid]:
        if u["sessionUpdate"] == kind:
            out[u["messageId"]] = out.get(u["messageId"], "") + u["content"]["text"]
    return out


def wire(rec: Recorder, sid: str) -> list[tuple[str, Any]]:
    """This session's updates and every prompt response, in wire order."""
    out: list[tuple[str, Any]] = []
    for m in rec.wire:
        if m.get("method") == "session/update" and m["params"]["sessionId"] == sid:
            update = m["params"]["update"]
            content = update.get("content")
            out.append(("update", content.get("text") if isinstance(content, dict) else None))
        elif isinstance(m.get("result"), dict) and "stopReason" in m["result"]:
            out.append(("response", m["id"]))
    return out


# -- S9: an assistant message that only arrives as MessageAppended ------------------------


async def test_s9_an_assistant_message_that_only_arrives_as_message_appended_is_shown_once() -> (
    None
):
    async with spawn("--agent", "agents:core_loop_agent") as agent:
        sid = await agent.session()
        for text in ("hello", "tool time"):
            with anyio.fail_after(GUARD):
                r = await agent.conn.prompt(session_id=sid, prompt=[acp.text_block(text)])
            assert r.stop_reason == "end_turn"
        assert sorted(texts(agent.rec, sid).values()) == ["echo: hello", "echo: tool time"]
        assert agent.rec.kinds(sid) == ["agent_message_chunk"] * 2  # no card: no ToolCallStarted


async def test_s9_a_streamed_or_finished_message_is_never_shown_twice(agent: Agent) -> None:
    sid = await agent.session()
    for text in ("quick one", "think hard", "hello"):
        with anyio.fail_after(GUARD):
            await agent.conn.prompt(session_id=sid, prompt=[acp.text_block(text)])
    assert sorted(texts(agent.rec, sid).values()) == sorted(
        ["calling quick", "the tool is done", "thought about it", "echo: hello"]
    )
    assert list(texts(agent.rec, sid, "agent_thought_chunk").values()) == ["pondering"]


# -- S16: answers before the next turn ---------------------------------------------------


class Gated:
    """``first`` waits at a gate the test opens; everything else streams at once."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.open = anyio.Event()

    def script(self, messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
        last = next(m for m in reversed(messages) if isinstance(m, ChatMessageUser))
        if last.text == "first":
            self.entered.set()
            return reply("one", wait=self.open)
        if last.text == "block":
            return call(make_call("block", why="block"), content="blocking")
        return reply(f"echo: {last.text}")


def prompt_id(rec: Recorder, sid: str, text: str) -> int:
    return max(
        m["id"]
        for m in rec.sent
        if m.get("method") == "session/prompt"
        and m["params"]["sessionId"] == sid
        and m["params"]["prompt"][0]["text"] == text
    )


async def answered_then_next(local: Local, gated: Gated, rng: random.Random, i: int) -> None:
    """One round: a turn ends (idle, or cancelled) while the next prompt is already queued."""
    sid = await local.session()
    cancel = rng.random() < 0.5
    if cancel:
        ended = start(local.conn, sid, "block")
        await local.rec.wait_until(lambda: "tool_call" in local.rec.kinds(sid))
    else:
        gated.entered.clear()
        gated.open = anyio.Event()
        ended = start(local.conn, sid, "first")
        with anyio.fail_after(GUARD):
            await gated.entered.wait()
    for _ in range(rng.randrange(3)):
        await asyncio.sleep(0)  # jitter, not synchronisation
    if cancel:
        await local.conn.cancel(session_id=sid)
    nxt = start(local.conn, sid, f"next {i}")  # queued behind the turn, not folded into it
    if not cancel:
        await local.posted()
        gated.open.set()
    with anyio.fail_after(GUARD):
        a, b = await asyncio.gather(ended, nxt)
    assert (a.stop_reason, b.stop_reason) == ("cancelled" if cancel else "end_turn", "end_turn")
    frames = wire(local.rec, sid)
    answered = frames.index(("response", prompt_id(local.rec, sid, "block" if cancel else "first")))
    assert answered < frames.index(("update", f"echo: next {i}"))


async def test_s16_hammer_a_turns_response_precedes_every_update_of_the_next_turn() -> None:
    rng = random.Random(16)
    gated = Gated()
    async with in_process(scripted_agent_factory(gated.script, tools=TOOLS)) as local:
        for i in range(40):
            await answered_then_next(local, gated, rng, i)


# -- S16: one title and one kind per tool call ---------------------------------------------


async def test_s16_one_tool_call_has_one_title_and_kind_everywhere(approving_agent: Agent) -> None:
    agent = approving_agent
    sid = await agent.session()
    with anyio.fail_after(GUARD):
        await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("quick look")])
    live = next(u for u in agent.rec.updates[sid] if u["sessionUpdate"] == "tool_call")
    asked = agent.rec.permissions[-1]["toolCall"]
    agent.rec.updates[sid].clear()
    with anyio.fail_after(GUARD):
        await agent.conn.load_session(cwd="/", session_id=sid, mcp_servers=[])
    replayed = next(u for u in agent.rec.updates[sid] if u["sessionUpdate"] == "tool_call")
    expected = ("Quick: quick look", "read")
    assert (live["title"], live["kind"]) == expected
    assert (asked["title"], asked["kind"]) == expected
    assert (replayed["title"], replayed["kind"]) == expected


# -- one policy for an update that cannot be sent -----------------------------------------


class BadUsage:
    """``bad``: an answer whose usage no ACP frame can carry (negative token counts, as from a
    buggy provider); ``big``: 256 KiB of text in small pieces; anything else: an echo.
    ``called`` holds the prompts the model was called for."""

    def __init__(self) -> None:
        self.called: list[str] = []
        self.changed = asyncio.Event()

    def script(self, messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
        last = next(m for m in reversed(messages) if isinstance(m, ChatMessageUser))
        self.called.append(last.text)
        self.changed.set()
        if last.text == "bad":
            message = ChatMessageAssistant(content="bad usage ahead")
            return ModelOutput(message=message, usage=Usage(input_tokens=-5, total_tokens=-5))
        if last.text == "big":
            return reply("w " * (128 * 1024))
        return reply(f"echo: {last.text}")

    async def called_for(self, text: str) -> None:
        with anyio.fail_after(GUARD):
            while text not in self.called:
                self.changed.clear()
                await self.changed.wait()


async def test_a_bad_update_is_skipped_on_both_paths_and_every_prompt_is_answered() -> None:
    model = BadUsage()
    factory = scripted_agent_factory(model.script)
    async with in_process(factory, buffer=4096, context_window=1000) as local:
        sid = await local.session()

        async def prompt(text: str) -> Any:
            with anyio.fail_after(GUARD):
                return await local.conn.prompt(session_id=sid, prompt=[acp.text_block(text)])

        # written on the spot: the client keeps up
        bad = await prompt("bad")
        assert bad.stop_reason == "end_turn"
        assert bad.usage is None  # the part no frame can carry is left out (and logged)
        assert (await prompt("after")).stop_reason == "end_turn"
        assert list(texts(local.rec, sid).values())[-2:] == ["bad usage ahead", "echo: after"]

        # written by the session's sender: a backlog builds while the client does not read
        local.stop_reading()
        big = start(local.conn, sid, "big")
        await model.called_for("big")
        bad_again = start(local.conn, sid, "bad")
        await model.called_for("bad")  # that turn ran to its end while nothing was read
        local.read_again()
        with anyio.fail_after(GUARD):
            answers = await asyncio.gather(big, bad_again)
        assert [a.stop_reason for a in answers] == ["end_turn", "end_turn"]
        assert answers[1].usage is None
        assert (await prompt("after")).stop_reason == "end_turn"
        assert list(texts(local.rec, sid).values())[-2:] == ["bad usage ahead", "echo: after"]
