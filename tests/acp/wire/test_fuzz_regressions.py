"""Defects the wire fuzzer found, each kept as its minimal frames (see ``test_fuzz_stdio``
and ``test_fuzz_serve``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import GUARD, HERE
from fuzz_checker import Wire
from fuzz_frames import Pool
from fuzz_targets import start_stdio

pytestmark = pytest.mark.anyio


def line(frame: dict[str, Any]) -> bytes:
    return json.dumps(frame).encode() + b"\n"


@asynccontextmanager
async def stdio_wire(tmp: Path) -> AsyncIterator[Wire]:
    _, proc = await start_stdio(tmp)
    assert proc.stdout is not None and proc.stdin is not None
    wire = Wire(proc.stdout, proc.stdin, Pool())  # pyright: ignore[reportArgumentType]
    wire.start()
    try:
        yield wire
    finally:
        proc.stdin.close()
        async with asyncio.timeout(GUARD):
            await proc.wait()
        await wire.stop()


async def test_two_session_news_with_the_same_id_in_flight_both_speak(tmp_path: Path) -> None:
    """Found as two ``session/new`` with ``"id": null`` in one write: the transport watched
    requests by id, so the second response found no watch, the session never opened, and a
    ``session/load`` on it waited forever for its replay to be written."""
    new = {
        "jsonrpc": "2.0",
        "method": "session/new",
        "params": {"cwd": str(HERE), "mcpServers": []},
    }
    async with stdio_wire(tmp_path) as wire:
        for msg_id in (None, "same"):
            await wire.send([line({**new, "id": msg_id}), line({**new, "id": msg_id})], [])
        async with asyncio.timeout(GUARD):
            while len(wire.pool.sessions) < 5:  # "nope" and four learned from the answers
                wire.changed.clear()
                await wire.changed.wait()
        for sid in wire.pool.sessions[1:]:
            load = {"cwd": str(HERE), "sessionId": sid, "mcpServers": []}
            reply = await wire.call("session/load", load, f"load-{sid}", guard=GUARD)
            assert reply.get("result") == {}, reply


async def test_what_a_client_sends_reaches_the_log_bounded_and_on_one_line(tmp_path: Path) -> None:
    """Found as a ``session/cancel`` whose sessionId was a MiB of text: the warning naming it
    was a MiB long; and an extension notification named ``_x\\nFORGED ...`` wrote a line of
    the client's choosing into the log (log forging)."""
    huge = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "é" * (1 << 20)}}
    forged = {"jsonrpc": "2.0", "method": "_x\nFORGED ERROR root: pwned", "params": {}}
    async with stdio_wire(tmp_path) as wire:
        await wire.send([line(huge), line(forged)], [])
        reply = await wire.call("initialize", {"protocolVersion": 1}, "after", guard=GUARD)
        assert "result" in reply
    lines = (tmp_path / "stdio.log").read_text().splitlines()
    assert any("cancel for unknown session" in x for x in lines)
    assert any("ignoring extension notification" in x for x in lines)
    assert max(map(len, lines)) < 4096, max(map(len, lines))
    assert not any(x.startswith("FORGED") for x in lines), [x for x in lines if "FORGED" in x]
