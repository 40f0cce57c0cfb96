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

import json
import os
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
