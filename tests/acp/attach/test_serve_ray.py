"""``serve --ray``: the verbs drive an execution a Ray cluster runs as they drive a local one.

A local cluster starts in the test process and runs an interactive body; ``serve --ray
ADDRESS`` joins it from another process, and the verbs, each a subprocess, list, message and
interrupt the execution through that server; an SDK client is asked its approvals and
questions, and ``bridge`` (the editor's path) binds a stdio client to it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"  # or workers die at start under `uv run`

ray = pytest.importorskip("ray")
acr = pytest.importorskip("agent_channel_ray")

import ray_bodies  # noqa: E402
from conftest import HERE  # noqa: E402
from hosts import ray_env  # noqa: E402
from serving import bridged, ctl, ctl_json, env, one_line_failure, serving, wait_for  # noqa: E402


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    """A local cluster in this process; its GCS address, for ``serve --ray``."""
    ray.cloudpickle.register_pickle_by_value(ray_bodies)
    ours = not ray.is_initialized()  # a session's cluster (the Ray package's tests) is kept
    acr.start_cluster(num_cpus=2)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        if ours:
            ray.shutdown()


def status(rt: Path, execution_id: str) -> str | None:
    listed = [e for s in ctl_json(rt, "ls")["servers"] for e in s["executions"]]
    return next((e["status"] for e in listed if e["id"] == execution_id), None)


def texts(rt: Path, execution_id: str) -> list[str]:
    return [m["text"] for m in ctl_json(rt, "messages", execution_id, "--all")["messages"]]


def test_the_verbs_drive_a_ray_execution(address: str, tmp_path: Path) -> None:
    ref = acr.launch(ray_bodies.echo, title="ray echo")
    eid = ref.execution_id
    with serving(tmp_path, "--ray", address, **ray_env()):
        listed: list[dict[str, Any]] = []

        def in_ls() -> bool:
            nonlocal listed
            listed = [e for s in ctl_json(tmp_path, "ls")["servers"] for e in s["executions"]]
            return any(e["id"] == eid for e in listed)

        wait_for(in_ls, "the cluster's execution listed by ls")
        assert next(e for e in listed if e["id"] == eid)["title"] == "ray echo"

        assert ctl(tmp_path, "send", eid, "hello").returncode == 0
        wait_for(lambda: "echo: hello" in texts(tmp_path, eid), "the body's answer")
        assert [m.text for m in ref.messages()][-2:] == ["hello", "echo: hello"]

        assert ctl(tmp_path, "send", eid, "work").returncode == 0
        wait_for(lambda: "working" in texts(tmp_path, eid), "the turn to start")
        assert ctl(tmp_path, "send", eid, "later").returncode == 0  # queued: the turn runs
        (queued,) = ctl_json(tmp_path, "queue", eid)["messages"]
        assert queued["text"] == "later"
        withdrawn = ctl_json(tmp_path, "queue", eid, "--withdraw", queued["id"])
        assert withdrawn["withdrawn"]
        assert ctl_json(tmp_path, "queue", eid)["messages"] == []
        wait_for(lambda: ctl_json(tmp_path, "cancel", eid)["cancelled"], "the turn to be cancelled")
        wait_for(lambda: "interrupted" in texts(tmp_path, eid), "the body to see the interrupt")
        assert "later" not in texts(tmp_path, eid)  # withdrawn on the cluster, never read

        assert ctl(tmp_path, "send", eid, "tool").returncode == 0
        wait_for(lambda: "t1 running" in texts(tmp_path, eid), "the tool call to run")
        wait_for(
            lambda: ctl(tmp_path, "cancel-tool", eid, "t1").returncode == 0,
            "the server to see the tool call running",
        )
        wait_for(lambda: "after the tool" in texts(tmp_path, eid), "the turn to go on")
        assert texts(tmp_path, eid)[-2] == "t1 cancelled"  # the call alone, not the turn

        kept = acr.launch(ray_bodies.echo, title="kept")  # what stopping the server leaves
        wait_for(lambda: status(tmp_path, kept.execution_id) == "running", "the kept one listed")
        run = ctl(tmp_path, "end", eid)  # ends it on the cluster (N1: it was refused)
        assert run.returncode == 0, run.stderr
        wait_for(lambda: status(tmp_path, eid) == "finished", "its end seen")
        assert ref.closed

        later = acr.launch(ray_bodies.echo, title="started later")  # picked up while serving
        wait_for(lambda: status(tmp_path, later.execution_id) == "running", "the new one listed")
        ray.kill(later.host)
        wait_for(lambda: status(tmp_path, later.execution_id) == "failed", "its end seen")
    assert not kept.closed  # stopping the server left it running
    assert kept.end()


@pytest.mark.parametrize(
    ("flags", "needle"),
    [(["--demo"], "--demo"), (["--count", "2"], "--count")],
)
def test_serve_ray_refuses_what_starts_agents(
    flags: list[str], needle: str, tmp_path: Path
) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", "serve", "--ray", *flags],
        env=env(tmp_path),
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=60,
    )
    assert run.returncode == 2
    one_line_failure(run, needle)


def test_serve_ray_without_the_ray_package_says_how_to_install_it(tmp_path: Path) -> None:
    program = (
        "import sys; sys.modules['agent_channel_ray'] = None\n"
        "from agent_channel_acp.cli._main import main; main(['serve', '--ray'])"
    )
    run = subprocess.run(
        [sys.executable, "-c", program],
        env=env(tmp_path),
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=60,
    )
    assert run.returncode == 2
    one_line_failure(
        run,
        "serve --ray needs agent-channel-ray: pip install ./packages/channel-core "
        "./packages/ray-runtime (from the root of a clone of the repository; not on PyPI yet)",
    )


@pytest.mark.anyio
async def test_the_console_drives_a_ray_execution(
    address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The terminal console on ``serve --ray``: it binds the cluster's execution, shows its
    conversation, and a message typed in it reaches the body on the cluster."""

    import anyio
    from agent_channel_acp.operator.console._app import Console
    from agent_channel_acp.operator.console._widgets import EntryView
    from conftest import GUARD

    ref = acr.launch(ray_bodies.echo, title="ray console")
    eid = ref.execution_id
    monkeypatch.setenv("AGENT_CHANNEL_RUNTIME_DIR", str(tmp_path))
    with serving(tmp_path, "--ray", address, **ray_env()):
        wait_for(lambda: status(tmp_path, eid) is not None, "the execution listed")
        assert ctl(tmp_path, "send", eid, "before").returncode == 0
        wait_for(lambda: "echo: before" in texts(tmp_path, eid), "the body's first answer")
        app = Console(target=eid)
        async with app.run_test(size=(120, 40)) as pilot:

            async def until(check: Any) -> None:
                with anyio.fail_after(GUARD * 3):
                    while not check():
                        await pilot.pause(0.02)

            def said() -> str:
                return "\n".join(str(v.content) for v in app.query(EntryView))

            await until(lambda: app.state.role == "driver")
            await until(lambda: "echo: before" in said())  # the replayed conversation
            await pilot.click("#input")
            await pilot.press(*"from the console")
            await pilot.press("enter")
            await until(lambda: "echo: from the console" in said())  # answered on the cluster
        seen = lambda: "from the console" in [m.text for m in ref.messages()]  # noqa: E731
        await asyncio.to_thread(wait_for, seen, "the body read the console's message")


async def _driver(served: Any, eid: str, policy: Any) -> tuple[Any, Any, asyncio.StreamWriter]:
    """An SDK client on the server of ``served``, driving ``eid`` (``session/load``);
    ``policy`` answers its ``session/request_permission`` requests."""
    from acp.client.connection import ClientSideConnection
    from attach_harness import AttachRecorder
    from serving import connect

    reader, writer, meta = await connect(served.record)
    rec = AttachRecorder(policy=policy)
    conn = ClientSideConnection(rec, writer, reader, observers=[rec.observe])
    await conn.initialize(protocol_version=1, **meta)
    params = {"cwd": str(HERE), "sessionId": eid, "mcpServers": []}
    await conn._conn.send_request("session/load", params)  # pyright: ignore[reportPrivateUsage]
    return conn, rec, writer


def _prompt(conn: Any, eid: str, text: str) -> Any:
    params = {"sessionId": eid, "prompt": [{"type": "text", "text": text}]}
    return asyncio.ensure_future(conn._conn.send_request("session/prompt", params))


@pytest.mark.anyio
async def test_serve_ray_approve_asks_the_client_and_the_body_on_the_cluster_gets_it(
    address: str, tmp_path: Path
) -> None:
    """``serve --ray --approve``: a tool call of a body on the cluster becomes the driving
    client's ``session/request_permission``; its allow, then its reject, reach the body;
    its question (with choices) is asked the same way and its choice is the answer."""
    from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

    ref = acr.launch(ray_bodies.asking, title="ray approvals")
    eid = ref.execution_id
    answers = ["allow_once", "reject_once", "choice-1"]

    async def policy(request: dict[str, Any]) -> RequestPermissionResponse:
        option = answers.pop(0)
        assert option in request["options"], request
        if option == "reject_once":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option)
        )

    def said(text: str) -> Callable[[], bool]:
        return lambda: text in [m.text for m in ref.messages()]

    with serving(tmp_path, "--ray", address, "--approve", **ray_env()) as served:
        await asyncio.to_thread(wait_for, lambda: status(tmp_path, eid), "the execution listed")
        conn, rec, writer = await _driver(served, eid, policy)
        try:
            _prompt(conn, eid, "approve t1")
            await rec.wait_until(lambda: len(rec.permissions) == 1)
            asked = rec.permissions[0]
            assert asked["sessionId"] == eid and asked["toolCall"]["toolCallId"] == "t1"
            assert asked["toolCall"]["rawInput"] == {"command": "ls"}
            await asyncio.to_thread(wait_for, said("t1 allowed"), "the allow on the cluster")
            _prompt(conn, eid, "approve t2")
            await asyncio.to_thread(wait_for, said("t2 rejected"), "the reject on the cluster")
            _prompt(conn, eid, "ask which colour?")
            await asyncio.to_thread(wait_for, said("answer: blue"), "the answer on the cluster")
            assert len(rec.permissions) == 3 and "which colour?" in str(rec.permissions[2])
        finally:
            await conn.close()
            writer.close()
    ray.cancel(ref.run)


@pytest.mark.anyio
async def test_a_busy_host_does_not_hold_the_servers_other_sessions(
    address: str, tmp_path: Path
) -> None:
    """A prompt to an execution whose host is busy waits for that host, on its own: the
    server's loop answers another session's prompt (another host) meanwhile."""
    import threading

    from agent_channel import UserMessage
    from conftest import GUARD, allow

    busy = acr.launch(ray_bodies.echo, title="busy")
    other = acr.launch(ray_bodies.echo, title="other")
    gate = tmp_path / "gate"
    with serving(tmp_path, "--ray", address, **ray_env()) as served:
        for ref in (busy, other):
            listed = lambda ref=ref: status(tmp_path, ref.execution_id)  # noqa: E731
            await asyncio.to_thread(wait_for, listed, "the execution listed")
        one, _, w1 = await _driver(served, busy.execution_id, allow)
        two, _, w2 = await _driver(served, other.execution_id, allow)
        try:
            # its answer may wait for the gate too (the body takes the loop first): a thread
            threading.Thread(target=busy.post, args=(UserMessage(f"block {gate}"),)).start()
            blocked = gate.with_suffix(".blocked").exists
            await asyncio.to_thread(wait_for, blocked, "the host to be busy")
            stuck = _prompt(one, busy.execution_id, "while busy")  # its post waits for the host
            await asyncio.wait_for(_prompt(two, other.execution_id, "meanwhile"), GUARD)
            assert not stuck.done()  # the gate is shut: the busy host still holds its post
        finally:
            gate.touch()
        await asyncio.wait_for(stuck, GUARD)
        said = lambda: "echo: while busy" in [m.text for m in busy.messages()]  # noqa: E731
        await asyncio.to_thread(wait_for, said, "the busy host to read the prompt")
        assert "echo: meanwhile" in [m.text for m in other.messages()]
        for conn, writer in ((one, w1), (two, w2)):
            await conn.close()
            writer.close()
    for ref in (busy, other):
        ray.kill(ref.host)


@pytest.mark.anyio
async def test_bridge_binds_a_stdio_client_to_a_ray_execution(address: str, tmp_path: Path) -> None:
    """The Zed path: ``agent-channel-acp bridge ID`` (a subprocess, as an editor launches
    it) against ``serve --ray``; its stdio client's ``session/new`` binds the execution on
    the cluster, and a prompt is answered there."""
    import anyio
    from acp import text_block
    from conftest import GUARD, Recorder

    ref = acr.launch(ray_bodies.echo, title="ray bridge")
    eid = ref.execution_id

    def said(rec: Recorder) -> str:
        chunks = [u for u in rec.updates[eid] if u["sessionUpdate"] == "agent_message_chunk"]
        return "".join(u.get("content", {}).get("text", "") for u in chunks)

    with serving(tmp_path, "--ray", address, **ray_env()):
        await asyncio.to_thread(wait_for, lambda: status(tmp_path, eid), "the execution listed")
        async with bridged(tmp_path, eid) as (conn, rec):
            with anyio.fail_after(GUARD):
                session = await conn.new_session(cwd=str(HERE), mcp_servers=[])
            assert session.session_id == eid  # the cluster's execution, not a new one
            await rec.wait_until(lambda: "Bound to" in said(rec))
            with anyio.fail_after(GUARD):
                answer = await conn.prompt(session_id=eid, prompt=[text_block("over the bridge")])
            assert answer.stop_reason == "end_turn"
            await rec.wait_until(lambda: "echo: over the bridge" in said(rec))
    assert "over the bridge" in [m.text for m in ref.messages()]  # read on the cluster
    ray.kill(ref.host)


@pytest.mark.anyio
async def test_serve_ray_serves_at_most_its_limit_and_says_so_once(
    address: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Past the limit of running executions, new ones of the cluster are not served, and
    one log line says so (not one per look)."""
    from agent_channel_acp.agent.attach._server import AttachServer
    from agent_channel_acp.hosting._ray import SERVED_LIMIT, Adder

    assert AttachServer.finished_kept == SERVED_LIMIT
    refs = [acr.launch(ray_bodies.echo, title=f"limited {i}") for i in range(3)]
    server = AttachServer()
    add = Adder(server, limit=2)
    with caplog.at_level("WARNING", logger="agent_channel_acp"):
        for _ in range(3):  # three looks at the cluster
            add(await asyncio.to_thread(acr.hosted, address))
    assert len(server.hubs()) == 2
    full = [r for r in caplog.records if "the limit" in r.getMessage()]
    assert len(full) == 1 and "serving 2 running executions" in full[0].getMessage()
    await server.aclose()
    for ref in refs:
        ray.kill(ref.host)
