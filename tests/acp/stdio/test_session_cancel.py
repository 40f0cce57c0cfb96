"""S5b: a cancel covers every prompt the client sent before it, whatever the timing.

Over stdio against the react test agent, and hammered in process (a socket pair, the
same transport code) where the scripted model's own record shows what reached it.
asyncio only: the ACP SDK is asyncio-bound (see conftest).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import acp
import anyio
import anyio.lowlevel
import pytest
from agent_channel import ChatMessage, ChatMessageUser
from agent_channel_react import ScriptItem, ToolInfo, call, reply, scripted_agent_factory, tool
from agent_channel_react import tool_call as make_call
from conftest import GUARD, Agent, Local, in_process, spawn

pytestmark = pytest.mark.anyio


def start(conn: Any, sid: str, text: str) -> asyncio.Task[Any]:
    return asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block(text)]))


def on_the_wire(rec: Any, sid: str, text: str) -> bool:
    """Whether the client has written that prompt for that session."""
    return any(
        m.get("method") == "session/prompt"
        and m["params"]["sessionId"] == sid
        and m["params"]["prompt"][0]["text"] == text
        for m in rec.sent
    )


def user_texts(agent: Agent, sid: str) -> list[str]:
    import json

    chunks = [u for u in agent.rec.updates[sid] if u["sessionUpdate"] == "agent_message_chunk"]
    mid = chunks[-1]["messageId"]
    seen = json.loads("".join(c["content"]["text"] for c in chunks if c["messageId"] == mid))
    return [m["text"] for m in seen if m["role"] == "user"]


async def test_s5b_cancel_answers_every_prompt_sent_before_it(agent: Agent) -> None:
    sid = await agent.session()
    tasks = [start(agent.conn, sid, "block now")]
    await agent.rec.wait_until(
        lambda: any(u["sessionUpdate"] == "tool_call" for u in agent.rec.updates[sid])
    )
    for i in range(4):
        tasks.append(start(agent.conn, sid, f"queued {i}"))
    await agent.rec.wait_until(
        lambda: all(on_the_wire(agent.rec, sid, f"queued {i}") for i in range(4))
    )
    await agent.conn.cancel(session_id=sid)
    with anyio.fail_after(GUARD):
        answers = await asyncio.gather(*tasks)
    assert [a.stop_reason for a in answers] == ["cancelled"] * 5
    # the queued ones were withdrawn: the model never saw them, and the agent waited
    with anyio.fail_after(GUARD):
        r = await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("inspect")])
    assert r.stop_reason == "end_turn"
    assert user_texts(agent, sid) == ["block now", "inspect"]


async def test_s5b_a_cancel_while_the_agent_works_on_its_own_withdraws_the_queued_prompt() -> None:
    async with spawn("--agent", "agents:blocking_task_agent") as agent:
        sid = await agent.session()
        await agent.rec.wait_until(
            lambda: any(u["sessionUpdate"] == "tool_call" for u in agent.rec.updates[sid])
        )
        queued = start(agent.conn, sid, "hello")
        await agent.rec.wait_until(lambda: on_the_wire(agent.rec, sid, "hello"))
        await agent.conn.cancel(session_id=sid)
        with anyio.fail_after(GUARD):
            assert (await queued).stop_reason == "cancelled"
        with anyio.fail_after(GUARD):
            r = await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("inspect")])
        assert r.stop_reason == "end_turn"
        assert user_texts(agent, sid) == ["block task", "inspect"]


# -- the hammer ------------------------------------------------------------------------

Log = list[tuple[str, tuple[ChatMessage, ...]]]


def spinning_factory(log: Log) -> Any:
    """An agent that works until cancelled: every prompt except ``inspect`` makes it call a
    tool again and again, which passes a random number of checkpoints (so prompts sent
    meanwhile wait in the queue, or are folded in at once). Model and tool checkpoints are
    the only places its turn can be stopped; ``log`` records them (``call`` with the
    model's input, ``cancelled`` where the interrupt landed)."""
    rng = random.Random(7)

    @tool(kind="other")
    async def spin(why: str) -> str:
        """Spin a while.

        Args:
            why: The prompt.
        """
        try:
            for _ in range(rng.choice((0, 1, 5, 40))):
                await anyio.lowlevel.checkpoint()
        except anyio.get_cancelled_exc_class():
            log.append(("cancelled", ()))
            raise
        return "spun"

    async def script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
        log.append(("call", tuple(messages)))
        try:
            await anyio.lowlevel.checkpoint()
        except anyio.get_cancelled_exc_class():
            log.append(("cancelled", ()))
            raise
        last = next(m for m in reversed(messages) if isinstance(m, ChatMessageUser))
        if last.text == "inspect":
            return reply("inspected")
        return call(make_call("spin", why=last.text))

    return scripted_agent_factory(script, tools=[spin])


def prompts_in(messages: Sequence[ChatMessage]) -> set[str]:
    return {m.text for m in messages if isinstance(m, ChatMessageUser)}


async def one_round(local: Local, log: Log, rng: random.Random) -> int:
    """One session: prompts, a cancel, a fresh prompt; how many prompts were withdrawn."""
    rec = local.rec
    sid = await local.session()
    log.clear()

    def cards() -> int:
        return sum(u["sessionUpdate"] == "tool_call" for u in rec.updates[sid])

    async def progress(n: int) -> None:
        target = cards() + n
        await rec.wait_until(lambda: cards() >= target)
        for _ in range(rng.randrange(4)):
            await asyncio.sleep(0)  # jitter, not synchronisation

    sent = ["spin 0"]
    tasks = [start(local.conn, sid, sent[0])]
    await progress(1)
    for i in range(1, 1 + rng.randrange(6)):
        sent.append(f"spin {i}")
        tasks.append(start(local.conn, sid, sent[-1]))
        await rec.wait_until(lambda: on_the_wire(rec, sid, sent[-1]))
        await progress(rng.randrange(3))
    await local.conn.cancel(session_id=sid)
    with anyio.fail_after(GUARD):
        answers = await asyncio.gather(*tasks)
    assert [a.stop_reason for a in answers] == ["cancelled"] * len(sent)
    with anyio.fail_after(GUARD):
        fresh = await local.conn.prompt(session_id=sid, prompt=[acp.text_block("inspect")])
    assert fresh.stop_reason == "end_turn"

    stopped = next(i for i, (kind, _) in enumerate(log) if kind == "cancelled")
    before = set[str]().union(*(prompts_in(m) for kind, m in log[:stopped] if kind == "call"))
    after = [m for kind, m in log[stopped:] if kind == "call"]
    # after the interrupt the next model call is the fresh prompt's: nothing queued ran...
    assert len(after) == 1 and after[0][-1].text == "inspect"
    # ...and it sees only prompts folded in before the cancel: the rest were withdrawn
    assert prompts_in(after[0]) - before == {"inspect"}
    assert "spin 0" in before
    return len(set(sent) - before)


async def test_s5b_hammer_cancel_at_random_moments_covers_exactly_the_prompts_sent_before_it() -> (
    None
):
    log: Log = []
    rng = random.Random(5)
    async with in_process(spinning_factory(log)) as local:
        withdrawn = [await one_round(local, log, rng) for _ in range(40)]
    # the hammer hit both cases: prompts still queued at the cancel, and all folded in
    assert any(withdrawn) and not all(withdrawn)
