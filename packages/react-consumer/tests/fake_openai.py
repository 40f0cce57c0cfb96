"""A small local server speaking the chat-completions streaming wire format (SSE).

It runs in a thread, so it serves tests on asyncio and trio alike. Each request
takes the next planned response: a list of chunks (ending the stream properly),
a list cut off with the connection dropped, or chunks followed by a hang that
only ends when the client disconnects (which ``disconnected`` records).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal


@dataclass
class Planned:
    chunks: list[dict[str, Any]]
    ending: Literal["done", "cut", "hang"] = "done"


@dataclass
class FakeServer:
    plan: list[Planned] = field(default_factory=list[Planned])
    requests: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    disconnected: threading.Event = field(default_factory=threading.Event)
    url: str = ""


def chunk(
    content: str | None = None,
    *,
    finish: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning: str | None = None,
) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def usage_chunk(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def serve() -> tuple[FakeServer, ThreadingHTTPServer]:
    state = FakeServer()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends when the connection closes

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.requests.append(json.loads(body))
            planned = state.plan.pop(0)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for c in planned.chunks:
                self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
                self.wfile.flush()
            if planned.ending == "done":
                self.wfile.write(b"data: [DONE]\n\n")
            elif planned.ending == "hang":
                # Block until the client goes away: recv returns b"" (or fails) on close.
                try:
                    while self.connection.recv(1024):
                        pass
                except OSError:
                    pass
                state.disconnected.set()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
    return state, httpd
