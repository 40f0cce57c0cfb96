"""A client process for the fault tests, stdlib only: ``fault_client.py PATH SESSION MODE``.

It connects to the unix socket PATH (or, for a ``ws://`` url, over WebSocket with the
token in ``$FAULT_WS_TOKEN``: a hand-made handshake and masked frames), sends
``initialize`` and ``session/load SESSION`` and prints ``READY`` when it is where the
test wants to kill it:

- ``bound``: the bind's ``turn_state`` snapshot arrived; it keeps reading.
- ``replay``: its receive buffer is tiny and it stops reading right after the load, so
  the server is still writing its replay (a ring full of big tool results).
- ``approval``: it prompts ``quick``, so it is the driver, and says READY once the
  ``session/request_permission`` reached it; it never answers.
- ``stall``: bound, then it never reads again.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from collections.abc import Iterator
from urllib.parse import urlsplit

WS: list[bool] = []


def ws_frame(payload: bytes) -> bytes:
    """One masked text frame (a client's, RFC 6455)."""
    key = os.urandom(4)
    n = len(payload)
    head = struct.pack("!B", 0x81)
    if n < 126:
        head += struct.pack("!B", 0x80 | n)
    elif n < 1 << 16:
        head += struct.pack("!BH", 0x80 | 126, n)
    else:
        head += struct.pack("!BQ", 0x80 | 127, n)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def ws_connect(url: str, small: bool) -> socket.socket:
    parts = urlsplit(url)
    s = socket.create_connection((parts.hostname, parts.port))
    if small:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(
        f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += s.recv(1)
    assert b" 101 " in answer, answer
    return s


def ws_messages(s: socket.socket) -> Iterator[bytes]:
    f = s.makefile("rb")
    while head := f.read(2):
        n = head[1] & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", f.read(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", f.read(8))
        payload = f.read(n)
        if head[0] & 0x0F == 0x1:  # text (the server sends no fragments, no masks)
            yield payload


def send(s: socket.socket, id_: int, method: str, params: dict[str, object]) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
    s.sendall(ws_frame(line.encode()) if WS else (line + "\n").encode())


def main() -> None:
    path, session, mode = sys.argv[1:4]
    if path.startswith("ws://"):
        WS.append(True)
        s = ws_connect(path, mode == "replay")
        token = os.environ["FAULT_WS_TOKEN"]
        hello = {"protocolVersion": 1, "_meta": {"agent_channel.token": token}}
        send(s, 1, "initialize", hello)
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if mode == "replay":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(path)
        send(s, 1, "initialize", {"protocolVersion": 1})
    send(s, 2, "session/load", {"sessionId": session, "cwd": "/", "mcpServers": []})
    if mode == "replay":
        print("READY", flush=True)
        sys.stdin.read()  # until killed (stdin stays open)
        return
    reader = ws_messages(s) if WS else s.makefile("rb")
    prompted = False
    for line in reader:
        msg = json.loads(line)
        method = msg.get("method")
        if method == "_agent_channel/turn_state" and not prompted:
            if mode == "approval":
                prompted = True
                text = [{"type": "text", "text": f"quick approval {session}"}]
                send(s, 3, "session/prompt", {"sessionId": session, "prompt": text})
                continue
            print("READY", flush=True)
            if mode == "stall":
                sys.stdin.read()
                return
            prompted = True
        if mode == "approval" and method == "session/request_permission":
            print("READY", flush=True)  # never answered


if __name__ == "__main__":
    main()
