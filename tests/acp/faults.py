"""Fault injection helpers (issue 10): the real ``agent-channel-acp serve`` as an asyncio
subprocess behind the attach harness's ``Server``, raw stdlib client subprocesses to kill,
and the server's resident memory.

``fault_client.py`` is the killed client: stdlib only (a killed client costs no SDK
import), it binds with ``session/load`` and says ``READY`` at the moment the test wants to
kill it (see its modes).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import attach_harness
from agents import GATES_ENV
from attach_harness import Server
from conftest import GUARD, HERE, agent_env

CLIENT = HERE / "fault_client.py"


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


@asynccontextmanager
async def real_serve(*args: str, rt: Path | None = None) -> AsyncIterator[Server]:
    """``agent-channel-acp serve --json --agent agents:attach_agent ARGS`` on a unix socket in
    its own runtime directory; SIGTERM (if still alive) when the block ends."""
    rt = rt or Path(tempfile.mkdtemp(prefix="acp-rt-"))
    rt.chmod(0o700)
    over_ws = attach_harness.TRANSPORT == "ws"
    if over_ws and "--ws" not in args:
        args = ("--ws", "0", *args)
    gates = Path(tempfile.mkdtemp(prefix="acp-gates-"))
    log = gates / "serve.log"  # its stderr: no fault may leave a traceback there
    err = log.open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent_channel_acp",
        "serve",
        "--json",
        "--agent",
        "agents:attach_agent",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=err,
        env=agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt), **{GATES_ENV: str(gates)}),
        cwd=HERE,
    )
    assert proc.stdout is not None
    with anyio.fail_after(GUARD * 3):
        line = await proc.stdout.readline()
    assert line, f"serve did not start (exit status {proc.returncode})"
    announced = json.loads(line)
    record = Path(announced["record"])
    ws = json.loads(record.read_text()).get("ws") if over_ws else None  # noqa: ASYNC240
    server = Server(Path(announced["listen"]["path"]), [], proc, gates)
    if ws is not None:
        server.ws = (ws["url"], ws["token"])
    lister = await server.connect()
    with anyio.fail_after(GUARD * 3):
        # polling the server's answer: the run adds itself on the server's own loop
        while not (listed := (await lister.ext("list"))["executions"]):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    server.ids = [e["id"] for e in listed]
    try:
        yield server
    finally:
        await server.stop(term=True)
        err.close()
        text = log.read_text(errors="replace")
        sys.stderr.write(text)
        assert "Traceback" not in text, text[-4000:]


class Killable:
    """A ``fault_client.py`` subprocess that has said ``READY``."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    def kill(self) -> None:
        with suppress(ProcessLookupError):
            self.proc.kill()

    async def reaped(self) -> int:
        with anyio.fail_after(GUARD):
            return await self.proc.wait()


async def fault_client(target: Server | Path, session_id: str, mode: str) -> Killable:
    """Start ``fault_client.py PATH SESSION MODE`` and wait for its ``READY`` (PATH: the
    server's WebSocket url, with its token, when its clients go over WebSocket)."""
    path: Path | str = target if isinstance(target, Path) else target.path
    extra: dict[str, str] = {}
    if isinstance(target, Server) and target.ws is not None:
        path, extra["FAULT_WS_TOKEN"] = target.ws
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-S",  # no site: a bare interpreter starts in a few ms
        str(CLIENT),
        str(path),
        session_id,
        mode,
        stdin=asyncio.subprocess.PIPE,  # held open: a client in ``replay``/``stall`` waits on it
        stdout=asyncio.subprocess.PIPE,
        env=agent_env(**extra),
    )
    assert proc.stdout is not None
    with anyio.fail_after(GUARD * 3):
        line = await proc.stdout.readline()
    assert line.strip() == b"READY", (mode, line, await proc.wait())
    return Killable(proc)


def half_open(target: Server | Path, *, small_buffer: bool = False) -> socket.socket:
    """A socket that connects and then sends nothing (and reads nothing). Over WebSocket:
    a bare TCP connection, or with ``small_buffer`` one past the handshake whose
    ``sendall`` sends each line as a masked frame (the token added to ``initialize``)."""
    if isinstance(target, Server) and target.ws is not None:
        url, token = target.ws
        if not small_buffer:
            host, port = url.split("//")[1].split("/")[0].split(":")
            return socket.create_connection((host, int(port)))
        return _WsSocket(url, token)
    path = target if isinstance(target, Path) else target.path
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if small_buffer:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(str(path))
    return s


class _WsSocket(socket.socket):
    """A stalled WebSocket client: past the handshake, its lines sent as frames."""

    def __init__(self, url: str, token: str) -> None:
        from fault_client import ws_connect

        raw = ws_connect(url, small=True)
        super().__init__(fileno=raw.detach())
        self._token = token

    def sendall(self, data: Any, flags: int = 0, /) -> None:
        from fault_client import ws_frame

        for line in bytes(data).splitlines():
            message = json.loads(line)
            if message.get("method") == "initialize":
                message["params"]["_meta"] = {"agent_channel.token": self._token}
            super().sendall(ws_frame(json.dumps(message).encode()))


def one_result_each(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call of a full ``messages`` read has exactly one result."""
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    calls = [
        t["id"] for m in messages if m["role"] == "assistant" for t in m.get("tool_calls") or []
    ]
    assert sorted(results) == sorted(calls), messages


def frame(id_: int, method: str, params: dict[str, object]) -> bytes:
    return (
        json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + "\n"
    ).encode()
