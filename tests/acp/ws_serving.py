"""Helpers for the WebSocket attach tests: ``serve --ws`` as a subprocess, and frames over
the verbs' own WebSocket client (``agent_channel_acp.wire._ws``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from agent_channel_acp.wire._ws import WsClient
from conftest import GUARD, HERE
from serving import ctl, env, first_line, stop

TOKEN_KEY = "agent_channel.token"
SERVE = (sys.executable, "-m", "agent_channel_acp", "serve", "--demo", "--ws", "0")


@dataclass
class Served:
    proc: subprocess.Popen[str]
    announced: dict[str, Any]
    rt: Path
    log: Path

    @property
    def record(self) -> dict[str, Any]:
        return json.loads(Path(self.announced["record"]).read_text())

    @property
    def url(self) -> str:
        return self.announced["ws"]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])


@contextmanager
def ws_serve(rt: Path, *args: str) -> Iterator[Served]:
    """``serve --json --demo --ws 0 ARGS``, its stderr in a file (read by the log tests)."""
    log = rt.parent / f"{rt.name}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent_channel_acp", "serve", "--json", "--demo", *args],
            env=env(rt, AGENT_CHANNEL_DEMO_TOOL_SECONDS="0.05"),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=HERE,
        )
        try:
            line = first_line(proc)
            assert line, f"serve did not start: {log.read_text()}"
            yield Served(proc, json.loads(line), rt, log)
        finally:
            stop(proc)


def private_dir(tmp_path: Path) -> Path:
    path = tmp_path / "rt"
    path.mkdir(mode=0o700)
    return path


def request(msg_id: Any, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()


async def call(ws: WsClient, msg_id: Any, method: str, params: dict[str, Any]) -> Any:
    """Send one request; its answer (notifications skipped), or None once closed."""
    await ws.send(request(msg_id, method, params))
    with anyio.fail_after(GUARD):
        while (message := await ws.recv()) is not None:
            frame = json.loads(message)
            if frame.get("id") == msg_id and "method" not in frame:
                return frame
    return None


def hello(token: str | None) -> dict[str, Any]:
    return {"protocolVersion": 1, "_meta": {TOKEN_KEY: token}} if token else {"protocolVersion": 1}


async def handshake(port: int, headers: dict[str, str], path: str = "/acp") -> str:
    """A hand-made WebSocket opening request; the status line the server answers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"GET {path} HTTP/1.1", "Upgrade: websocket", "Connection: Upgrade"]
    lines += ["Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    try:
        with anyio.fail_after(GUARD):
            return (await reader.readline()).decode().strip()
    finally:
        writer.close()


def texts(served: Served, execution_id: str) -> str:
    run = ctl(served.rt, "messages", execution_id, "--all", "--json")
    assert run.returncode == 0, run.stderr
    return run.stdout


def status(rt: Path, *args: str) -> str:
    (e,) = json.loads(ctl(rt, "ls", *args, "--json").stdout)["servers"][0]["executions"]
    return e["status"]


def only_id(served: Served) -> str:
    (e,) = json.loads(ctl(served.rt, "ls", "--json").stdout)["servers"][0]["executions"]
    return e["id"]
