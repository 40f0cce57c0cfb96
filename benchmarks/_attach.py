"""What the attach benchmarks share: a raw JSON-RPC frame, a percentile, and their server
subprocess (the benchmark file itself with ``--serve ARGS``) up to its ``READY`` line."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any


def frame(msg_id: int, method: str, params: dict[str, Any]) -> bytes:
    """One JSON-RPC request, newline-terminated."""
    body = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
    return json.dumps(body).encode() + b"\n"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def start_server(
    script: str, *args: str, quiet: bool = False, src: str | None = None
) -> tuple[asyncio.subprocess.Process, list[str]]:
    """``script --serve ARGS`` (its log at ERROR; ``quiet``: stderr discarded; ``src``:
    first on its ``PYTHONPATH``), and its ``READY ...`` line's words."""
    env = {**os.environ, "AGENT_CHANNEL_ACP_LOG": "ERROR"}
    if src:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        script,
        "--serve",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL if quiet else None,
        env=env,
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = (await proc.stdout.readline()).decode().split()
    assert line[:1] == ["READY"], line
    return proc, line
