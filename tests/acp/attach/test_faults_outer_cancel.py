"""Outer cancellation over ACP (issue 10, A8/A17/A23): ``_agent_channel/end`` and SIGTERM
of ``serve`` during generation, during a tool, during an approval and while parked (after
a cancel, after an answer) end the run cleanly: every client gets the final turn_state and
then one ``session_ended`` with ``stopReason: cancelled``, no error (an escaped
``AgentInterrupted`` would be one), and the messages nobody read.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable

import anyio
import pytest
from attach_harness import Client, card_status, parked, tool_ids
from conftest import GUARD
from faults import one_result_each, real_serve

pytestmark = pytest.mark.anyio

Moment = Callable[[Client, str], Awaitable[None]]


async def _generating(c: Client, sid: str) -> None:
    await c.prompt(sid, "hang")
    await c.until(lambda: "thinking about it" in c.rec.texts(sid))


async def _in_a_tool(c: Client, sid: str) -> None:
    await c.prompt(sid, "block")
    await c.until(lambda: tool_ids(c, sid))


async def _parked_after_a_cancel(c: Client, sid: str) -> None:
    await _in_a_tool(c, sid)
    await c.cancel(sid)
    await c.until(lambda: c.rec.states(sid)[-1:] == ["cancelled"])
    await parked(c, sid)


async def _parked_after_an_answer(c: Client, sid: str) -> None:
    await c.prompt(sid, "say=done")
    await c.until(lambda: c.rec.texts(sid).endswith("done"))
    await parked(c, sid)


async def _approving(c: Client, sid: str) -> None:
    await c.prompt(sid, "quick")
    await c.until(lambda: c.rec.asked(sid))


MOMENTS: dict[str, Moment] = {
    "generation": _generating,
    "tool": _in_a_tool,
    "parked after a cancel": _parked_after_a_cancel,
    "parked after an answer": _parked_after_an_answer,
    "approval": _approving,
}


async def _never(request: dict[str, object]) -> object:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


@pytest.mark.parametrize("how", ["end", "SIGTERM"])
async def test_outer_cancel_ends_with_final_state_then_session_ended(how: str) -> None:
    """One server, one execution per moment (``--approve``: every tool asks its driver,
    who allows it, except at the ``approval`` moment, whose driver never answers)."""
    async with real_serve("--approve", "--count", str(len(MOMENTS))) as server:
        cases: list[tuple[str, str, Client, Client, bool]] = []
        for where, sid in zip(MOMENTS, server.ids, strict=True):
            c = await server.connect(**({"policy": _never} if where == "approval" else {}))
            await c.load(sid)
            watcher = await server.connect()
            await watcher.load(sid, observe=True)
            await watcher.until(lambda watcher=watcher, sid=sid: watcher.rec.states(sid))
            await MOMENTS[where](c, sid)
            busy = not where.startswith("parked")  # a parked agent would read it at once
            if busy:
                await c.prompt(sid, "unread")
            cases.append((where, sid, c, watcher, busy))
        if how == "SIGTERM":
            server.proc.send_signal(signal.SIGTERM)
        for where, sid, c, watcher, busy in cases:
            if how == "end":
                assert await c.ext("end", sessionId=sid, reason="outer") == {}
            for cl in (c, watcher):
                await cl.until(
                    lambda cl=cl, sid=sid: cl.rec.has(sid, "_agent_channel/session_ended")
                )
                frames = cl.rec.frames(sid)
                methods = [f["method"] for f in frames]
                assert methods.count("_agent_channel/session_ended") == 1, where
                assert methods[-2:] == ["_agent_channel/turn_state", "_agent_channel/session_ended"]
                ended = frames[-1]["params"]
                assert ended["stopReason"] == "cancelled", (where, ended)
                assert not ended.get("error"), (where, ended)
                unread = [u["text"] for u in ended["undelivered"]]
                assert unread == (["unread"] if busy else []), (where, ended)
                assert frames[-2]["params"]["state"] in ("cancelled", "ended"), where
                for t in tool_ids(cl, sid):  # no card is left running
                    assert card_status(cl, sid, t) in ("completed", "failed"), (t, where)
            if how == "end":  # the finished conversation: every call has its one result
                full = (await watcher.ext("messages", sessionId=sid, all=True, full=True))[
                    "messages"
                ]
                one_result_each(full)
        if how == "SIGTERM":
            with anyio.fail_after(GUARD):
                assert await server.proc.wait() == 0
