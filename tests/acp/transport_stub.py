"""A stand-in attach server for the transport tests: each connection gets a stdio-mode server.

``python -m transport_stub [--socket PATH | --port N]`` hosts it exactly as
``agent-channel-acp serve`` does (same listener, discovery record and
shutdown), so A1/A2 are proven independently of the execution hub. Prints the
discovery record as one JSON line once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agent_channel_acp import AcpServer, serve
from agent_channel_acp.hosting._serve import host
from agent_channel_acp.wire._discovery import Record
from agents import react_agent


class PerConnection:
    async def serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await serve(AcpServer(react_agent), reader, writer)

    def executions(self) -> list[dict[str, Any]]:
        return [{"id": "stub", "title": "stub", "status": "running"}]

    async def aclose(self) -> None:
        return None


def announce(record: Record) -> None:
    print(json.dumps({**record.to_json(), "path": str(record.path)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", type=Path)
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    try:
        served = host(PerConnection(), socket_path=args.socket, port=args.port, announce=announce)
        asyncio.run(served)
    except Exception as e:  # what serve prints: one line
        print(f"stub: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
