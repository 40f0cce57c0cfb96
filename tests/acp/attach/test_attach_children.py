"""Children over attach (K11, K12): ``agent-channel-acp serve`` runs an orchestrator (the
suite's ``orchestrator_agent``, on the core's supervisor) and an SDK client attached to it
sees a card per child change status, reads the tree, steers one child and stops another."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.client.connection import ClientSideConnection
from attach_harness import AttachRecorder
from conftest import GUARD, HERE, allow, deny
from serving import Serving, connect, ctl, executions, serving, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("transport")]

AGENT = ("--agent", "agents:orchestrator_agent")


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    return tmp_path / "rt"


@asynccontextmanager
async def attached(served: Serving) -> AsyncIterator[tuple[ClientSideConnection, AttachRecorder]]:
    reader, writer, meta = await connect(served.record)
    rec = AttachRecorder()
    conn = ClientSideConnection(rec, writer, reader, observers=[rec.observe])  # pyright: ignore[reportArgumentType]
    try:
        with anyio.fail_after(GUARD):
            await conn.initialize(protocol_version=1, **meta)
        yield conn, rec
    finally:
        await conn.close()
        writer.close()


def child_cards(rec: AttachRecorder, sid: str) -> dict[str, dict[str, Any]]:
    """Each child card as the client has it now: its updates merged, by child name."""
    merged: dict[str, dict[str, Any]] = {}
    for u in rec.updates_of(sid):
        tool_call_id = u.get("toolCallId", "")
        if not tool_call_id.startswith("child-"):
            continue
        card = merged.setdefault(tool_call_id, {"statuses": []})
        for key, value in u.items():
            if key == "_meta":
                card.update({k: v for k, v in value.items() if k != "agent_channel.replay"})
            else:
                card[key] = value
        if "status" in u:
            card["statuses"].append(u["status"])
    return {c["agent_channel.child"]["name"]: c for c in merged.values()}


def text_of(card: dict[str, Any]) -> str:
    return "".join(c["content"]["text"] for c in card.get("content") or [])


async def test_k11_k12_an_attached_client_sees_each_childs_card_and_steers_and_stops_one(
    rt: Path,
) -> None:
    with serving(rt, *AGENT, "--input", "spawn alpha beta gamma") as served:
        (sid,) = await asyncio.to_thread(served.ids)
        async with attached(served) as (conn, rec):
            # a late joiner: the cards come in the replay, then live
            await conn.load_session(cwd=str(HERE), session_id=sid, mcp_servers=[])

            def all_waiting() -> bool:
                cards = child_cards(rec, sid)
                return len(cards) == 3 and all(
                    c["agent_channel.child"]["status"] == "waiting" for c in cards.values()
                )

            await rec.wait_until(all_waiting)
            cards = child_cards(rec, sid)
            assert sorted(cards) == ["alpha", "beta", "gamma"]
            assert all(c["status"] == "in_progress" for c in cards.values())
            assert all(c["title"] == f"Child agent {name}: {name}" for name, c in cards.items())
            assert all(c["rawInput"]["parentId"] == sid for c in cards.values())
            ids = {name: c["agent_channel.child"]["id"] for name, c in cards.items()}

            listed = await conn.ext_method("agent_channel/children", {"sessionId": sid})
            assert [c["name"] for c in listed["children"]] == ["alpha", "beta", "gamma"]
            assert all(c["depth"] == 1 and c["parentId"] is None for c in listed["children"])

            steered = await conn.ext_method(
                "agent_channel/steer_child",
                {"sessionId": sid, "childId": ids["alpha"], "text": "finish now"},
            )
            assert steered["outcome"] == "delivered" and isinstance(steered["seq"], int)
            await rec.wait_until(lambda: child_cards(rec, sid)["alpha"]["status"] == "completed")
            assert text_of(child_cards(rec, sid)["alpha"]) == "alpha: done (finish now)"

            stopped = await conn.ext_method(
                "agent_channel/stop_child", {"sessionId": sid, "childId": ids["beta"]}
            )
            assert stopped == {"stopped": True, "status": "ended"}
            await rec.wait_until(lambda: child_cards(rec, sid)["beta"]["status"] == "failed")
            assert text_of(child_cards(rec, sid)["beta"]) == "killed: stopped by the operator"
            gamma = child_cards(rec, sid)["gamma"]
            assert gamma["status"] == "in_progress" and "failed" not in gamma["statuses"]

            # each change was also an _agent_channel/children notification with the tree
            notes = [p for m, p in rec.notes if m == "agent_channel/children"]
            assert notes and all(p["sessionId"] == sid for p in notes)
            last = {c["name"]: c for c in notes[-1]["children"]}
            assert last["beta"]["end"] == "killed" and last["gamma"]["status"] == "waiting"

            again = await conn.ext_method(
                "agent_channel/stop_child", {"sessionId": sid, "childId": ids["beta"]}
            )
            assert again == {"stopped": False, "status": "ended"}
            late = await conn.ext_method(
                "agent_channel/steer_child",
                {"sessionId": sid, "childId": ids["beta"], "text": "too late"},
            )
            assert late["outcome"] == "undelivered"
            with pytest.raises(RequestError) as e:
                await conn.ext_method(
                    "agent_channel/stop_child", {"sessionId": sid, "childId": "nope"}
                )
            assert e.value.code == -32002 and "no child 'nope'" in str(e.value.data)

            # the parent's next turn read the operator's note and the announcement
            def parent_saw(text: str) -> bool:
                return text in rec.texts(sid)

            await rec.wait_until(lambda: parent_saw("seen: The operator stopped child beta"))
            tail = await conn.ext_method(
                "agent_channel/messages", {"sessionId": sid, "childId": ids["alpha"]}
            )
            assert tail["childId"] == ids["alpha"] and tail["status"] == "ended"
            assert [m["text"] for m in tail["messages"]][-2:] == ["finish now", "alpha: done"]


def _has_orchestrator_demo() -> bool:
    try:
        from agent_channel_react import demo
    except ImportError:
        return False
    return hasattr(demo, "orchestrator")


@pytest.mark.skipif(not _has_orchestrator_demo(), reason="the orchestrator demo is not there")
async def test_k11_a_client_attached_to_serve_demo_orchestrator_sees_each_card_change_status(
    rt: Path,
) -> None:
    demo = ("--demo", "orchestrator")
    # steps of 1 s: the client binds long before the first child (two steps) ends
    with serving(rt, *demo, AGENT_CHANNEL_DEMO_TOOL_SECONDS="1.0") as served:
        (sid,) = await asyncio.to_thread(served.ids)
        async with attached(served) as (conn, rec):
            await conn.load_session(cwd=str(HERE), session_id=sid, mcp_servers=[])

            def ended() -> int:
                cards = child_cards(rec, sid).values()
                return sum(c["agent_channel.child"]["status"] == "ended" for c in cards)

            await rec.wait_until(lambda: len(child_cards(rec, sid)) == 3)
            while ended() < 3:  # the guard is per frame: the demo takes a while, never stalls
                frames = len(rec.wire)
                await rec.wait_until(lambda n=frames: ended() == 3 or len(rec.wire) > n)
            cards = child_cards(rec, sid)
            ends = {name: c["agent_channel.child"]["end"] for name, c in cards.items()}
            assert sorted(ends.values()) == ["completed", "completed", "killed"]
            for name, card in cards.items():
                final = "failed" if ends[name] == "killed" else "completed"
                assert card["status"] == final, name
                assert card["statuses"][-1] == final and "in_progress" in card["statuses"], name
            steered = [c for c in cards.values() if "agent_channel.steer" in c]
            assert [c["agent_channel.steer"]["outcome"] for c in steered] == ["delivered"]
            listed = await conn.ext_method("agent_channel/children", {"sessionId": sid})
            assert {c["name"]: c["end"] for c in listed["children"]} == ends


async def test_k11_a_client_that_binds_late_gets_the_tree_with_the_replay(rt: Path) -> None:
    """The cards come in the replay; the tree must too, not only at the next change (a
    console bound after the children settled showed their cards and an empty tree)."""
    with serving(rt, *AGENT, "--input", "spawn alpha beta") as served:
        (sid,) = await asyncio.to_thread(served.ids)

        def settled() -> bool:
            (e,) = executions(rt)
            return [c["status"] for c in e.get("children", [])] == ["waiting", "waiting"]

        await asyncio.to_thread(wait_for, settled, "both children waiting")
        async with attached(served) as (conn, rec):
            await conn.load_session(cwd=str(HERE), session_id=sid, mcp_servers=[])
            await rec.wait_until(lambda: len(child_cards(rec, sid)) == 2)
            await rec.wait_until(lambda: any(m == "agent_channel/children" for m, _ in rec.notes))
            (note,) = [p for m, p in rec.notes if m == "agent_channel/children"]
            assert note["sessionId"] == sid
            assert [(c["name"], c["status"]) for c in note["children"]] == [
                ("alpha", "waiting"),
                ("beta", "waiting"),
            ]


async def test_k9_a_childs_tool_call_reaches_the_client_as_a_permission_request_naming_it(
    rt: Path,
) -> None:
    """Under ``--approve`` the child's call is asked of the driver, titled with the child's
    name, and its card ends with the answer (the child's own tool events never reach the
    top level, so a card left ``in_progress`` would run for the parent's whole life)."""
    with serving(rt, *AGENT, "--approve", "--input", "ask alpha") as served:
        (sid,) = await asyncio.to_thread(served.ids)
        async with attached(served) as (conn, rec):
            await conn.load_session(cwd=str(HERE), session_id=sid, mcp_servers=[])
            await rec.wait_until(lambda: rec.permissions)
            (asked,) = rec.permissions
            call = asked["toolCall"]
            alpha = next(iter(child_cards(rec, sid).values()))["agent_channel.child"]["id"]
            assert call["toolCallId"] == f"{alpha}/call_1"
            assert call["title"] == "alpha: quick"
            assert call["_meta"]["agent_channel.child"] == {"id": alpha, "name": "alpha"}
            await rec.wait_until(lambda: child_cards(rec, sid)["alpha"]["status"] == "completed")
            assert text_of(child_cards(rec, sid)["alpha"]) == "alpha: allowed"

            def card_of_the_call() -> list[str]:
                return [
                    u["status"]
                    for u in rec.updates_of(sid)
                    if u.get("toolCallId") == call["toolCallId"] and "status" in u
                ]

            await rec.wait_until(lambda: card_of_the_call()[-1:] == ["completed"])
            (listed,) = (await conn.ext_method("agent_channel/list", {}))["executions"]
            assert listed["runningToolCalls"] == []


async def test_a24_the_parents_own_waiting_approvals_are_each_listed(rt: Path) -> None:
    """The execution's own three calls held for approval (one model turn): all three are
    listed, oldest first, and ``ls`` counts them; one answered leaves the other two; all
    answered leaves none (the hub's one slot showed only the last, ``call_3``)."""
    agent = ("--agent", "agents:attach_agent", "--approve", "--input", "gates=a,b,c go")
    with serving(rt, *agent) as served:
        (sid,) = await asyncio.to_thread(served.ids)
        first = asyncio.Event()
        rest = asyncio.Event()

        async def hold(request: dict[str, Any]) -> Any:
            await (first if request["toolCall"]["title"] == "Gate: a" else rest).wait()
            return await deny(request)

        async def listed() -> dict[str, Any]:
            (one,) = (await conn.ext_method("agent_channel/list", {}))["executions"]
            return one

        async with attached(served) as (conn, rec):
            with rec.answering(hold):
                await conn.load_session(cwd=str(HERE), session_id=sid, mcp_servers=[])
                await rec.wait_until(lambda: len(rec.permissions) == 3)
                waiting = (await listed())["pendingApprovals"]
                assert [(w["toolCallId"], w["title"]) for w in waiting] == [
                    (f"call_{i}", f"Gate: {n}") for i, n in ((1, "a"), (2, "b"), (3, "c"))
                ]
                assert all(w.get("childId") is None for w in waiting)
                assert (await listed())["pendingApproval"] == "call_1"
                lines = (await asyncio.to_thread(ctl, rt, "ls")).stdout.splitlines()
                (head,) = [line for line in lines if line.startswith(f"  {sid}")]
                assert "3 approvals pending" in head
                first.set()
                await wait_for_listed(conn, lambda one: len(one["pendingApprovals"]) == 2)
                waiting = (await listed())["pendingApprovals"]
                assert [w["toolCallId"] for w in waiting] == ["call_2", "call_3"]
                rest.set()
                await wait_for_listed(conn, lambda one: one["pendingApprovals"] == [])
                assert (await listed())["pendingApproval"] is None


async def wait_for_listed(conn: ClientSideConnection, done: Any) -> None:
    """Until the one listed execution satisfies ``done`` (the hub settles a call's approval
    on its own task, after the client's answer)."""
    with anyio.fail_after(GUARD):
        while True:
            (one,) = (await conn.ext_method("agent_channel/list", {}))["executions"]
            if done(one):
                return
            await asyncio.sleep(0.02)


async def test_a24_every_waiting_approval_is_listed_until_it_is_answered(rt: Path) -> None:
    """Three children's calls held for approval; one answered: the other two stay listed (one
    slot, cleared by any approval finishing, listed none), and ``ls`` says so on the execution
    and on each child whose call waits."""
    with serving(rt, *AGENT, "--approve", "--input", "ask alpha beta gamma") as served:
        (sid,) = await asyncio.to_thread(served.ids)
        release = asyncio.Event()

        async def hold_all_but_alpha(request: dict[str, Any]) -> Any:
            if request["toolCall"]["title"] != "alpha: quick":
                await release.wait()
            return await allow(request)

        async with attached(served) as (conn, rec):
            with rec.answering(hold_all_but_alpha):
                await conn.load_session(cwd=str(HERE), session_id=sid, mcp_servers=[])
                await rec.wait_until(lambda: len(rec.permissions) == 3)
                await rec.wait_until(
                    lambda: child_cards(rec, sid)["alpha"]["status"] == "completed"
                )
                ids = {n: c["agent_channel.child"]["id"] for n, c in child_cards(rec, sid).items()}
                (listed,) = (await conn.ext_method("agent_channel/list", {}))["executions"]
                assert listed["pendingApproval"] == f"{ids['beta']}/call_1"  # the oldest
                waiting = listed["pendingApprovals"]
                assert [(w["toolCallId"], w["childId"], w["title"]) for w in waiting] == [
                    (f"{ids[n]}/call_1", ids[n], f"{n}: quick") for n in ("beta", "gamma")
                ]
                lines = (await asyncio.to_thread(ctl, rt, "ls")).stdout.splitlines()
                (head,) = [line for line in lines if line.startswith(f"  {sid}")]
                assert "2 approvals pending" in head
                for name in ("alpha", "beta", "gamma"):
                    (row,) = [line for line in lines if f"child {ids[name]}" in line]
                    assert ("approval pending" in row) == (name != "alpha"), row
                release.set()
                await rec.wait_until(
                    lambda: all(c["status"] == "completed" for c in child_cards(rec, sid).values())
                )
                (listed,) = (await conn.ext_method("agent_channel/list", {}))["executions"]
                assert listed["pendingApprovals"] == [] and listed["pendingApproval"] is None
