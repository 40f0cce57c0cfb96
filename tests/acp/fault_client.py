"""A client process for the fault tests, stdlib only: ``fault_client.py PATH SESSION MODE``.

It connects to the unix socket PATH, sends ``initialize`` and ``session/load SESSION``
and prints ``READY`` when it is where the test wants to kill it:

- ``bound``: the bind's ``turn_state`` snapshot arrived; it keeps reading.
- ``replay``: its receive buffer is tiny and it stops reading right after the load, so
  the server is still writing its replay (a ring full of big tool results).
- ``approval``: it prompts ``quick``, so it is the driver, and says READY once the
  ``session/request_permission`` reached it; it never answers.
- ``stall``: bound, then it never reads again.
"""

from __future__ import annotations

import json
import socket
import sys


def send(s: socket.socket, id_: int, method: str, params: dict[str, object]) -> None:
    s.sendall(
        (
            json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + "\n"
        ).encode()
    )


def main() -> None:
    path, session, mode = sys.argv[1:4]
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
    reader = s.makefile("rb")
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
