"""``agent-channel-acp web``: the web console's address, token included, for a running server.

The page is served by ``serve --ws`` (:mod:`..hosting._page`) and authenticates with the
discovery record's WebSocket token, which it reads from the URL fragment (``#token=``):
browsers never send a fragment, so the token reaches no request line, proxy or log. This
verb only reads the record (no connection, no SDK import) and prints the address, or opens
it with :mod:`webbrowser`.
"""

from __future__ import annotations

import json
from typing import TextIO
from urllib.parse import quote, urlsplit

from ..wire._discovery import Record, live_records, runtime_dir
from ._connect import CtlError


def page_url(record: Record) -> str | None:
    """The page's address for ``record``'s WebSocket listener (None: it has none)."""
    t = record.transport
    ws = record.ws if record.ws is not None else t if t["kind"] == "ws" else None
    if ws is None:
        return None
    parts = urlsplit(ws["url"])
    scheme = "https" if parts.scheme == "wss" else "http"
    token = ws.get("token")
    fragment = f"#token={quote(token, safe='')}" if token else ""
    return f"{scheme}://{parts.netloc}/{fragment}"


def web(out: TextIO, *, open_browser: bool, as_json: bool) -> int:
    """Print (or open) the newest live server's page address; other servers' follow on
    lines of their own, so a script reads the first."""
    records = live_records(runtime_dir(create=False))
    found = [(r, u) for r in records if (u := page_url(r)) is not None]
    if not found:
        why = (
            "no server listens over WebSocket" if records else "no agent-channel server is running"
        )
        raise CtlError(f"{why}: start one with `agent-channel-acp serve --ws 0 ...`")
    found.sort(key=lambda ru: ru[0].started_at, reverse=True)
    url = found[0][1]
    if open_browser:
        import webbrowser

        if not webbrowser.open(url):
            raise CtlError(f"no browser could be opened; open {url} yourself")
    if as_json:
        out.write(json.dumps({"url": url}) + "\n")
    else:
        out.write(url + "\n")
        for r, other in found[1:]:
            out.write(f"  also pid {r.pid}: {other}\n")
    out.flush()
    return 0
