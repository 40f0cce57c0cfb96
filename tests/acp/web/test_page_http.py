"""What ``serve --ws`` answers over plain HTTP beside ``/acp``: the page's files alone, with
strict headers, and the ``web`` verb that gives the page's address. A real server subprocess,
raw requests (``http.client`` sends a path exactly as written, ``..`` included)."""

from __future__ import annotations

import http.client
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from browser import page_url
from serving import ctl, ctl_json, one_line_failure, serving

PAGE = (
    Path(__file__).resolve().parents[3] / "packages/acp-producer/src/agent_channel_acp/hosting/page"
)


def request(announced: dict[str, Any], path: str, method: str = "GET") -> http.client.HTTPResponse:
    parts = urlsplit(page_url(announced))
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    conn.putrequest(method, path, skip_accept_encoding=True)
    conn.endheaders()
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def body(announced: dict[str, Any], path: str) -> bytes:
    parts = urlsplit(page_url(announced))
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    conn.request("GET", path)
    data = conn.getresponse().read()
    conn.close()
    return data


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with serving(tmp_path_factory.mktemp("rt"), "--demo", "--ws", "0") as s:
        yield s


@pytest.mark.parametrize(
    ("path", "kind", "file"),
    [
        ("/", "text/html", "index.html"),
        ("/index.html", "text/html", "index.html"),
        ("/app.js", "text/javascript", "app.js"),
        ("/app.css", "text/css", "app.css"),
    ],
)
def test_page_files_are_served_with_their_type_and_strict_headers(
    served: Any, path: str, kind: str, file: str
) -> None:
    r = request(served.announced, path)
    assert r.status == 200
    assert r.headers["content-type"].startswith(kind)
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"
    port = urlsplit(page_url(served.announced)).port
    csp = r.headers["content-security-policy"]
    assert "default-src 'self'" in csp
    assert f"connect-src 'self' ws://127.0.0.1:{port}" in csp
    assert body(served.announced, path) == (PAGE / file).read_bytes()


@pytest.mark.parametrize(
    "path",
    [
        "/../_page.py",
        "/..%2f_page.py",
        "/%2e%2e/_page.py",
        "/page/../_page.py",
        "/_page.py",
        "/__init__.py",
        "/page/index.html",
        "//etc/passwd",
        "/../../../../etc/passwd",
        "/index.html/..",
        "/app.js%00.html",
        "/nothing-here",
    ],
)
def test_nothing_but_the_page_files_is_served(served: Any, path: str) -> None:
    r = request(served.announced, path)
    assert r.status in (400, 404), (path, r.status)
    assert r.headers.get("content-type", "text/plain").startswith("text/plain")


def test_only_get_and_head(served: Any) -> None:
    assert request(served.announced, "/", "POST").status == 405
    head = request(served.announced, "/app.js", "HEAD")
    assert head.status == 200
    assert int(head.headers["content-length"]) == (PAGE / "app.js").stat().st_size


def test_web_verb_prints_the_page_address_with_the_token(served: Any) -> None:
    """``web``: the address the page opens with, the record's token in the fragment (which
    browsers never send)."""
    answer = ctl_json(served.rt, "web", "--json")
    assert answer == {"url": page_url(served.announced)}
    run = ctl(served.rt, "web")
    assert run.returncode == 0
    assert run.stdout.splitlines()[0] == answer["url"]
    assert "#token=" in answer["url"]


def test_web_verb_without_a_websocket_server_says_how(tmp_path: Path) -> None:
    one_line_failure(ctl(tmp_path, "web"), "no agent-channel server is running", "--ws")
    with serving(tmp_path, "--demo") as s:
        s.ids(1)
        one_line_failure(ctl(tmp_path, "web"), "no server listens over WebSocket", "--ws")


def test_web_verb_opens_the_address_and_imports_no_sdk(served: Any, tmp_path: Path) -> None:
    """``web --open`` hands the address to the browser ``webbrowser`` finds ($BROWSER here,
    a program that writes down what it was given), and, a verb, it never imports the SDK."""
    import subprocess
    import sys

    from conftest import GUARD, HERE
    from serving import env

    opened = tmp_path / "opened"
    browser = (
        f"{sys.executable} -c \"import sys; open({str(opened)!r}, 'w').write(sys.argv[1])\" %s"
    )
    script = (
        "import runpy, sys\n"
        "sys.argv = ['agent-channel-acp', 'web', '--open']\n"
        "try:\n"
        "    runpy.run_module('agent_channel_acp', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "print('sdk imported' if 'acp' in sys.modules else 'no sdk', code, file=sys.stderr)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        env={**env(served.rt), "BROWSER": browser},
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=GUARD,
    )
    assert run.stderr.strip().endswith("no sdk 0"), run.stderr
    assert opened.read_text() == page_url(served.announced) == run.stdout.strip()
