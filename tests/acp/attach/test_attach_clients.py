"""Attach mode, several clients: one stream and one queue (A14), disconnects (A15), the end
of an execution (A16, A17), nested executions (A18), approvals to one driver (A20) and
many executions on one server (A27)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from acp import RequestError
from acp.schema import AllowedOutcome, RequestPermissionResponse
from attach_harness import bound, card_status, serving, tool_ids, user_chunks

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("transport")]


async def test_a14_several_clients_one_stream_one_queue_observer_refused() -> None:
    async with serving("--input", "gate=g1 start") as server:
        a, sa = await bound(server)
        b, sb = await bound(server)
        o = await server.connect()
        await o.load(server.ids[0], observe=True)
        await o.until(lambda: o.rec.states(server.ids[0]))
        await a.prompt(sa, "say=from-a")
        await b.prompt(sb, "from-b")
        queue = (await a.ext("queue", sessionId=sa))["messages"]
        assert [q["text"] for q in queue] == ["say=from-a", "from-b"]
        assert queue[0]["client"] != queue[1]["client"]
        with pytest.raises(RequestError) as e:
            await o.prompt(server.ids[0], "from the observer")
        assert e.value.code == -32600
        await o.cancel(server.ids[0])  # ignored
        await o.ext("list")  # the cancel was handled before this answer
        server.open("g1")
        for c, s in ((a, sa), (b, sb), (o, server.ids[0])):
            await c.until(lambda c=c, s=s: c.rec.texts(s).endswith("from-a"))
            assert [u["content"]["text"] for u in user_chunks(c, s)] == ["say=from-a\n\nfrom-b"]
        assert card_status(a, sa, tool_ids(a, sa)[0]) == "completed"
        assert "cancelled" not in a.rec.states(sa)


async def test_a15_disconnect_mid_turn_has_no_effect_and_load_replays() -> None:
    async with serving("--input", "gate=g1 start") as server:
        a, sa = await bound(server)
        b, sb = await bound(server)
        await a.close()
        server.open("g1")
        await b.until(lambda: b.rec.states(sb)[-1:] == ["ended"])
        first = tool_ids(b, sb)[0]
        assert card_status(b, sb, first) == "completed"
        back = await server.connect()
        await back.load(sa)
        await back.until(lambda: back.rec.states(sa))
        replayed = [u for u in back.rec.updates_of(sa) if u.get("toolCallId") == first]
        assert len(replayed) == 1 and replayed[0]["status"] == "completed"
        assert replayed[0]["_meta"]["agent_channel.replay"] is True


async def test_a16_after_the_end_prompts_are_refused_and_the_connection_stays() -> None:
    async with serving("--input", "gate=g1 start") as server:
        c, sid = await bound(server)
        await c.ext("end", sessionId=sid)
        await c.until(lambda: c.rec.has(sid, "_agent_channel/session_ended"))
        with pytest.raises(RequestError) as e:
            await c.prompt(sid, "too late")
        assert e.value.code == -32600
        assert "not currently attachable" in e.value.data["reason"]
        # the connection still serves: a new session gets the picker (nothing drivable)
        again = await c.new()
        await c.until(lambda: c.rec.updates_of(again))
        picker = c.rec.updates_of(again)[0]
        assert picker["_meta"]["agent_channel.targets"][0]["status"] == "finished"


async def test_a17_queued_messages_are_reported_when_the_agent_finishes() -> None:
    async with serving("--input", "gate=g1 start") as server:
        c, sid = await bound(server)
        other, so = await bound(server)
        await c.prompt(sid, "never read")
        await c.ext("end", sessionId=sid)
        for cl, s in ((c, sid), (other, so)):
            await cl.until(lambda cl=cl, s=s: cl.rec.has(s, "_agent_channel/session_ended"))
            ended = next(
                f["params"]
                for f in cl.rec.frames(s)
                if f["method"] == "_agent_channel/session_ended"
            )
            assert [u["text"] for u in ended["undelivered"]] == ["never read"]
            assert ended["undelivered"][0]["source"] == "operator"


async def test_a18_nested_execution_is_never_addressable() -> None:
    async with serving("--input", "helper") as server:
        c, sid = await bound(server)
        await c.until(lambda: "results:" in c.rec.texts(sid))
        # the inner run's own messages (its system prompt, its input, its streamed answer)
        # never appear: only the outer card, whose result is the inner answer
        texts = [
            u["content"].get("text")
            for u in c.rec.updates_of(sid)
            if isinstance(u.get("content"), dict)
        ]
        assert "inner agent" not in texts and "inner work" not in texts
        assert "inner secret text" not in texts
        helper = [u for u in c.rec.updates_of(sid) if u["sessionUpdate"] == "tool_call"]
        assert helper and helper[0]["title"].startswith("helper")
        assert card_status(c, sid, helper[0]["toolCallId"]) == "completed"
        listed = (await c.ext("list"))["executions"]
        assert [e["id"] for e in listed] == server.ids  # the nested run is not listed
        messages = (await c.ext("messages", sessionId=sid, all=True))["messages"]
        assert not any(m["text"] in ("inner agent", "inner work") for m in messages)
        with pytest.raises(RequestError) as e:
            await c.load("inner")
        assert e.value.code == -32002


async def test_a20_approval_goes_to_one_driver_and_moves_when_it_leaves() -> None:
    hold = asyncio.Event()

    async def never(request: dict[str, Any]) -> RequestPermissionResponse:
        await hold.wait()
        raise AssertionError("unreachable")

    async def allow(request: dict[str, Any]) -> RequestPermissionResponse:
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow_once")
        )

    async with serving("--approve") as server:
        a = await server.connect(policy=allow)
        sa = await a.new()
        await a.until(lambda: a.rec.states(sa))
        b = await server.connect(policy=never)
        sb = await b.new()
        await b.until(lambda: b.rec.states(sb))
        await b.prompt(sb, "quick please")  # b prompted last: b is asked
        await b.until(lambda: b.rec.permissions)
        assert a.rec.permissions == []
        # the narration reached b before the request
        wire = b.rec.wire
        asked = next(
            i for i, f in enumerate(wire) if f.get("method") == "session/request_permission"
        )
        said = [
            i
            for i, f in enumerate(wire)
            if f.get("method") == "session/update"
            and f["params"]["update"].get("content", {}).get("text") == "calling quick"
        ]
        assert said and said[0] < asked
        await b.close()  # b leaves without answering: the request moves to a
        await a.until(lambda: a.rec.permissions)
        await a.until(lambda: a.rec.texts(sa).endswith("the tool is done"))
        first = tool_ids(a, sa)[0]
        assert card_status(a, sa, first) == "completed"


async def test_a27_many_executions_each_its_own_stream() -> None:
    inputs = [f"say=hello-{i}" for i in range(50)]
    args = [a for text in inputs for a in ("--input", text)]
    async with serving("--count", "50", *args) as server:
        c = await server.connect()
        listed = (await c.ext("list"))["executions"]
        assert len(listed) == 50
        pick = await c.new()
        await c.until(lambda: c.rec.updates_of(pick))
        assert len(c.rec.updates_of(pick)[0]["_meta"]["agent_channel.targets"]) == 50
        one, two = server.ids[3], server.ids[7]
        await c.load(one)
        other = await server.connect()
        await other.load(two)
        await c.until(lambda: c.rec.states(one))
        await other.until(lambda: other.rec.states(two))
        await other.prompt(two, "say=only-for-seven")
        await other.until(lambda: other.rec.texts(two).endswith("only-for-seven"))
        await c.prompt(one, "say=only-for-three")
        await c.until(lambda: c.rec.texts(one).endswith("only-for-three"))
        assert "only-for-seven" not in str(c.rec.wire)
        assert "only-for-three" not in str(other.rec.wire)
        assert {f["params"]["sessionId"] for f in c.rec.wire if "method" in f} <= {one, pick}


async def test_a18_cancel_stops_the_whole_nested_run() -> None:
    async with serving("--input", "helper gate=h1") as server:
        c, sid = await bound(server)
        await c.until(lambda: tool_ids(c, sid))
        helper = tool_ids(c, sid)[0]
        await c.cancel(sid)
        await c.until(lambda: c.rec.states(sid)[-1:] == ["cancelled"])
        assert card_status(c, sid, helper) == "failed"
        assert "inner waits" not in c.rec.texts(sid)  # the inner run never showed
        await c.prompt(sid, "say=after")
        await c.until(lambda: c.rec.texts(sid).endswith("after"))


async def test_a22_cancelling_a_tool_call_that_runs_a_sub_agent_stops_it() -> None:
    async with serving("--input", "helper gate=h1") as server:
        c, sid = await bound(server)
        await c.until(lambda: tool_ids(c, sid))
        helper = tool_ids(c, sid)[0]
        assert await c.ext("cancel_tool_call", sessionId=sid, toolCallId=helper) == {
            "cancelled": True
        }
        await c.until(lambda: card_status(c, sid, helper) == "failed")
        await c.until(lambda: "results:" in c.rec.texts(sid))  # the turn went on
        assert "cancelled" not in c.rec.states(sid)
