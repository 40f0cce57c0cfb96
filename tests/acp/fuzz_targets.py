"""The servers under fuzz, as subprocesses: ``stdio --agent agents:react_agent`` on pipes,
and ``serve --demo`` on its unix socket, or on TCP or WebSocket with the token.

They run with ``AGENT_CHANNEL_ACP_DEBUG=1`` (``fuzz_env``) so ``_agent_channel/debug``
reports their task and connection counts. Driving is asyncio on one loop the test owns
(hypothesis calls an example synchronously).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import GUARD, HERE, agent_env, raw_agent
from fuzz_checker import Wire
from fuzz_frames import JSON, Pool


@dataclass
class Target:
    """A server subprocess under fuzz: how to reach it, and its log."""

    kind: str  # "stdio" | "unix" | "tcp" | "ws"
    proc: subprocess.Popen[bytes]
    log: Path
    transport: JSON = field(default_factory=dict[str, Any])
    announced: str = ""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    async def connect(self, pool: Pool) -> Wire:
        if self.kind == "stdio":
            raise RuntimeError("stdio has one wire: stdio_wire()")
        if self.kind == "unix":
            reader, writer = await asyncio.open_unix_connection(
                self.transport["path"], limit=1 << 24
            )
        elif self.kind == "ws":  # the clients' own WebSocket client: one message per line
            from agent_channel_acp.wire._ws import ws_streams

            reader, writer = await ws_streams(
                self.transport["url"], reader=asyncio.StreamReader(1 << 24)
            )
        else:
            reader, writer = await asyncio.open_connection(
                self.transport["host"], self.transport["port"], limit=1 << 24
            )
        wire = Wire(reader, writer, pool)
        wire.start()
        if self.kind in ("tcp", "ws"):
            token = {"agent_channel.token": self.transport["token"]}
            reply = await wire.call("initialize", {"protocolVersion": 1, "_meta": token}, "auth")
            assert "result" in reply, reply
        return wire

    def stop(self) -> int:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(GUARD)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(GUARD)


def fuzz_env(rt: Path, level: str = "INFO", debug: bool = True) -> dict[str, str]:
    return agent_env(
        AGENT_CHANNEL_ACP_DEBUG="1" if debug else "0",
        AGENT_CHANNEL_RUNTIME_DIR=str(rt),
        AGENT_CHANNEL_DEMO_TOOL_SECONDS="0",
        AGENT_CHANNEL_ACP_LOG=level,
    )


async def start_stdio(tmp: Path) -> tuple[Target, asyncio.subprocess.Process]:
    log = tmp / "stdio.log"
    with log.open("wb") as err:
        proc = await raw_agent(fuzz_env(tmp / "rt"), stderr=err, cwd=HERE, limit=1 << 24)
    return Target("stdio", _Popenish(proc), log), proc  # pyright: ignore[reportArgumentType]


class _Popenish:
    """The bits of ``Popen`` a ``Target`` uses, over an asyncio subprocess."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self.pid = proc.pid

    def poll(self) -> int | None:
        return self._proc.returncode

    def send_signal(self, sig: int) -> None:
        self._proc.send_signal(sig)

    def kill(self) -> None:
        self._proc.kill()

    def wait(self, timeout: float) -> int:
        raise NotImplementedError("await the asyncio process instead")


def start_serve(
    tmp: Path, *, tcp: bool, level: str = "INFO", debug: bool = True, ws: bool = False
) -> Target:
    """``agent-channel-acp serve --demo`` (unix socket, TCP with the token, or with ``ws``
    WebSocket with the token); its runtime directory is ``tmp/rt``, its log
    ``tmp/unix.log``, ``tmp/tcp.log`` or ``tmp/ws.log``, its stdout the announcement
    (``Target.announced``)."""
    kind = "ws" if ws else "tcp" if tcp else "unix"
    log = tmp / f"{kind}.log"
    rt = tmp / "rt"
    where = ["--port", "0"] if tcp else ["--ws", "0"] if ws else []
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent_channel_acp", "serve", "--demo", "--json", *where],
            env=fuzz_env(rt, level, debug),
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=HERE,
        )
    line = _first_line(proc)
    assert line, f"serve did not start: {log.read_text()}"
    announced = json.loads(line)
    record = json.loads(Path(announced["record"]).read_text())
    transport = record["ws"] if ws else record["transport"]
    return Target(kind, proc, log, transport, announced=line)


def _first_line(proc: subprocess.Popen[bytes]) -> str:
    import threading

    out: list[bytes] = []
    stdout = proc.stdout
    assert stdout is not None
    reader = threading.Thread(target=lambda: out.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(GUARD * 3)
    return out[0].decode() if out else ""
