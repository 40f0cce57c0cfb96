"""Attach mode, the extension requests: the live conversation read (A19), cancelling one
tool call (A22), ending an execution (A23), the list (A24) and the pending queue (A25)."""

from __future__ import annotations

import pytest
from acp import RequestError
from attach_harness import bound, card_status, parked, serving, tool_ids, user_chunks

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("transport", "consumer")]

ENVELOPE = {"as_of", "sessionId", "status", "count", "messages"}


async def test_a19_messages_envelope_tail_all_full(consumer: str) -> None:
    async with serving("--input", "quick task") as server:
        c, sid = await bound(server)
        await parked(c)
        for i in range(12):
            await c.prompt(sid, f"say=m{i}")
            await c.until(lambda i=i: c.rec.texts(sid).endswith(f"m{i}"))
        await parked(c)  # pydantic-ai ends its run a few steps after the last text
        default = await c.ext("messages", sessionId=sid)
        assert set(default) == ENVELOPE
        assert default["sessionId"] == sid and default["status"] == "waiting for operator"
        assert default["count"] > 20 and len(default["messages"]) == 20
        last = default["messages"][-1]
        assert last["role"] == "assistant" and last["text"] == "m11"
        every = await c.ext("messages", sessionId=sid, all=True)
        assert len(every["messages"]) == every["count"]
        # pydantic-ai builds its system prompt into the first request: not shown (decisions.md)
        assert every["messages"][0]["role"] == ("system" if consumer == "react" else "user")
        tools = [m for m in every["messages"] if m.get("toolCalls")]
        assert tools[0]["toolCalls"] == ["quick"]  # summaries name the tool calls
        two = await c.ext("messages", sessionId=sid, tail=2, full=True)
        assert len(two["messages"]) == 2 and "content" in two["messages"][-1]
        for bad in ({"tail": 0}, {"tail": 2, "all": True}, {"tail": "3"}, {"full": 1}):
            with pytest.raises(RequestError) as e:
                await c.ext("messages", sessionId=sid, **bad)
            assert e.value.code == -32602, bad
        with pytest.raises(RequestError) as e:
            await c.ext("messages", sessionId="nope")
        assert e.value.code == -32002
        # still readable once finished, same envelope
        await c.ext("end", sessionId=sid)
        done = await c.ext("messages", sessionId=sid, tail=1)
        assert set(done) == ENVELOPE and done["status"] == "finished"


async def test_a22_cancel_one_tool_call_turn_goes_on() -> None:
    async with serving("--input", "gates=a,b start") as server:
        c, sid = await bound(server)
        await c.until(lambda: tool_ids(c, sid))
        first = tool_ids(c, sid)[0]
        answer = await c.ext("cancel_tool_call", sessionId=sid, toolCallId=first)
        assert answer == {"cancelled": True}
        await c.until(lambda: card_status(c, sid, first) == "failed")
        await c.until(lambda: len(tool_ids(c, sid)) == 2)
        server.open("b")
        await c.until(lambda: "results:" in c.rec.texts(sid))
        await parked(c, sid)  # the reply's last chunk came before this answer (A-ordering)
        assert "cancelled" not in c.rec.states(sid)  # no interrupt: the turn went on
        assert "operator" in c.rec.texts(sid).split("results:")[-1]
        again = await c.ext("cancel_tool_call", sessionId=sid, toolCallId=first)
        assert again == {"cancelled": False, "reason": "finished"}


async def test_a22_cancel_tool_call_false_for_unknown_finished_or_gone() -> None:
    async with serving("--input", "quick task") as server:
        c, sid = await bound(server)
        await parked(c)
        done = tool_ids(c, sid)[0]
        assert await c.ext("cancel_tool_call", sessionId=sid, toolCallId="nope") == {
            "cancelled": False,
            "reason": "unknown",
        }
        assert await c.ext("cancel_tool_call", sessionId=sid, toolCallId=done) == {
            "cancelled": False,
            "reason": "finished",
        }
        await c.ext("end", sessionId=sid)
        assert await c.ext("cancel_tool_call", sessionId=sid, toolCallId=done) == {
            "cancelled": False,
            "reason": "finished",
        }
        with pytest.raises(RequestError) as e:
            await c.ext("cancel_tool_call", sessionId="nope", toolCallId="x")
        assert e.value.code == -32002


async def test_a23_end_an_execution() -> None:
    async with serving("--input", "gate=g1 start") as server:
        c, sid = await bound(server)
        await c.until(lambda: tool_ids(c, sid))
        await c.prompt(sid, "unread")
        assert await c.ext("end", sessionId=sid, reason="enough") == {}
        # the answer comes once the loop ended: the final state, then session_ended
        frames = [f["method"] for f in c.rec.frames(sid)]
        assert frames[-2:] == ["_agent_channel/turn_state", "_agent_channel/session_ended"]
        states = c.rec.states(sid)
        assert states[states.index("started") :] == ["started", "cancelled"]  # one end state
        ended = c.rec.frames(sid)[-1]["params"]
        assert [u["text"] for u in ended["undelivered"]] == ["unread"]
        assert card_status(c, sid, tool_ids(c, sid)[0]) == "failed"
        listed = (await c.ext("list"))["executions"][0]
        assert listed["status"] == "finished" and listed["drivable"] is False
        assert await c.ext("end", sessionId=sid) == {}  # already ended: nothing to do


async def test_a23_end_of_a_parked_execution_sends_no_second_end_state() -> None:
    async with serving("--input", "quick task") as server:
        c, sid = await bound(server)
        await parked(c)
        assert c.rec.states(sid)[-1] == "ended"
        before = len(c.rec.states(sid))
        assert await c.ext("end", sessionId=sid) == {}
        frames = [f["method"] for f in c.rec.frames(sid)]
        assert frames[-1] == "_agent_channel/session_ended"
        # the turn that ended was reported ended once; nothing ran since: no state after it
        assert c.rec.states(sid)[before:] == []


async def test_a24_list_without_binding() -> None:
    async with serving("--count", "3", "--input", "gate=g start") as server:
        c = await server.connect()
        listed = (await c.ext("list"))["executions"]
        assert [e["id"] for e in listed] == server.ids
        for e in listed:
            assert {
                "id",
                "title",
                "status",
                "turnState",
                "messageCount",
                "pendingApproval",
                "drivable",
                "clients",
            } <= set(e)
            assert e["clients"] == 0 and e["drivable"] is True
        await c.load(server.ids[1])
        await c.until(lambda: c.rec.states(server.ids[1]))
        await c.until(lambda: tool_ids(c, server.ids[1]))  # in the gate: the model answered
        listed = (await c.ext("list"))["executions"]
        assert [e["clients"] for e in listed] == [0, 1, 0]
        assert listed[1]["turnState"] == "started" and listed[1]["status"] == "running"
        assert listed[1]["messageCount"] >= 2


async def test_a25_queue_seen_and_withdrawn() -> None:
    async with serving("--input", "gate=g1 start") as server:
        a, sa = await bound(server)
        b, sb = await bound(server)
        await a.prompt(sa, "first")
        await b.prompt(sb, "say=second")
        queue = (await a.ext("queue", sessionId=sa))["messages"]
        assert [q["text"] for q in queue] == ["first", "say=second"]
        assert all({"id", "text", "client", "time"} <= set(q) for q in queue)
        assert await b.ext("withdraw", sessionId=sb, messageId=queue[0]["id"]) == {
            "withdrawn": True
        }
        assert await b.ext("withdraw", sessionId=sb, messageId=queue[0]["id"]) == {
            "withdrawn": False
        }
        # every client saw the queue change
        for c, s in ((a, sa), (b, sb)):
            await c.until(
                lambda c=c, s=s: (
                    [
                        [q["text"] for q in n["messages"]]
                        for m, n in c.rec.notes
                        if m == "agent_channel/queue" and n["sessionId"] == s
                    ][-1:]
                    == [["say=second"]]
                )
            )
        server.open("g1")
        await a.until(lambda: a.rec.texts(sa).endswith("second"))
        assert [u["content"]["text"] for u in user_chunks(a, sa)] == ["say=second"]
        assert (await a.ext("queue", sessionId=sa))["messages"] == []
        # a folded message can no longer be withdrawn
        assert await a.ext("withdraw", sessionId=sa, messageId=queue[1]["id"]) == {
            "withdrawn": False
        }
