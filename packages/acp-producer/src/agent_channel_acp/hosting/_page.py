"""The web console's files, served beside ``/acp`` by the WebSocket listener (:mod:`._asgi`).

Only the files of the package's ``page/`` directory are served, by name (a request path is
looked up in a fixed table built at import, so ``..``, encoded slashes and symlinks can
never reach anything else); ``/`` is ``index.html``. The page reads its token from the URL
fragment, which browsers never send, so no token reaches a request line or a log. Every
answer carries a strict CSP (scripts and styles of this origin only, WebSocket to this
origin only), ``nosniff``, ``no-referrer`` and ``no-store``.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

PAGE = "page"
"""The package data directory the web console is built into (``packages/acp-producer/web``)."""

TYPES = {
    ".html": b"text/html; charset=utf-8",
    ".js": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
    ".png": b"image/png",
    ".svg": b"image/svg+xml",
}
"""The content types of what the page ships; any other file is not served."""


def _files() -> dict[str, tuple[bytes, bytes]]:
    """Request path -> (content type, bytes), for every file the page ships."""
    found: dict[str, tuple[bytes, bytes]] = {}
    root = files("agent_channel_acp.hosting").joinpath(PAGE)
    if not root.is_dir():
        return found
    for item in root.iterdir():
        suffix = "." + item.name.rsplit(".", 1)[-1] if "." in item.name else ""
        if item.is_file() and suffix in TYPES:
            found["/" + item.name] = (TYPES[suffix], item.read_bytes())
    if "/index.html" in found:
        found["/"] = found["/index.html"]
    return found


_FILES = _files()


def _headers(scope: Any, content_type: bytes, length: int) -> list[tuple[bytes, bytes]]:
    host = dict(scope.get("headers") or []).get(b"host", b"")
    ws = b"wss" if scope.get("scheme") == "https" else b"ws"
    csp = (
        b"default-src 'self'; connect-src 'self' " + ws + b"://" + host + b"; "
        b"img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
        b"form-action 'none'"
    )
    return [
        (b"content-type", content_type),
        (b"content-length", str(length).encode()),
        (b"cache-control", b"no-store"),
        (b"content-security-policy", csp),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"x-frame-options", b"DENY"),
    ]


async def serve_page(scope: Any, receive: Any, send: Any) -> None:
    """Answer one HTTP request: a file of the page (GET or HEAD), else 404 or 405."""
    method = scope.get("method", "GET")
    found = _FILES.get(scope.get("path", ""))
    if method not in ("GET", "HEAD"):
        status, content_type, body = 405, b"text/plain; charset=utf-8", b"method not allowed\n"
    elif found is None:
        status, content_type, body = 404, b"text/plain; charset=utf-8", b"not found\n"
    else:
        status, (content_type, body) = 200, found
    headers = _headers(scope, content_type, len(body))
    if status == 405:
        headers.append((b"allow", b"GET, HEAD"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
