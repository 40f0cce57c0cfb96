"""Helpers for the attach suite's black-box tests: ``agent-channel-acp serve`` as a subprocess
and the shell verbs run as subprocesses, all on one runtime directory.

Waiting is polling an observable condition (a verb's answer) under the suite's hang guard;
nothing here asserts a duration.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from acp.client.connection import ClientSideConnection
from conftest import GUARD, HERE, Recorder, agent_env

POLL = 0.05
"""Seconds between two looks at a condition being waited for."""

TRANSPORT = "unix"
"""``"ws"``: ``serve`` also listens over WebSocket (``--ws 0``) and :func:`observe` and
:func:`connect` go there (set per test by the ``transport`` fixture)."""


@dataclass
class Serving:
    proc: subprocess.Popen[str]
    announced: dict[str, Any]
    rt: Path

    @property
    def record(self) -> dict[str, Any]:
        return json.loads(Path(self.announced["record"]).read_text())

    def ids(self, count: int = 1) -> list[str]:
        """The execution ids, once ``count`` of them are listed."""
        found: list[str] = []

        def listed() -> bool:
            nonlocal found
            found = [e["id"] for e in executions(self.rt)]
            return len(found) >= count

        wait_for(listed, f"{count} executions listed")
        return found

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(GUARD)


def env(rt: Path, **extra: str) -> dict[str, str]:
    return agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt), **extra)


@contextmanager
def serving(rt: Path, *args: str, **extra_env: str) -> Iterator[Serving]:
    """``agent-channel-acp serve --json ARGS`` until the block ends (then SIGTERM)."""
    ws = ["--ws", "0"] if TRANSPORT == "ws" else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_channel_acp", "serve", "--json", *ws, *args],
        env=env(rt, **extra_env),
        stdout=subprocess.PIPE,
        stderr=None,
        text=True,
        cwd=HERE,
    )
    try:
        line = first_line(proc)
        assert line, f"serve did not start (exit status {proc.poll()})"
        yield Serving(proc, json.loads(line), rt)
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM a `serve` still running (killed past the guard) and close its stdout."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(GUARD)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(GUARD)
    if proc.stdout is not None:
        proc.stdout.close()


def first_line(proc: subprocess.Popen[str]) -> str:
    """The process's first stdout line, read by a thread under the hang guard."""
    stdout = proc.stdout
    assert stdout is not None
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(GUARD)
    return out[0] if out else ""


def ctl(rt: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run one verb: ``agent-channel-acp ARGS``."""
    return subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", *args],
        env=env(rt),
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=GUARD,
    )


def ctl_json(rt: Path, *args: str) -> Any:
    run = ctl(rt, *args, "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def observe(rt: Path, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One extension request to the (only) server in ``rt``, through the SDK's client side.

    For watching what the verbs did: in-process, so polling costs no interpreter start.
    """
    (path,) = rt.glob("*.json")

    async def ask() -> dict[str, Any]:
        reader, writer, meta = await connect(json.loads(path.read_text()))
        conn = ClientSideConnection(Recorder(), writer, reader)  # pyright: ignore[reportArgumentType]
        try:
            async with asyncio.timeout(GUARD):
                await conn.initialize(protocol_version=1, **meta)
                return await conn.ext_method(method, params)
        finally:
            await conn.close()
            writer.close()

    return asyncio.run(ask())


async def connect(
    record: dict[str, Any],
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, dict[str, str]]:
    """Streams to the server of ``record`` (a discovery record's JSON) over :data:`TRANSPORT`,
    and the ``initialize`` ``_meta`` to send (the token, where one is needed)."""
    transport = record["transport"]
    if TRANSPORT == "ws":
        from agent_channel_acp.wire._ws import ws_streams

        transport = record["ws"]
        reader, writer = await ws_streams(transport["url"], reader=asyncio.StreamReader(1 << 24))
    elif transport["kind"] == "unix":
        reader, writer = await asyncio.open_unix_connection(transport["path"], limit=1 << 24)
    else:
        reader, writer = await asyncio.open_connection(
            transport["host"], transport["port"], limit=1 << 24
        )
    meta = {"agent_channel.token": transport["token"]} if "token" in transport else {}
    return reader, writer, meta


def executions(rt: Path) -> list[dict[str, Any]]:
    return observe(rt, "agent_channel/list", {})["executions"]


def execution(rt: Path, execution_id: str) -> dict[str, Any]:
    return next(e for e in executions(rt) if e["id"] == execution_id)


def messages(rt: Path, target: str, *, every: bool = False, full: bool = False) -> list[Any]:
    params = {"sessionId": target, "all": every, "full": full}
    return observe(rt, "agent_channel/messages", params)["messages"]


def wait_for(predicate: Callable[[], object], what: str) -> None:
    """Poll ``predicate`` until it holds; the guard only catches hangs."""
    deadline = time.monotonic() + GUARD * 3
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for: {what}"
        time.sleep(POLL)


def one_line_failure(run: subprocess.CompletedProcess[str], *needles: str) -> None:
    """A verb failed as promised: non-zero, one line on stderr, no traceback."""
    assert run.returncode != 0, run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@asynccontextmanager
async def bridged(rt: Path, *args: str) -> AsyncIterator[tuple[ClientSideConnection, Recorder]]:
    """``agent-channel-acp bridge ARGS`` as a subprocess, an SDK client on its stdio,
    initialized."""
    from acp import spawn_agent_process

    rec = Recorder()
    async with spawn_agent_process(
        rec,
        sys.executable,
        "-m",
        "agent_channel_acp",
        "bridge",
        *args,
        env=env(rt),
        cwd=str(HERE),
        transport_kwargs={"stderr": None},
        observers=[rec.observe],
    ) as (conn, _proc):
        with anyio.fail_after(GUARD):
            await conn.initialize(protocol_version=1)
        yield conn, rec
