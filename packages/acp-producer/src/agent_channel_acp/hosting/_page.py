"""The page the WebSocket listener serves beside ``/acp`` (a stub: the web console replaces it).

:func:`serve_page` answers every HTTP request :mod:`._asgi` does not handle itself.
"""

from __future__ import annotations

from typing import Any


async def serve_page(scope: Any, receive: Any, send: Any) -> None:
    """Answer one HTTP request: 404 (no page is shipped yet)."""
    await send(
        {
            "type": "http.response.start",
            "status": 404,
            "headers": [(b"content-type", b"text/plain")],
        }
    )
    await send({"type": "http.response.body", "body": b"not found\n"})
