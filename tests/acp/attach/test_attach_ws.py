"""Attach mode over WebSocket (``serve --ws``): the rules of SECURITY.md, each proved here
against the real ``agent-channel-acp serve`` as a subprocess, with real WebSocket clients
(the verbs' own, and hand-made handshakes where a browser or an attacker is played).

The protocol rules themselves are the unix suites' tests, run over WebSocket too (the
``transport`` fixture).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
from pathlib import Path

import anyio
import pytest
import trustme
from agent_channel_acp.wire._ws import WsError, _frame, connect  # pyright: ignore[reportPrivateUsage]
from attach_harness import card_status, parked, tool_ids
from conftest import GUARD, HERE
from faults import real_serve
from serving import ctl, env, one_line_failure, wait_for
from ws_serving import (
    SERVE,
    call,
    handshake,
    hello,
    only_id,
    private_dir,
    request,
    status,
    texts,
    ws_serve,
)

pytestmark = pytest.mark.anyio

SECRET = "SECRET-PROMPT-ws-91c2"


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    return private_dir(tmp_path)


# -- where it listens ----------------------------------------------------------------------


def test_ws_listens_on_loopback_by_default_and_the_record_and_json_line_name_it(
    rt: Path,
) -> None:
    with ws_serve(rt, "--ws", "0") as served:
        assert served.url.startswith("ws://127.0.0.1:") and served.url.endswith("/acp")
        record = served.record
        assert record["ws"]["url"] == served.url and record["transport"]["kind"] == "unix"
        assert record["ws"]["token"] not in json.dumps(served.announced)  # the line: no token
        assert oct(os.stat(served.announced["record"]).st_mode & 0o777) == "0o600"


def test_ws_beyond_loopback_without_tls_is_refused(rt: Path) -> None:
    run = subprocess.run(
        [*SERVE, "--ws-host", "0.0.0.0"],
        env=env(rt),
        capture_output=True,
        text=True,
        timeout=GUARD * 3,
        cwd=HERE,
    )
    one_line_failure(run, "without TLS")
    assert not list(rt.glob("*.json"))


def test_a_token_file_others_can_read_is_refused_and_a_private_one_is_the_token(
    rt: Path, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("a-token-of-our-own-4711\n")
    token.chmod(0o640)
    run = subprocess.run(
        [*SERVE, "--token-file", str(token)],
        env=env(rt),
        capture_output=True,
        text=True,
        timeout=GUARD * 3,
        cwd=HERE,
    )
    one_line_failure(run, "0640")
    token.chmod(0o600)
    with ws_serve(rt, "--ws", "0", "--token-file", str(token)) as served:
        elsewhere = tmp_path / "client-rt"  # a client with no record of it: the file only
        elsewhere.mkdir(mode=0o700)
        listed = ctl(elsewhere, "ls", "--server", served.url, "--token-file", str(token))
        assert listed.returncode == 0 and "1 executions" in listed.stdout, listed.stderr
        bare = ctl(elsewhere, "ls", "--server", served.url)
        one_line_failure(bare, served.url, "token")


# -- the token ------------------------------------------------------------------------------


async def test_ws_without_the_token_nothing_is_served_and_a_wrong_one_is_closed(
    rt: Path,
) -> None:
    with ws_serve(rt, "--ws", "0") as served:
        sid = only_id(served)
        ws = await connect(served.url)
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": SECRET}]}
        for i, (method, params) in enumerate(
            [
                ("session/prompt", prompt),
                ("_agent_channel/end", {"sessionId": sid}),
                ("initialize", hello(None)),
            ]
        ):
            answer = await call(ws, i, method, params)
            assert answer is not None and answer["error"]["code"] == -32000, answer
        wrong = await call(ws, 9, "initialize", hello("not-the-token"))
        assert wrong is not None and wrong["error"]["code"] == -32000
        with anyio.fail_after(GUARD):
            assert await ws.recv() is None  # closed after a wrong token
        assert SECRET not in texts(served, sid)
        assert status(served.rt) in ("running", "waiting for operator")


async def test_the_ws_token_is_never_in_a_log_or_an_announcement(rt: Path) -> None:
    with ws_serve(rt, "--ws", "0", "--log-level", "DEBUG") as served:
        token = served.record["ws"]["token"]
        ws = await connect(served.url)
        ok = await call(ws, 1, "initialize", hello(token))
        assert ok is not None and "result" in ok
        await call(ws, 2, "_agent_channel/list", {})
        await ws.close()
        bad = await connect(served.url)
        await call(bad, 1, "initialize", hello(token[:-1] + "x"))
        listed = ctl(rt, "ls", "--server", served.url)
        assert listed.returncode == 0, listed.stderr
        served.proc.terminate()
        out = served.proc.communicate(timeout=GUARD)[0]
        said = served.log.read_text() + out + json.dumps(served.announced) + listed.stdout
        assert "wrong token" in said  # the refusal is logged, without the token
        assert token not in said and token[:-1] not in said


# -- TLS ------------------------------------------------------------------------------------


@pytest.fixture
def tls(tmp_path: Path) -> dict[str, Path]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    paths = {k: tmp_path / f"{k}.pem" for k in ("ca", "cert", "key")}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    cert.private_key_pem.write_to_path(str(paths["key"]))
    for i, pem in enumerate(cert.cert_chain_pems):
        pem.write_to_path(str(paths["cert"]), append=i > 0)
    return paths


async def test_wss_with_a_given_certificate_and_a_plain_ws_client_fails_cleanly(
    rt: Path, tls: dict[str, Path]
) -> None:
    tls_args = ("--tls-cert", str(tls["cert"]), "--tls-key", str(tls["key"]))
    with ws_serve(rt, "--ws", "0", "--ws-host", "0.0.0.0", *tls_args) as served:
        assert served.url.startswith("wss://")
        port = served.port
        with anyio.fail_after(GUARD):
            with pytest.raises((WsError, ConnectionError)):
                await connect(f"ws://127.0.0.1:{port}/acp")  # plain, to a TLS listener
        url = f"wss://127.0.0.1:{port}"
        listed = ctl(rt, "ls", "--server", url, "--cafile", str(tls["ca"]))
        assert listed.returncode == 0 and "1 executions" in listed.stdout, listed.stderr
        untrusted = ctl(rt, "ls", "--server", url)  # a self-signed cert, not trusted: refused
        assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stdout + untrusted.stderr
        sent = ctl(rt, "send", "--server", url, "--cafile", str(tls["ca"]), only_id(served), "hi")
        assert sent.returncode == 0, sent.stderr
        assert served.proc.poll() is None
    assert "Traceback" not in served.log.read_text()


# -- browsers -------------------------------------------------------------------------------


async def test_a_foreign_origin_or_host_is_refused_and_the_listeners_own_is_not(rt: Path) -> None:
    with ws_serve(rt, "--ws", "0") as served:
        port = served.port
        own = f"127.0.0.1:{port}"
        refused = [
            {"Host": own, "Origin": "https://evil.example"},
            {"Host": own, "Origin": f"http://127.0.0.1:{port + 1}"},
            {"Host": own, "Origin": "null"},
            {"Host": f"evil.example:{port}"},  # DNS rebinding: a name that is not ours
            {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"},
        ]
        for headers in refused:
            assert " 403 " in (await handshake(port, headers)) + " ", headers
        for headers in (
            {"Host": own},
            {"Host": own, "Origin": f"http://{own}"},
            {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
        ):
            assert " 101 " in await handshake(port, headers) + " ", headers
        assert " 403 " in await handshake(port, {"Host": own}, path="/other") + " "


# -- clients --------------------------------------------------------------------------------


def test_every_verb_takes_server_ws(rt: Path) -> None:
    with ws_serve(rt, "--ws", "0", "--input", "gate=never start") as served:
        sid = only_id(served)
        remote = ("--server", served.url)
        assert ctl(rt, "send", *remote, sid, "over the web socket").returncode == 0
        wait_for(
            lambda: (
                "over the web socket" in ctl(rt, "queue", *remote, sid).stdout
                or "over the web socket" in texts(served, sid)
            ),
            "the message queued or read",
        )
        for verb in (("messages", sid), ("queue", sid), ("cancel", sid), ("ls",)):
            run = ctl(rt, verb[0], *remote, *verb[1:], "--json")
            assert run.returncode == 0, (verb, run.stderr)
        assert ctl(rt, "end", *remote, sid).returncode == 0
        wait_for(lambda: status(rt, *remote) not in ("running", "waiting for operator"), "the end")
        bad = ctl(rt, "ls", "--server", "http://127.0.0.1:1")
        one_line_failure(bad, "ws://")


def _record(rt: Path) -> str:
    (path,) = rt.glob("*.json")
    return path.read_text()


def _deaf(port: int, token: str, sid: str) -> socket.socket:
    """A WebSocket client that binds, then never reads (a small receive buffer)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(
        f"GET /acp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    s.settimeout(GUARD)
    assert b" 101 " in s.recv(1024)
    s.sendall(_frame(1, request(1, "initialize", hello(token))))
    load = {"sessionId": sid, "cwd": "/", "mcpServers": []}
    s.sendall(_frame(1, request(2, "session/load", load)))
    return s


async def test_a_ws_client_that_never_reads_is_cut_off_and_the_others_keep_their_stream() -> None:
    rt = Path(__import__("tempfile").mkdtemp(prefix="acp-rt-"))
    async with real_serve("--ws", "0", rt=rt) as server:
        sid = server.ids[0]
        ws = json.loads(_record(rt))["ws"]
        port = int(ws["url"].rsplit(":", 1)[1].split("/")[0])
        keeper = await server.connect()
        await keeper.load(sid)
        await parked(keeper)
        deaf = await asyncio.to_thread(_deaf, port, ws["token"], sid)

        async def clients() -> int:
            return (await keeper.ext("list"))["executions"][0]["clients"]

        with anyio.fail_after(GUARD):
            while await clients() != 2:  # noqa: ASYNC110 (polling the server's own answer)
                await asyncio.sleep(0.01)
        turns = 0
        while await clients() != 1:
            turns += 1
            assert turns <= 40, "a client that never reads was never cut off"
            await keeper.prompt(sid, f"big=400000 t{turns}")
            await keeper.until(lambda n=turns: len(tool_ids(keeper, sid)) >= n)
            await parked(keeper)
        deaf.close()
        cards = tool_ids(keeper, sid)
        assert len(cards) == turns and all(
            card_status(keeper, sid, t) == "completed" for t in cards
        )
        print(f"a deaf WebSocket client was cut off after {turns} turns of 400 kB")


# -- verbs that cannot reach the server (issue 29, item 14) -------------------------------------


def _closed_port() -> int:
    """A loopback port nothing listens on: bound, never listened, held while the verb runs."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    _closing.append(s)
    return s.getsockname()[1]


_closing: list[socket.socket] = []


def test_a_server_the_verbs_cannot_reach_fails_them_in_one_line_naming_it(
    rt: Path, tls: dict[str, Path]
) -> None:
    """``ls --server`` that cannot connect (a closed port, a certificate it does not trust)
    exits non-zero with one line naming the url as given, nothing on stdout; no verb says
    "pid 0"."""
    port = _closed_port()
    try:
        closed = f"ws://127.0.0.1:{port}"
        for args in (("ls",), ("ls", "--json"), ("send", "abc", "hi"), ("queue", "abc")):
            run = ctl(rt, args[0], "--server", closed, *args[1:])
            one_line_failure(run, closed)
            assert "pid 0" not in run.stderr and run.stdout == "", (args, run.stdout)
    finally:
        for s in _closing:
            s.close()
    tls_args = ("--tls-cert", str(tls["cert"]), "--tls-key", str(tls["key"]))
    with ws_serve(rt, "--ws", "0", *tls_args) as served:
        url = f"wss://127.0.0.1:{served.port}"
        for args in (("ls",), ("ls", "--json"), ("messages", only_id(served))):
            untrusted = ctl(rt, args[0], "--server", url, *args[1:])
            one_line_failure(untrusted, url, "CERTIFICATE_VERIFY_FAILED")
            assert "pid 0" not in untrusted.stderr and untrusted.stdout == ""


def test_ls_json_over_ws_gives_the_servers_own_pid_and_start(rt: Path) -> None:
    with ws_serve(rt, "--ws", "0") as served:
        (entry,) = json.loads(ctl(rt, "ls", "--server", served.url, "--json").stdout)["servers"]
        record = served.record
        assert entry["pid"] == served.proc.pid == record["pid"]
        assert entry["startedAt"] == record["started_at"]
        text = ctl(rt, "ls", "--server", served.url).stdout
        assert text.startswith(f"pid {served.proc.pid}  {served.url}  since "), text


def test_security_md_out_of_scope_says_what_listens_beyond_loopback() -> None:
    """Issue 29, item 15: SECURITY.md's "Out of scope" states what ships (a WebSocket
    listener beyond loopback when asked, with TLS; see the two tests above), not that
    nothing listens beyond 127.0.0.1 and there is no TLS."""
    text = (HERE.parent.parent / "SECURITY.md").read_text()
    scope = text.split("## Out of scope", 1)[1].split("\n## ", 1)[0]
    assert "nothing listens beyond 127.0.0.1" not in scope
    assert "there is no TLS" not in scope
    for fact in ("--ws-host", "--tls-cert", "token", "--cafile", "pool"):
        assert fact in scope, fact
