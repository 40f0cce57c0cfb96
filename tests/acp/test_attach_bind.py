"""Attach mode, binding: the picker (A3), session/load (A4), the bind preamble (A5) and the
replay (A6). A scripted agent runs on its own in a server subprocess; SDK clients attach over
its unix socket."""

from __future__ import annotations

import pytest
from attach_harness import serving

pytestmark = pytest.mark.anyio


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
