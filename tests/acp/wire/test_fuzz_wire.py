"""Fuzzing the wire of both servers (issue 10): random and mutated JSON-RPC frames.

For each server (``stdio`` on pipes; ``serve`` on its unix socket, and on TCP with the
token) hypothesis draws batches of frames (see ``fuzz_wire``), sends them cut into random
writes, and checks after each batch that the process is alive, that every request with a
usable id got exactly one well-formed response and every other frame that is not a JSON
object an error with a null id. Afterwards: no task, connection or file descriptor more
than before (the server's ``_agent_channel/debug`` counts with ``AGENT_CHANNEL_ACP_DEBUG=1``,
``/proc/<pid>/fd``), and a normal SDK client still prompts, cancels and finishes a turn.

The short forms run in CI (a deterministic seed: ``derandomize``); the long forms (at least
10,000 frames per server) carry the ``soak`` marker: ``uv run pytest -m soak
tests/acp/test_fuzz_wire.py -s`` prints the figures.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from acp.client.connection import ClientSideConnection
from attach_harness import AttachRecorder
from conftest import GUARD, HERE
from fuzz_wire import (
    MAX_FRAME,
    Ids,
    Pool,
    Target,
    Wire,
    batch,
    cuts,
    fds,
    start_serve,
    start_stdio,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

T = TypeVar("T")

CI_EXAMPLES = 120
SOAK_EXAMPLES = 700
SOAK_FRAMES = 10_000
OVERSIZE_EVERY = 100
"""One example in this many also sends a frame over the cap (9 MiB through the pipe)."""


@dataclass
class Figures:
    server: str
    frames: int = 0
    examples: int = 0
    kinds: Counter[str] = field(default_factory=Counter[str])
    answered: int = 0
    null_errors: int = 0
    notifications: int = 0
    before: dict[str, int] = field(default_factory=dict[str, int])
    after: dict[str, int] = field(default_factory=dict[str, int])

    def add(self, wire: Wire) -> None:
        self.frames += wire.frames_sent
        self.answered += sum(wire.got.values())
        self.null_errors += wire.null_errors
        self.notifications += wire.notifications

    def line(self) -> str:
        return json.dumps(
            {
                "server": self.server,
                "frames": self.frames,
                "examples": self.examples,
                "kinds": dict(self.kinds),
                "responses_by_id": self.answered,
                "null_id_errors": self.null_errors,
                "notifications": self.notifications,
                "before": self.before,
                "after": self.after,
            }
        )


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,  # a fixed seed: CI runs the same frames every time
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


async def poll(probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], what: str) -> T:
    """Ask ``probe`` until ``ok`` holds (the guard catches a leak that never goes away)."""
    value = await probe()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GUARD * 3
    while not ok(value) and loop.time() < deadline:
        await asyncio.sleep(0.05)
        value = await probe()
    assert ok(value), f"{what}: {value}"
    return value


def without(counts: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in counts.items() if k not in keys}


# -- stdio --------------------------------------------------------------------------------------


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


# -- serve (unix socket, TCP) ---------------------------------------------------------------------


def fuzz_serve(tmp: Path, examples: int, *, tcp: bool) -> Figures:
    target = start_serve(tmp, tcp=tcp)
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


# -- the runs -----------------------------------------------------------------------------------


def test_the_fuzzers_cap_is_the_transports() -> None:
    from agent_channel_acp.wire._transport import MAX_FRAME as PRODUCER_MAX

    assert MAX_FRAME == PRODUCER_MAX


def test_fuzz_stdio_short(tmp_path: Path) -> None:
    figures = fuzz_stdio(tmp_path, CI_EXAMPLES)
    print(figures.line())


def test_fuzz_serve_unix_short(tmp_path: Path) -> None:
    figures = fuzz_serve(tmp_path, CI_EXAMPLES, tcp=False)
    print(figures.line())


def test_fuzz_serve_tcp_short(tmp_path: Path) -> None:
    figures = fuzz_serve(tmp_path, CI_EXAMPLES // 4, tcp=True)
    print(figures.line())


@pytest.mark.soak
def test_fuzz_stdio_long(tmp_path: Path) -> None:
    figures = fuzz_stdio(tmp_path, SOAK_EXAMPLES)
    print(figures.line())
    assert figures.frames >= SOAK_FRAMES


@pytest.mark.soak
def test_fuzz_serve_unix_long(tmp_path: Path) -> None:
    figures = fuzz_serve(tmp_path, SOAK_EXAMPLES, tcp=False)
    print(figures.line())
    assert figures.frames >= SOAK_FRAMES


@pytest.mark.soak
def test_fuzz_serve_tcp_long(tmp_path: Path) -> None:
    figures = fuzz_serve(tmp_path, SOAK_EXAMPLES * 4 // 3, tcp=True)
    print(figures.line())
    assert figures.frames >= SOAK_FRAMES
