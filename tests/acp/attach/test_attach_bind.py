"""Attach mode, binding: the picker (A3), session/load (A4), the bind preamble (A5) and the
replay (A6). A scripted agent runs on its own in a server subprocess; SDK clients attach over
its unix socket."""

from __future__ import annotations

import pytest
from acp import RequestError
from attach_harness import Client, serving

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("transport")]

REPLAY = "agent_channel.replay"


def preamble(c: Client, sid: str) -> tuple[list[dict], list[dict], list[dict]]:
    """(the preamble's updates before the replay, the replay, the live updates after the
    turn_state snapshot) of ``sid``'s first bind."""
    frames = c.rec.frames(sid)
    snap = next(i for i, f in enumerate(frames) if f["method"] == "_agent_channel/turn_state")
    before = [f["params"]["update"] for f in frames[:snap] if f["method"] == "session/update"]
    after = [f["params"]["update"] for f in frames[snap + 1 :] if f["method"] == "session/update"]
    head = [u for u in before if not (u.get("_meta") or {}).get(REPLAY)]
    replay = [u for u in before if (u.get("_meta") or {}).get(REPLAY)]
    return head, replay, after


async def test_a3_one_execution_binds_at_once() -> None:
    async with serving("--input", "gate=g1 start") as server:
        c = await server.connect()
        sid = await c.new()
        assert sid == server.ids[0]
        await c.until(lambda: c.rec.states(sid))
        first = c.rec.updates_of(sid)[0]
        assert first["content"]["text"].startswith("Bound to agent")
        assert first["_meta"]["agent_channel.interactive"] is True
        server.open("g1")


async def test_a3_several_executions_get_a_picker_and_a_pick_binds() -> None:
    async with serving("--count", "3", "--input", "gate=g start") as server:
        c = await server.connect()
        sid = await c.new()
        assert sid not in server.ids
        await c.until(lambda: c.rec.updates_of(sid))
        picker = c.rec.updates_of(sid)[0]
        targets = picker["_meta"]["agent_channel.targets"]
        assert sorted(t["id"] for t in targets) == sorted(server.ids)
        assert "1. agent" in picker["content"]["text"]
        # a bad pick sends the list again, on the same session
        assert (await c.prompt(sid, "9"))["stopReason"] == "end_turn"
        await c.until(lambda: len(c.rec.updates_of(sid)) >= 2)
        again = c.rec.updates_of(sid)[1]
        assert "Not a choice" in again["content"]["text"]
        assert len(again["_meta"]["agent_channel.targets"]) == 3
        # a number binds, without changing the wire session id
        await c.prompt(sid, "2")
        await c.until(lambda: c.rec.states(sid))
        bound = [
            u for u in c.rec.updates_of(sid) if "Bound to" in u.get("content", {}).get("text", "")
        ]
        assert bound and targets[1]["id"] in bound[0]["content"]["text"]
        # so does an id prefix, in another session
        sid2 = await c.new()
        await c.until(lambda: c.rec.updates_of(sid2))
        await c.prompt(sid2, targets[2]["id"][:10])
        await c.until(lambda: c.rec.states(sid2))
        assert any(
            targets[2]["id"] in u.get("content", {}).get("text", "") for u in c.rec.updates_of(sid2)
        )
        server.open("g")


async def test_a4_load_binds_and_unknown_id_is_32002() -> None:
    async with serving("--count", "2", "--input", "gate=g start") as server:
        c = await server.connect()
        target = server.ids[1]
        await c.load(target)
        await c.until(lambda: c.rec.states(target))
        assert c.rec.updates_of(target)[0]["content"]["text"].startswith("Bound to")
        with pytest.raises(RequestError) as e:
            await c.load("no-such-execution")
        assert e.value.code == -32002
        assert "no-such-execution" in e.value.data["reason"]
        # asking to observe binds observe-only
        o = await server.connect()
        await o.load(target, observe=True)
        await o.until(lambda: o.rec.states(target))
        first = o.rec.updates_of(target)[0]
        assert first["content"]["text"].startswith("Observing")
        assert first["_meta"]["agent_channel.interactive"] is False
        # a finished execution binds observe-only
        await c.ext("end", sessionId=server.ids[0])
        await c.load(server.ids[0])
        await c.until(lambda: c.rec.states(server.ids[0]))
        assert c.rec.updates_of(server.ids[0])[0]["content"]["text"].startswith("Observing")
        server.open("g")


async def test_a5_bind_preamble_order_and_replay_marked() -> None:
    async with serving("--input", "gate=g1 start") as server:
        watcher = await server.connect()
        wid = await watcher.new()
        await watcher.until(
            lambda: any(u["sessionUpdate"] == "tool_call" for u in watcher.rec.updates_of(wid))
        )
        c = await server.connect()
        sid = await c.new()
        await c.until(lambda: c.rec.states(sid))
        head, replay, after = preamble(c, sid)
        assert [u["sessionUpdate"] for u in head] == ["agent_message_chunk", "session_info_update"]
        assert head[0]["content"]["text"].startswith("Bound to")
        assert head[1]["title"] == "agent"
        assert replay and all(u["_meta"][REPLAY] is True for u in replay)
        assert c.rec.states(sid) == ["started"]  # the snapshot: a turn is running
        assert after == []  # nothing live yet: the agent waits at the gate
        server.open("g1")
        await c.until(lambda: c.rec.states(sid)[-1:] == ["ended"])
        live = preamble(c, sid)[2]
        assert live and not any((u.get("_meta") or {}).get(REPLAY) for u in live)


async def test_a5_attach_while_streaming_misses_nothing_and_repeats_nothing() -> None:
    """Clients attach at arbitrary moments of a busy turn; each one's replay plus live stream
    has every tool call of the turn exactly once as a card, with its final status."""
    async with serving("--input", "gate=g0 start") as server:
        first = await server.connect()
        sid = await first.new()
        await first.until(lambda: first.rec.states(sid))
        await first.prompt(sid, "loop")
        server.open("g0")
        late: list[tuple[Client, str]] = []
        for _ in range(4):  # attach while the loop runs (wherever it is by then)
            c = await server.connect()
            late.append((c, await c.new()))
        # the gate's call, then five quick ones (max_turn_requests=5), then the agent parks
        await first.until(
            lambda: len(cards(first, sid)) == 6 and set(cards(first, sid).values()) == {"completed"}
        )
        reference = cards(first, sid)
        for c, s in late:
            await c.until(lambda c=c, s=s: cards(c, s) == reference)


def cards(c: Client, sid: str) -> dict[str, str]:
    """Each tool call id the client has a card for, with its latest status; a second
    ``tool_call`` for one id is a failure."""
    out: dict[str, str] = {}
    for u in c.rec.updates_of(sid):
        if u["sessionUpdate"] == "tool_call":
            assert u["toolCallId"] not in out, f"card {u['toolCallId']} sent twice"
            out[u["toolCallId"]] = u.get("status", "")
        elif u["sessionUpdate"] == "tool_call_update" and "status" in u:
            assert u["toolCallId"] in out, "an update for a card never sent"
            out[u["toolCallId"]] = u["status"]
    return out


async def test_a6_replay_starts_at_the_system_prompt_and_a_finished_call_is_one_card() -> None:
    async with serving("--input", "quick task") as server:
        c0 = await server.connect()
        s0 = await c0.new()
        await c0.until(lambda: c0.rec.states(s0)[-1:] == ["ended"])
        c = await server.connect()
        sid = await c.new()
        await c.until(lambda: c.rec.states(sid))
        _, replay, _ = preamble(c, sid)
        assert replay[0]["sessionUpdate"] == "user_message_chunk"
        assert replay[0]["_meta"]["agent_channel.role"] == "system"
        assert replay[1]["_meta"]["agent_channel.source"] == "task"
        assert replay[1]["content"]["text"] == "quick task"
        tool = [u for u in replay if u["sessionUpdate"].startswith("tool_call")]
        assert len(tool) == 1 and tool[0]["sessionUpdate"] == "tool_call"
        assert tool[0]["status"] == "completed"
        assert tool[0]["content"][0]["content"]["text"] == "done"
        seqs = [u["_meta"]["agent_channel.seq"] for u in replay]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_a6_replay_holds_the_most_recent_n() -> None:
    async with serving("--input", "loop", "--replay", "4") as server:
        c0 = await server.connect()
        s0 = await c0.new()
        await c0.until(lambda: c0.rec.states(s0)[-1:] == ["ended"])
        c = await server.connect()
        sid = await c.new()
        await c.until(lambda: c.rec.states(sid))
        _, replay, _ = preamble(c, sid)
        assert len(replay) == 4
        assert replay[0]["_meta"].get("agent_channel.role") != "system"  # the oldest fell off


async def test_a6_a_card_older_than_the_replay_comes_before_its_update() -> None:
    """The ring keeps one update here: a client binding after both gates' cards got only the
    newer one; the older call's final update comes after a minimal card for it, never as an
    update for a call the client does not know (``cards`` asserts that)."""
    async with serving("--input", "gates=a,b start", "--replay", "1") as server:
        c = await server.connect()
        sid = await c.new()
        await c.until(lambda: c.rec.states(sid))
        _, replay, _ = preamble(c, sid)
        assert [u.get("toolCallId") for u in replay] == ["call_2"]  # call_1 left the ring
        server.open("a")
        await c.until(lambda: cards(c, sid).get("call_1") == "completed")
        assert cards(c, sid)["call_2"] == "in_progress"
        server.open("b")
