"""Fuzzing the stdio server's wire (issue 10): random and mutated JSON-RPC frames on its pipes.

``stdio --agent agents:react_agent`` gets batches of frames drawn by hypothesis (see
``fuzz_frames``), sent cut into random writes; after each batch the process is alive,
every request with a usable id got exactly one well-formed response and every other frame
that is not a JSON object an error with a null id (``fuzz_checker``). Afterwards: no
task, session or file descriptor more than before (``_agent_channel/debug`` with
``AGENT_CHANNEL_ACP_DEBUG=1``, ``/proc/<pid>/fd``), and a normal SDK client on the same
pipes still prompts, cancels and finishes a turn.

The short form runs in CI (a fixed seed); the long form (at least 10,000 frames) carries
the ``soak`` marker: ``uv run pytest -m soak tests/acp/stdio/test_fuzz_stdio.py -s``
prints the figures.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from acp.client.connection import ClientSideConnection
from attach_harness import AttachRecorder
from conftest import GUARD, HERE
from fuzz_checker import Wire, fds
from fuzz_frames import MAX_FRAME, Ids, Pool, batch, cuts
from fuzz_runs import (
    CI_EXAMPLES,
    OVERSIZE_EVERY,
    SOAK_EXAMPLES,
    SOAK_FRAMES,
    Figures,
    fuzz_settings,
    poll,
    without,
)
from fuzz_targets import start_stdio
from hypothesis import given
from hypothesis import strategies as st


def fuzz_stdio(tmp: Path, examples: int) -> Figures:
    figures = Figures("stdio")
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    run = loop.run_until_complete
    target, proc = run(start_stdio(tmp))
    assert proc.stdout is not None and proc.stdin is not None
    pool = Pool()
    wire = Wire(proc.stdout, proc.stdin, pool)  # pyright: ignore[reportArgumentType]
    ids = Ids()
    n = iter(range(1 << 30))

    async def call(method: str, params: Any) -> dict[str, Any]:
        reply = await wire.call(method, params, ids.unique(f"fz-{next(n)}"))
        assert "result" in reply, reply
        return reply["result"]

    async def debug() -> dict[str, int]:
        return await call("_agent_channel/debug", {})

    try:
        wire.start()
        run(call("initialize", {"protocolVersion": 1}))
        figures.before = {**run(debug()), "fds": fds(target.proc.pid)}
        for _ in range(2):
            run(call("session/new", {"cwd": str(HERE), "mcpServers": []}))

        @fuzz_settings(examples)
        @given(st.data())
        def example(data: st.DataObject) -> None:
            lines, kinds = batch(
                data.draw, pool, ids, attach=False, oversize=figures.examples % OVERSIZE_EVERY == 0
            )
            cut_at = cuts(data.draw, sum(map(len, lines)))
            run(wire.send(lines, cut_at))
            run(wire.settled(lambda k: wire.owed.methods.get(k) != "session/prompt"))
            wire.check()
            assert target.alive, target.log.read_text()[-2000:]
            figures.examples += 1
            figures.kinds.update(kinds)

        example()
        for sid in pool.sessions:  # turns still running end; then every prompt is answered
            run(wire.send([_cancel(sid)], []))
        run(wire.settled())
        wire.check()
        for sid in pool.sessions[1:]:
            run(wire.call("session/close", {"sessionId": sid}, ids.unique(f"close-{sid}")))
        base = without(figures.before, "fds")
        figures.after = run(
            poll(debug, lambda d: d == base, f"tasks or sessions leaked (before: {base})")
        )
        figures.after["fds"] = fds(target.proc.pid)
        assert figures.after["fds"] == figures.before["fds"], figures.line()
        wire.check()
        figures.add(wire)
        run(wire.stop())
        run(sdk_turns_stdio(proc))
        assert target.alive
        proc.stdin.close()
        assert run(asyncio.wait_for(proc.wait(), GUARD)) == 0
        return figures
    finally:
        if proc.returncode is None:
            proc.kill()
            run(proc.wait())
        loop.close()
        asyncio.set_event_loop(None)


def _cancel(sid: str) -> bytes:
    frame = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
    return json.dumps(frame).encode() + b"\n"


async def sdk_turns_stdio(proc: asyncio.subprocess.Process) -> None:
    """A normal client on the same pipes: a turn, a cancelled turn, a turn with a tool."""
    rec = AttachRecorder()
    conn = ClientSideConnection(rec, proc.stdin, proc.stdout)  # pyright: ignore[reportArgumentType]
    try:
        await _turns(conn, rec)
    finally:
        await conn.close()


async def _turns(conn: ClientSideConnection, rec: AttachRecorder) -> None:
    import acp

    async with asyncio.timeout(GUARD * 3):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
        r = await conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
        assert r.stop_reason == "end_turn"
        blocked = asyncio.ensure_future(
            conn.prompt(session_id=sid, prompt=[acp.text_block("block")])
        )
        await rec.wait_until(
            lambda: any(u["sessionUpdate"] == "tool_call" for u in rec.updates[sid])
        )
        await conn.cancel(session_id=sid)
        assert (await blocked).stop_reason == "cancelled"
        r = await conn.prompt(session_id=sid, prompt=[acp.text_block("quick")])
        assert r.stop_reason == "end_turn"
        await conn.close_session(session_id=sid)


def test_the_fuzzers_cap_is_the_transports() -> None:
    from agent_channel_acp.wire._transport import MAX_FRAME as PRODUCER_MAX

    assert MAX_FRAME == PRODUCER_MAX


def test_fuzz_stdio_short(tmp_path: Path) -> None:
    figures = fuzz_stdio(tmp_path, CI_EXAMPLES)
    print(figures.line())


@pytest.mark.soak
def test_fuzz_stdio_long(tmp_path: Path) -> None:
    figures = fuzz_stdio(tmp_path, SOAK_EXAMPLES)
    print(figures.line())
    assert figures.frames >= SOAK_FRAMES
