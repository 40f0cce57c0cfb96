"""A fleet outlives its launcher (N1): executions launched by a driver that exits keep
running, any later driver lists and drives them, and ending one frees its actor.

Each driver here is a process of its own joining the session's cluster by its address (with
the token, as any driver must)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import agent_channel_ray as acr
import cluster_bodies as bodies
import pytest
import ray
from ray.exceptions import RayActorError

HERE = Path(__file__).parent
DEADLINE = 90.0

LAUNCHER = """
import sys
sys.path.insert(0, sys.argv[2])
import agent_channel_ray as acr, ray, cluster_bodies as bodies
acr.connect(sys.argv[1])
ray.cloudpickle.register_pickle_by_value(bodies)
refs = [acr.launch(bodies.inbox, title=f"fleet {i}") for i in range(3)]
print(ray.get_runtime_context().get_job_id())
print(" ".join(ref.execution_id for ref in refs), flush=True)
"""

DRIVER = """
import sys, time
import agent_channel_ray as acr
from agent_channel import UserMessage
acr.connect(sys.argv[1])
ids = sys.argv[2].split()
running = {r.execution_id for r in acr.executions() if r.status == "running"}
assert set(ids) <= running, (ids, running)
for eid in ids:
    acr.ref_for(eid).post(UserMessage("after its launcher"))
end = time.monotonic() + 60
for eid in ids:
    ref = acr.ref_for(eid)
    while [m.text for m in ref.messages()] != ["after its launcher"]:
        assert time.monotonic() < end, ref.messages()
        time.sleep(0.05)
print("folded in")
"""


def _python(code: str, *args: str) -> list[str]:
    env = {**os.environ, "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}  # the token mode with it
    run = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=180
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.strip().splitlines()


def _job_ended(job_id: str) -> bool:
    from ray._private import state  # the GCS's job table (no dashboard here)

    return any(j["JobID"] == job_id and j["IsDead"] for j in state.jobs())


def _wait(condition: object, what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < end, f"{what} never happened"
        time.sleep(0.05)  # polling an observable state with a deadline


def test_n1_a_fleet_outlives_its_launcher_and_ending_one_frees_its_actor() -> None:
    address = ray.get_runtime_context().gcs_address
    job, ids = _python(LAUNCHER, address, str(HERE))
    launched = ids.split()
    _wait(lambda: _job_ended(job), "the launcher's job ending")  # its driver is gone
    listed = {r.execution_id: r for r in acr.executions()}
    assert all(listed[eid].status == "running" for eid in launched), listed
    assert _python(DRIVER, address, ids) == ["folded in"]  # a second process drives them
    first, *rest = launched
    ref = acr.ref_for(first)
    host = ref.host
    assert ref.end()
    record = next(r for r in acr.executions() if r.execution_id == first)
    assert (record.status, record.reason) == ("ended", "cancelled")
    with pytest.raises(RayActorError):  # its actor is freed
        ray.get(host.ping.remote(), timeout=DEADLINE)
    assert ref.closed and not ref.end()  # ending it again: nothing to end
    for eid in rest:  # the others still run, until ended
        assert not acr.ref_for(eid).closed
        assert acr.ref_for(eid).end()
    assert all(r.status == "ended" for r in acr.executions() if r.execution_id in launched)
    assert [m.text for m in acr.ref_for(rest[0]).messages()] == []  # its actor was freed


def _cli(rt: Path, *args: str, **popen: Any) -> Any:
    env = {**os.environ, "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "AGENT_CHANNEL_RUNTIME_DIR": str(rt)}
    command = [sys.executable, "-m", "agent_channel_acp", *args]
    if popen:
        return subprocess.Popen(command, env=env, text=True, **popen)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=DEADLINE)


def test_n1_serve_ray_lists_a_fleet_whose_launcher_exited_and_its_end_verb_frees_one(
    tmp_path: Path,
) -> None:
    pytest.importorskip("agent_channel_acp")
    address = ray.get_runtime_context().gcs_address
    job, ids = _python(LAUNCHER, address, str(HERE))
    launched = ids.split()
    _wait(lambda: _job_ended(job), "the launcher's job ending")
    rt = tmp_path / "rt"
    server = _cli(rt, "serve", "--ray", address, "--json", stdout=subprocess.PIPE)
    try:
        assert server.stdout.readline(), "serve --ray did not start"

        def served() -> set[str]:
            run = _cli(rt, "ls", "--json")
            listing = json.loads(run.stdout) if run.returncode == 0 else {"servers": []}
            return {e["id"] for s in listing["servers"] for e in s["executions"]}

        _wait(lambda: set(launched) <= served(), "serve --ray listing the fleet")
        run = _cli(rt, "end", launched[0])
        assert run.returncode == 0, run.stderr

        def ended() -> bool:
            return any(
                r.execution_id == launched[0] and r.status == "ended" for r in acr.executions()
            )

        _wait(ended, "the registry listing it ended")
    finally:
        server.terminate()
        server.wait(DEADLINE)
        server.stdout.close()
    running = {r.execution_id for r in acr.executions() if r.status == "running"}
    assert set(launched[1:]) <= running  # stopping the server left them running
    for eid in launched[1:]:
        assert acr.ref_for(eid).end()


def test_n1_ended_records_are_bounded() -> None:
    from agent_channel_ray import _registry

    assert _registry.ENDED_LIMIT == 1_000 and _registry.RUNNING_LIMIT == 10_000


def test_n1_a_watcher_behind_the_end_sees_how_it_ended_not_a_dead_actor() -> None:
    """``end`` frees the execution's own actor once its run is over: a watcher that had not
    read the end yet (its callback busy with the event before) still sees the execution
    finish as it did, cancelled, and not as an actor that died (``serve --ray`` listed an
    ended execution ``failed`` when its watcher lost that race, under load)."""
    import threading

    from agent_channel import ExecutionEvent, ExecutionFinished, MessageAppended, UserMessage

    ref = acr.launch(bodies.inbox, title="watched")
    seen: list[ExecutionEvent] = []
    busy, go, done = threading.Event(), threading.Event(), threading.Event()

    def callback(event: ExecutionEvent) -> None:
        seen.append(event)
        if isinstance(event, MessageAppended):
            busy.set()
            go.wait(DEADLINE)  # the watcher reads no further until the actor is freed
        if isinstance(event, ExecutionFinished):
            done.set()

    _, unsubscribe = ref.watch(callback)
    ref.post(UserMessage("one"))
    assert busy.wait(DEADLINE)
    host = ref.host
    assert ref.end()  # its run cancelled, its actor freed
    with pytest.raises(RayActorError):
        ray.get(host.ping.remote(), timeout=DEADLINE)
    go.set()
    assert done.wait(DEADLINE)
    unsubscribe()
    (finished,) = [e for e in seen if isinstance(e, ExecutionFinished)]
    assert (finished.stop_reason, finished.error) == ("cancelled", None)
