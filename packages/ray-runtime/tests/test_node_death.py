"""Executions survive their node (N5, N7): a two-node fleet on one machine, a node killed
mid-turn, the execution restarted on the other and restored from its store under its id.

A head (``ray start --head``, no CPU: the registry lives there) and two nodes with the
``agent`` resource join it, each a ``ray start`` of its own temp dir. A driver (a process
of its own: the test process is the session cluster's) launches a durable execution that
needs ``agent``, posts from a thread while the test kills the node that hosts it, again
and again (the killed node is started afresh, so the next kill finds one to move to). The
execution is a ReAct agent whose every prompt calls a tool, so a kill lands mid-tool now
and then. The head checks its nodes' health every second (:data:`HEALTH_CHECK`): a kill
costs a few seconds, not Ray's default 15 s before the node is marked dead.
Checked from the client side only: every acknowledged message is in the conversation
exactly once and in order, no message twice, every tool call has exactly one result (ids
unique), and the ref (never a new one) reaches it after each kill; a fresh ref reads the
same conversation. On a SQLite file, and once on a PostgreSQL database (N5's shared store).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from nodes import Node, ray_env, ray_head, ray_node

HERE = Path(__file__).parent
KILLS = 10
"""Node kills in the CI form; ``-m soak`` runs :data:`SOAK_KILLS`."""
SOAK_KILLS = 50
PG_KILLS = 2
"""Node kills on a PostgreSQL store (the store differs, not the storm)."""
HEALTH_CHECK = json.dumps(
    {
        "health_check_period_ms": 1000,
        "health_check_timeout_ms": 1000,
        "health_check_failure_threshold": 3,
    }
)
"""The head's node health check: a dead node is marked so in about 3 s, not Ray's 15 s
(a check every 3 s, 5 misses), so a kill costs a few seconds (docs/ray.md's advice)."""
GUARD = 600.0
"""Seconds the driver may take in all (a hang guard, not a measure)."""
AGENT = json.dumps({"agent": 1})
WAIT = 120.0
"""Seconds a client's wait may take (a hang guard, not a measure)."""

DRIVER = """
import json, sys, threading, time
sys.path.insert(0, sys.argv[3])
import agent_channel_ray as acr, ray, cluster_bodies as bodies
from ray._private import state
from agent_channel import ChatMessageAssistant, ChatMessageTool, ChatMessageUser, UserMessage
acr.connect(sys.argv[1])
ray.cloudpickle.register_pickle_by_value(bodies)
ref = acr.launch(
    bodies.durable_tool_agent(), store=sys.argv[2], options={"resources": {"agent": 0.001}},
    title="survivor", live=True,
)
eid = ref.execution_id

def node_dir():
    # the temp dir of the node hosting the execution (its plasma socket lives under it),
    # once its host is alive there: a restart may be tried on a node killed but not yet
    # marked dead, whose lease fails
    actor = state.actors(ref.host._actor_id.hex())
    if actor["State"] != "ALIVE":
        return None
    node = actor["Address"]["NodeID"]
    for n in ray.nodes():
        if n["NodeID"] == node and n["Alive"]:
            return n["ObjectStoreSocketName"].split("/session_")[0]
    return None

acked, unacked, errors, kill_times, stop = [], [], [], [], threading.Event()

def poster():
    i = 0
    while not stop.is_set():
        text = f"m{i}"
        i += 1
        try:
            ref.post(UserMessage(text))
            acked.append(text)
        except acr.HostRestarted:
            unacked.append(text)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            return
        time.sleep(0.005)  # a steady stream, not a flood

thread = threading.Thread(target=poster)
thread.start()
for kill in range(int(sys.argv[4])):
    while len(acked) < 5 * (kill + 1):  # some acknowledged on this node first
        assert thread.is_alive(), errors
        time.sleep(0.01)
    where = node_dir()
    while where is None:  # its host between nodes (a node taken for dead): wait for it
        time.sleep(0.05)
        where = node_dir()
    print(json.dumps({"kill": where}), flush=True)
    assert sys.stdin.readline().strip() == "killed"
    killed = time.monotonic()
    deadline = killed + 120
    while node_dir() in (None, where):  # restarted elsewhere
        assert time.monotonic() < deadline, "not restarted on another node"
        time.sleep(0.05)
    kill_times.append(round(time.monotonic() - killed, 1))
stop.set()
thread.join()

def texts(messages):
    # the posted texts in the conversation, in order (a fold joins a run of them)
    return [p for m in messages if isinstance(m, ChatMessageUser)
            for p in m.text.split("\\n\\n") if p[:1] == "m" and p[1:].isdigit()]

def settled(messages):
    # the last turn answered: no call left without its result
    return bool(messages) and isinstance(messages[-1], ChatMessageAssistant) \
        and not messages[-1].tool_calls

deadline = time.monotonic() + 120
while True:
    messages = ref.messages()
    if set(acked) <= set(texts(messages)) and settled(messages):
        break
    assert time.monotonic() < deadline, (sorted(set(acked) - set(texts(messages))), messages[-1:])
    time.sleep(0.05)
same = acr.ref_for(eid).messages()  # a fresh ref: the same conversation
conversation = [
    {"role": m.role, "calls": [c.id for c in m.tool_calls]} if isinstance(m, ChatMessageAssistant)
    else {"role": m.role, "result": m.tool_call_id} if isinstance(m, ChatMessageTool)
    else {"role": m.role}
    for m in messages
]
print(json.dumps({"acked": acked, "unacked": unacked, "texts": texts(messages),
                  "conversation": conversation, "errors": errors, "kills": kill_times,
                  "running": [r.status for r in acr.executions() if r.execution_id == eid],
                  "same": set(acked) <= set(texts(same))}),
      flush=True)
ref.end()
"""


def _run_fleet(kills: int, store: str | None = None) -> None:
    with tempfile.TemporaryDirectory(prefix="ray-n5-", dir="/tmp") as tmp:
        env = ray_env(tmp, RAY_AUTH_MODE="token")
        with ray_head("--num-cpus=0", f"--system-config={HEALTH_CHECK}", env=env) as head:
            nodes: list[Node] = []

            def worker() -> Node:
                context = ray_node(
                    f"--address={head.address}",
                    "--num-cpus=0",
                    f"--resources={AGENT}",
                    env=env,
                )
                node = context.__enter__()
                node.context = context  # type: ignore[attr-defined]
                nodes.append(node)
                return node

            errors = (Path(tmp) / "driver.err").open("w")
            driver: subprocess.Popen[str] | None = None
            try:
                worker(), worker()
                driver = subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        DRIVER,
                        head.address,
                        store or str(Path(tmp) / "store.db"),
                        str(HERE),
                        str(kills),
                    ],
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                    text=True,
                )
                assert driver.stdin is not None and driver.stdout is not None
                guard = threading.Timer(GUARD, driver.kill)  # a hung driver fails, not hangs
                guard.daemon = True  # and a failed test leaves no thread to wait for
                guard.start()
                result: dict[str, Any] = {}
                for line in driver.stdout:
                    if not line.startswith("{"):
                        continue  # Ray's own lines
                    said = json.loads(line)
                    if "kill" in said:
                        victim = next((n for n in nodes if n.temp_dir == said["kill"]), None)
                        assert victim is not None, f"hosted on no node of ours: {said}"
                        victim.context.__exit__(None, None, None)  # type: ignore[attr-defined]
                        nodes.remove(victim)
                        worker()  # the next kill has somewhere to move to
                        driver.stdin.write("killed\n")
                        driver.stdin.flush()
                    else:
                        result = said
                driver.wait(GUARD)
                guard.cancel()
                assert driver.returncode == 0, (Path(tmp) / "driver.err").read_text()[-4000:]
            finally:
                if driver is not None and driver.poll() is None:
                    driver.kill()  # the test failed under it: it goes too
                    driver.wait(GUARD)
                errors.close()
                for node in nodes:
                    node.context.__exit__(None, None, None)  # type: ignore[attr-defined]
        acked, texts = result["acked"], result["texts"]
        assert isinstance(acked, list) and isinstance(texts, list)
        print(
            f"{kills} kills: {len(acked)} acknowledged, {len(result['unacked'])} not "
            f"(host restarted during the post), {len(texts)} folded in; "
            f"kill -> on another node (s): {result['kills']}"
        )
        assert len(texts) == len(set(texts)), "a message folded in twice"
        assert set(acked) <= set(texts), "an acknowledged message lost"
        assert [t for t in texts if t in set(acked)] == acked, "acknowledged out of order"
        one_result_per_call(result["conversation"])
        assert result["running"] == ["running"] and result["same"]
        assert result["errors"] == []


def one_result_per_call(conversation: list[dict[str, Any]]) -> None:
    """Every tool call has exactly one result, right after its message; ids are unique
    (across restarts too: a restored model goes on after the highest)."""
    calls = [c for m in conversation for c in m.get("calls", [])]
    assert calls, "no tool call: the storm tested no tool"
    assert len(calls) == len(set(calls)), f"a tool call id twice: {calls}"
    results = [m["result"] for m in conversation if m["role"] == "tool"]
    assert sorted(results) == sorted(calls), "a call without one result (or a stray one)"
    i = 0
    while i < len(conversation):
        m = conversation[i]
        assert m["role"] != "tool", f"result {i} follows no call"
        i += 1
        got: list[str] = []
        while m.get("calls") and i < len(conversation) and conversation[i]["role"] == "tool":
            got.append(conversation[i]["result"])
            i += 1
        assert sorted(got) == sorted(m.get("calls", [])), f"message {i}: {got} for {m}"


def test_n5_an_execution_survives_its_node_killed_mid_turn() -> None:
    _run_fleet(KILLS)


@pytest.mark.soak
def test_n5_soak_many_node_kills() -> None:
    _run_fleet(SOAK_KILLS)


def test_n5_survives_its_node_on_a_postgresql_store(postgres_url: str) -> None:
    """The shared store N5 is about: a database every node reaches, not a file."""
    _run_fleet(PG_KILLS, store=postgres_url)


del os


LAUNCHER = """
import sys
sys.path.insert(0, sys.argv[3])
import agent_channel_ray as acr, ray, cluster_bodies as bodies
acr.connect(sys.argv[1])
ray.cloudpickle.register_pickle_by_value(bodies)
ids = [
    acr.launch(  # a SQLite file each: one host process holds a file at a time
        body,
        store=f"{sys.argv[2]}-{title}.db",
        options={"resources": {"agent": 0.001}},
        title=title,
        live=True,
    ).execution_id
    for body, title in ((bodies.durable_tool_agent(), "reattached"), (bodies.durable_echo, "cut"))
]
print(" ".join(ids), flush=True)
"""

WHERE = """
import sys, time
import agent_channel_ray as acr, ray
from ray._private import state
acr.connect(sys.argv[1])
host = acr.ref_for(sys.argv[2]).host
not_on = sys.argv[3]
deadline = time.monotonic() + 120
while True:  # its host alive on a node (not NOT_ON): that node's temp dir
    actor = state.actors(host._actor_id.hex())
    node = actor["Address"]["NodeID"] if actor["State"] == "ALIVE" else None
    where = next((n["ObjectStoreSocketName"].split("/session_")[0] for n in ray.nodes()
                  if n["NodeID"] == node and n["Alive"]), None)
    if where is not None and where != not_on:
        break
    assert time.monotonic() < deadline, f"not hosted on another node: {actor}"
    time.sleep(0.05)
print(where, flush=True)
"""


class _Client:
    """An ACP client's side: every session update, as JSON, per session."""

    def __init__(self) -> None:
        self.updates: dict[str, list[dict[str, Any]]] = {}
        self.changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        dumped = update.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.updates.setdefault(session_id, []).append(dumped)
        self.changed.set()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no approvals asked here")

    def said(self, session_id: str, kind: str) -> list[str]:
        """The texts of ``kind`` updates (``user_message_chunk``, ``agent_message_chunk``)."""
        got = self.updates.get(session_id, [])
        return [u["content"]["text"] for u in got if u["sessionUpdate"] == kind]

    async def until(self, check: Any) -> None:
        async with asyncio.timeout(WAIT):
            while not check():
                self.changed.clear()
                await self.changed.wait()


async def _attach(record: dict[str, Any], eid: str) -> tuple[Any, _Client, Any]:
    """A client on the server of ``record`` (a discovery record), ``session/load`` of ``eid``."""
    from acp.client.connection import ClientSideConnection

    transport = record["transport"]
    reader, writer = await asyncio.open_unix_connection(transport["path"], limit=1 << 24)
    client = _Client()
    conn = ClientSideConnection(client, writer, reader)  # pyright: ignore[reportArgumentType]
    meta = {"agent_channel.token": transport["token"]} if "token" in transport else {}
    await conn.initialize(protocol_version=1, **meta)
    await conn.load_session(cwd=str(HERE), session_id=eid, mcp_servers=[])
    return conn, client, writer


def _python(env: dict[str, str], code: str, *args: str) -> str:
    run = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.strip().splitlines()[-1]


def _serve_ray(
    env: dict[str, str], tmp: Path, address: str
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """``serve --ray ADDRESS`` as a subprocess; its discovery record once it serves."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "agent_channel_acp", "serve", "--json", "--ray", address],
        env={**env, "AGENT_CHANNEL_RUNTIME_DIR": str(tmp / "rt")},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert serve.stdout is not None
    line = serve.stdout.readline()
    assert line, f"serve --ray did not start (exit status {serve.poll()})"
    return serve, json.loads(Path(json.loads(line)["record"]).read_text())


def _stop(serve: subprocess.Popen[str]) -> None:
    serve.terminate()
    serve.wait(GUARD)
    if serve.stdout is not None:
        serve.stdout.close()


def _queued(env: dict[str, str], tmp: Path, eid: str) -> list[str]:
    """The texts ``serve --ray`` lists queued for ``eid`` (the ``queue`` verb)."""
    run = subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", "queue", eid, "--json"],
        env={**env, "AGENT_CHANNEL_RUNTIME_DIR": str(tmp / "rt")},
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert run.returncode == 0, run.stderr
    return [m["text"] for m in json.loads(run.stdout)["messages"]]


def _until(condition: Any, what: str) -> None:
    """Poll an observable ``condition`` with a deadline (not a sleep as synchronisation)."""
    import time

    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"{what} never held"
        time.sleep(0.1)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the SDK client's loop
async def test_n5_its_operators_reattach_through_serve_ray_under_the_same_id(
    tmp_path: Path,
) -> None:
    """N5's last clause, on a two-node fleet: durable executions a client drives through
    ``serve --ray`` lose their node. The same session id goes on for that client (a prompt
    after the restart is acknowledged and answered) and for a client that loads it afresh
    (the conversation before the kill replayed once, nothing twice). A prompt whose post
    the host held when its node died is answered -32010 "Host restarted" (it may or may
    not have been delivered), not -32603, and that session goes on under its id too."""
    pytest.importorskip("agent_channel_acp")
    from acp import RequestError, text_block

    with tempfile.TemporaryDirectory(prefix="ray-n5r-", dir="/tmp") as tmp:
        env = ray_env(tmp, RAY_AUTH_MODE="token")
        agent = ("--num-cpus=0", f"--resources={AGENT}")
        gate = Path(tmp) / "gate"
        with (
            ray_head("--num-cpus=0", f"--system-config={HEALTH_CHECK}", env=env) as head,
            ray_node(f"--address={head.address}", *agent, env=env) as first,
        ):
            store = str(Path(tmp) / "store")
            line = _python(env, LAUNCHER, head.address, store, str(HERE))  # it exits: N1
            eid, cut = line.split()
            for execution in (eid, cut):
                assert _python(env, WHERE, head.address, execution, "") == first.temp_dir
            serve, record = await asyncio.to_thread(_serve_ray, env, tmp_path, head.address)
            conns: list[Any] = []
            try:
                conn, client, writer = await _attach(record, eid)
                conns.append((conn, writer))
                said = await conn.prompt(session_id=eid, prompt=[text_block("before")])
                assert said.stop_reason == "end_turn"
                await client.until(lambda: "done" in client.said(eid, "agent_message_chunk"))
                held, holder, w1 = await _attach(record, cut)
                conns.append((held, w1))
                block = asyncio.ensure_future(  # its answer may wait for the gate too
                    held.prompt(session_id=cut, prompt=[text_block(f"block {gate}")])
                )
                blocked = gate.with_suffix(".blocked").exists
                await asyncio.to_thread(_until, blocked, "the host held")
                lost = asyncio.ensure_future(
                    held.prompt(session_id=cut, prompt=[text_block("lost?")])
                )
                queued = lambda: "lost?" in _queued(env, tmp_path, cut)  # noqa: E731
                await asyncio.to_thread(_until, queued, "its post under way")

                with ray_node(f"--address={head.address}", *agent, env=env):  # somewhere to go
                    first.stop()  # the hosting node dies, the post held on it
                    gate.touch()  # the restored body goes on past its block
                    cut_off: list[str] = []  # the prompts answered "Host restarted"
                    for text, answer in ((f"block {gate}", block), ("lost?", lost)):
                        try:
                            await asyncio.wait_for(answer, WAIT)
                        except RequestError as e:
                            assert e.code == -32010, e  # not -32603
                            assert "may or may not" in str(e.data), e.data
                            cut_off.append(text)
                    assert cut_off, "no post was under way on the host as its node died"
                    await asyncio.to_thread(_python, env, WHERE, head.address, eid, first.temp_dir)
                    said = await conn.prompt(session_id=eid, prompt=[text_block("after")])
                    assert said.stop_reason == "end_turn"  # acknowledged, on the same id
                    again, fresh, w2 = await _attach(record, eid)  # a client loading it afresh
                    conns.append((again, w2))
                    for seen in (client, fresh):
                        await seen.until(
                            lambda seen=seen: (
                                seen.said(eid, "agent_message_chunk").count("done") >= 2
                            )
                        )
                    users = fresh.said(eid, "user_message_chunk")  # (the system prompt first)
                    assert users[-2:] == ["before", "after"] and users.count("before") == 1
                    assert client.said(eid, "user_message_chunk") == users  # once each
                    for seen in (fresh, client):  # one answer and one tool call per prompt
                        assert seen.said(eid, "agent_message_chunk").count("done") == 2
                        kinds = [u["sessionUpdate"] for u in seen.updates[eid]]
                        calls = [
                            u["toolCallId"]
                            for u in seen.updates[eid]
                            if u["sessionUpdate"] == "tool_call"
                        ]
                        assert len(calls) == len(set(calls)) == 2, kinds

                    # the cut-off session goes on under its id: a prompt is acknowledged
                    # and answered (whether a cut-off message is in the restored conversation
                    # is what the client reads there: it may or may not be)
                    said = await held.prompt(session_id=cut, prompt=[text_block("later")])
                    assert said.stop_reason == "end_turn"
                    await holder.until(
                        lambda: "echo: later" in holder.said(cut, "agent_message_chunk")
                    )
            finally:
                for conn, writer in conns:
                    await conn.close()
                    writer.close()
                await asyncio.to_thread(_stop, serve)


ORCHESTRATOR = """
import sys
import agent_channel_ray as acr
from agent_channel_react.demo import orchestrator
acr.connect(sys.argv[1])
ref = acr.launch(  # the factory's body, as `serve --demo orchestrator` runs it
    orchestrator(), store=sys.argv[2], title="orchestrator",
    options={"resources": {"agent": 0.001}}, live=True,
)
print(ref.execution_id, flush=True)
"""


CONVERSATION = """
import sys, json
import agent_channel_ray as acr
acr.connect(sys.argv[1])
print(json.dumps([[m.role, m.text[:200]] for m in acr.ref_for(sys.argv[2]).messages()]))
"""


def _verb(env: dict[str, str], tmp: Path, *args: str) -> Any:
    """One verb against ``serve --ray`` (``--json``), its answer."""
    run = subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", *args, "--json"],
        env={**env, "AGENT_CHANNEL_RUNTIME_DIR": str(tmp / "rt")},
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_d6_children_running_when_the_node_dies_are_announced_lost_through_serve_ray(
    tmp_path: Path,
) -> None:
    """Durability's D6 for a Ray execution, as an operator sees it: the orchestrator demo
    (three researcher children, each step a second) loses its node while children run;
    restored on another node, it tells its model a child was "lost in a restart", and
    ``serve --ray`` shows the restored conversation under the same id, that message
    included, as the execution has it (it froze at the kill: the messages the restore
    added before the watcher's new snapshot were never announced)."""
    pytest.importorskip("agent_channel_acp")
    with tempfile.TemporaryDirectory(prefix="ray-d6-", dir="/tmp") as tmp:
        env = ray_env(tmp, RAY_AUTH_MODE="token", AGENT_CHANNEL_DEMO_TOOL_SECONDS="1.0")
        agent = ("--num-cpus=0", f"--resources={AGENT}")
        with (
            ray_head("--num-cpus=0", f"--system-config={HEALTH_CHECK}", env=env) as head,
            ray_node(f"--address={head.address}", *agent, env=env) as first,
        ):
            store = str(Path(tmp) / "store.db")
            eid = _python(env, ORCHESTRATOR, head.address, store)
            serve, _ = _serve_ray(env, tmp_path, head.address)
            try:

                def children() -> list[dict[str, Any]]:
                    listed = _verb(env, tmp_path, "ls")["servers"]
                    found = [e for s in listed for e in s["executions"] if e["id"] == eid]
                    return found[0].get("children", []) if found else []

                _until(lambda: len(children()) == 3, "three children")
                assert any(c["status"] != "ended" for c in children()), "the premise"
                with ray_node(f"--address={head.address}", *agent, env=env):
                    first.stop()  # its node dies while children run

                    def seen() -> list[tuple[str, str]]:  # the conversation serve --ray shows
                        said = _verb(env, tmp_path, "messages", eid, "--all", "--full")
                        return [
                            (m["role"], m["content"] if isinstance(m["content"], str) else "")
                            for m in said["messages"]
                        ]

                    def answered() -> bool:
                        return any(t.startswith("Answer on") for r, t in seen() if r == "assistant")

                    _until(answered, "the restored orchestrator's answer shown")
                    shown = seen()
                    lost = [t for r, t in shown if r == "user" and "lost in a restart" in t]
                    assert lost, shown  # D6: a child running at the kill is announced lost
                    direct = json.loads(_python(env, CONVERSATION, head.address, eid))
                    assert [r for r, _ in shown] == [r for r, _ in direct]  # the same, once
                    assert re.findall(r"Child (\S+) \(id", " ".join(lost)), lost  # by name
            finally:
                _stop(serve)
