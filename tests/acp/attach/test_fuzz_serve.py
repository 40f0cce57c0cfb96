"""Fuzzing the attach server's wire (issue 10): ``serve --demo`` on its unix socket, on TCP
with the token, and over WebSocket with the token (``[unix]``, ``[tcp]``, ``[ws]``).

Each example is one connection (bound to the served execution first, or not) that gets a
batch of frames drawn by hypothesis (see ``fuzz_frames``), cut into random writes, then
EOF; the server answers what it read and closes (over WebSocket, which has no half-close,
the client waits for every answer, then closes; each line is one message, through the
clients' own WebSocket client). After each: the process is alive, every
request with a usable id got exactly one well-formed response and every other frame that
is not a JSON object an error with a null id (``fuzz_checker``). Afterwards: no task,
connection, binding or file descriptor more than before (``_agent_channel/debug`` with
``AGENT_CHANNEL_ACP_DEBUG=1``, ``/proc/<pid>/fd``), the execution waits for its operator
again, and a normal SDK client binds, prompts, cancels and sees a turn finish.

The short forms run in CI (a fixed seed); the long forms (at least 10,000 frames each)
carry the ``soak`` marker: ``uv run pytest -m soak tests/acp/attach/test_fuzz_serve.py -s``
prints the figures.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from acp.client.connection import ClientSideConnection
from agent_channel_acp.wire._ws import ws_streams
from attach_harness import AttachRecorder
from conftest import GUARD, HERE
from fuzz_checker import Wire, fds
from fuzz_frames import Ids, Pool, batch, cuts
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
from fuzz_targets import Target, start_serve
from hypothesis import given
from hypothesis import strategies as st


def fuzz_serve(tmp: Path, examples: int, kind: str) -> Figures:
    target = start_serve(tmp, tcp=kind == "tcp", ws=kind == "ws")
    figures = Figures(target.kind)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    run = loop.run_until_complete
    pool = Pool()
    n = iter(range(1 << 30))

    async def ask(method: str, params: Any) -> dict[str, Any]:
        wire = await target.connect(pool)
        try:
            reply = await wire.call(method, params, f"ask-{next(n)}")
            assert "result" in reply, reply
            return reply["result"]
        finally:
            wire.writer.close()
            await wire.stop()

    async def debug() -> dict[str, int]:
        return await ask("_agent_channel/debug", {})

    async def idle() -> list[dict[str, Any]]:
        return (await ask("_agent_channel/list", {}))["executions"]

    try:
        (execution,) = run(
            poll(idle, lambda es: [e["status"] for e in es] == ["waiting for operator"], "idle")
        )
        pool.sessions.append(execution["id"])
        pool.protect.add(execution["id"])
        figures.before = {**run(debug()), "fds": fds(target.proc.pid)}

        async def one(lines: list[bytes], cut_at: list[int], prologue: bytes | None) -> Wire:
            wire = await target.connect(pool)
            if prologue is not None:
                await wire.send([prologue], [])
            await wire.send(lines, cut_at)
            if target.kind == "ws":
                # A WebSocket has no half-close (RFC 6455 5.5.1: no data after a close):
                # every answer is awaited, then the client closes and the server follows.
                await wire.settled()
                wire.writer.close()
            else:
                wire.writer.write_eof()  # the server answers what it read, then closes
                await wire.settled()
            assert wire.reading is not None
            async with asyncio.timeout(GUARD * 3):
                await asyncio.shield(wire.reading)  # the server closed: nothing more comes
            wire.writer.close()
            return wire

        @fuzz_settings(examples)
        @given(st.data())
        def example(data: st.DataObject) -> None:
            ids = Ids()
            prologue = None
            how = data.draw(st.sampled_from(["none", "load", "observe", "new"]))
            if how != "none":
                msg_id = ids.unique("prologue")
                prologue = _bind(how, execution["id"], msg_id)
            lines, kinds = batch(
                data.draw, pool, ids, attach=True, oversize=figures.examples % OVERSIZE_EVERY == 0
            )
            cut_at = cuts(data.draw, sum(map(len, lines)))
            wire = run(one(lines, cut_at, prologue))
            wire.check()
            assert target.alive, target.log.read_text()[-2000:]
            figures.add(wire)
            figures.examples += 1
            figures.kinds.update(kinds)

        example()
        base = without(figures.before, "fds")
        figures.after = run(
            poll(debug, lambda d: without(d, "tasks") == without(base, "tasks"), "bindings leaked")
        )
        run(poll(idle, lambda es: es[0]["status"] == "waiting for operator", "idle again"))
        figures.after = run(poll(debug, lambda d: d == base, "tasks or connections leaked"))

        async def count_fds() -> int:
            return fds(target.proc.pid)

        # "before" may still count the socket of the debug request just answered (the
        # server closes it a loop step after the client does), so it is an upper bound.
        figures.after["fds"] = run(
            poll(count_fds, lambda f: f <= figures.before["fds"], "file descriptors leaked")
        )
        run(sdk_turns_attach(target, execution["id"]))
        assert target.alive
        return figures
    finally:
        status = target.stop()
        loop.close()
        asyncio.set_event_loop(None)
        assert status == 0, target.log.read_text()[-2000:]


def _bind(how: str, execution_id: str, msg_id: Any) -> bytes:
    params: dict[str, Any] = {"cwd": str(HERE), "mcpServers": []}
    if how == "new":
        method = "session/new"
    else:
        method = "session/load"
        params["sessionId"] = execution_id
        if how == "observe":
            params["_meta"] = {"agent_channel.observe": True}
    frame = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
    return json.dumps(frame).encode() + b"\n"


async def sdk_turns_attach(target: Target, execution_id: str) -> None:
    """A normal client binds, prompts, cancels, and sees the agent finish a turn on its prompt."""
    if target.kind == "unix":
        reader, writer = await asyncio.open_unix_connection(target.transport["path"], limit=1 << 24)
        meta: dict[str, Any] = {}
    elif target.kind == "ws":
        reader = asyncio.StreamReader(1 << 24)
        reader, writer = await ws_streams(target.transport["url"], reader=reader)
        meta = {"agent_channel.token": target.transport["token"]}
    else:
        reader, writer = await asyncio.open_connection(
            target.transport["host"], target.transport["port"], limit=1 << 24
        )
        meta = {"agent_channel.token": target.transport["token"]}
    rec = AttachRecorder()
    conn = ClientSideConnection(rec, writer, reader, observers=[rec.observe])  # pyright: ignore[reportArgumentType]

    async def prompt(text: str) -> Any:
        params = {"sessionId": execution_id, "prompt": [{"type": "text", "text": text}]}
        return await conn._conn.send_request("session/prompt", params)  # pyright: ignore[reportPrivateUsage]

    try:
        async with asyncio.timeout(GUARD * 3):
            await conn.initialize(protocol_version=1, **meta)
            load = {"cwd": str(HERE), "sessionId": execution_id, "mcpServers": []}
            await conn._conn.send_request("session/load", load)  # pyright: ignore[reportPrivateUsage]
            await rec.wait_until(lambda: rec.states(execution_id))
            assert (await prompt("first after the fuzz"))["stopReason"] == "end_turn"
            await conn.cancel(session_id=execution_id)
            assert (await prompt("second after the fuzz"))["stopReason"] == "end_turn"
            await rec.wait_until(lambda: "second after the fuzz" in rec.texts(execution_id))
            await rec.wait_until(lambda: rec.states(execution_id)[-1] != "started")
    finally:
        await conn.close()
        writer.close()


SHORT = {"unix": CI_EXAMPLES, "tcp": CI_EXAMPLES // 4, "ws": CI_EXAMPLES // 4}
LONG = {"unix": SOAK_EXAMPLES, "tcp": SOAK_EXAMPLES * 4 // 3, "ws": SOAK_EXAMPLES * 4 // 3}


@pytest.mark.parametrize("kind", ["unix", "tcp", "ws"])
def test_fuzz_serve_short(tmp_path: Path, kind: str) -> None:
    figures = fuzz_serve(tmp_path, SHORT[kind], kind)
    print(figures.line())


@pytest.mark.soak
@pytest.mark.parametrize("kind", ["unix", "tcp", "ws"])
def test_fuzz_serve_long(tmp_path: Path, kind: str) -> None:
    figures = fuzz_serve(tmp_path, LONG[kind], kind)
    print(figures.line())
    assert figures.frames >= SOAK_FRAMES
