"""Approvals and questions routed onto a RayRef answer the body on the cluster, as a local
ref's do: on the loop that routed them, cancelled with the asking turn, until released."""

from __future__ import annotations

import threading

import agent_channel_ray as acr
import anyio
import cluster_bodies as bodies
import pytest
import ray
from agent_channel import Answer, Question, ToolCall, UserMessage
from agent_channel.questions import NO_ONE

pytestmark = pytest.mark.anyio

WAIT = 60.0  # a guard against a hang, never a threshold


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


async def said(ref: acr.RayRef, text: str) -> None:
    """Until the body has said ``text`` (polled, with a guard)."""

    def texts() -> list[str]:
        return [m.text for m in ref.messages()]

    with anyio.fail_after(WAIT):
        while text not in await anyio.to_thread.run_sync(texts):  # noqa: ASYNC110 (on the cluster)
            await anyio.sleep(0.02)


async def test_a_routed_approver_answers_on_the_loop_that_routed_it(pool: object) -> None:
    ref = acr.launch(bodies.asks, host=pool)
    loop_thread = threading.get_ident()
    asked: list[tuple[str, bool]] = []

    async def approver(call: ToolCall) -> bool:
        asked.append((call.id, threading.get_ident() == loop_thread))
        return call.id == "yes"

    release = ref.route_approvals(approver)
    ref.post(UserMessage("approve yes"))
    await said(ref, "yes: True")
    ref.post(UserMessage("approve no"))  # a rejection reaches the body as False
    await said(ref, "no: False")
    assert asked == [("yes", True), ("no", True)]
    release()
    ray.cancel(ref.run)


async def test_an_interrupt_withdraws_the_request_and_cancels_the_approver(pool: object) -> None:
    ref = acr.launch(bodies.asks, host=pool)
    approver = Hanging()
    entered, cancelled = approver.entered, approver.cancelled

    release = ref.route_approvals(approver)
    ref.post(UserMessage("approve slow"))
    with anyio.fail_after(WAIT):
        await entered.wait()
    ref.interrupt()
    with anyio.fail_after(WAIT):
        await cancelled.wait()
    await said(ref, "interrupted")
    release()
    ray.cancel(ref.run)


async def test_a_routed_resolver_answers_the_bodys_question(pool: object) -> None:
    ref = acr.launch(bodies.asks, host=pool)
    questions: list[str] = []

    async def resolver(q: Question) -> Answer:
        questions.append(q.text)
        return Answer("blue")

    release = ref.route_questions(resolver)
    ref.post(UserMessage("ask which colour?"))
    await said(ref, "answer: blue")
    assert questions == ["which colour?"]
    release()
    ray.cancel(ref.run)


async def test_release_restores_what_the_execution_had(pool: object) -> None:
    ref = acr.launch(bodies.asks, host=pool)

    async def approver(call: ToolCall) -> bool:
        return True

    async def resolver(q: Question) -> Answer:
        return Answer("routed")

    releases = [ref.route_approvals(approver), ref.route_questions(resolver)]
    ref.post(UserMessage("approve a"))
    await said(ref, "a: True")
    for release in releases:
        release()
        release()  # a second release does nothing, as a local one
    ref.post(UserMessage("approve b"))
    await said(ref, "b: no approver")
    ref.post(UserMessage("ask anyone?"))
    await said(ref, f"answer: No answer: {NO_ONE}.")
    ray.cancel(ref.run)


async def test_an_approver_that_raises_fails_the_ask_and_bad_input_is_a_type_error(
    pool: object,
) -> None:
    ref = acr.launch(bodies.asks, host=pool)

    async def approver(call: ToolCall) -> bool:
        raise ValueError("no such policy")

    with pytest.raises(TypeError, match="route_approvals\\(\\) takes an async callable"):
        ref.route_approvals("not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="route_questions\\(\\) takes an async callable"):
        ref.route_questions(None)  # type: ignore[arg-type]
    release = ref.route_approvals(approver)
    ref.post(UserMessage("approve x"))
    await said(ref, "failed: ValueError: no such policy")
    release()
    ray.cancel(ref.run)


async def test_a_dead_actor_ends_the_routing_and_cancels_the_approver() -> None:
    ref = acr.launch(bodies.asks)  # an actor of its own, to kill
    approver = Hanging()
    entered, cancelled = approver.entered, approver.cancelled

    release = ref.route_approvals(approver)
    ref.post(UserMessage("approve doomed"))
    with anyio.fail_after(WAIT):
        await entered.wait()
    ray.kill(ref.host)
    with anyio.fail_after(WAIT):
        await cancelled.wait()
    release()  # nothing left to release: no error


ROUTER = """
import sys, anyio, agent_channel_ray as acr
async def main():
    acr.connect(sys.argv[1])
    ref = acr.ref_for(sys.argv[2])
    async def never(call):
        print("asked", flush=True)
        await anyio.sleep_forever()
    ref.route_approvals(never)
    ref.snapshot()  # a later call of this process: the route (asked first) is in effect
    print("routed", flush=True)
    await anyio.sleep_forever()
anyio.run(main)
"""


def test_a_router_whose_process_died_lets_the_request_go_to_what_was_there(pool: object) -> None:
    """The routing process is killed while its approver holds a request: after the lease
    the route ends and the request is asked of what the execution had (none: refused)."""
    import os
    import subprocess
    import sys
    import time

    ref = acr.launch(bodies.asks, host=pool)
    address = ray.get_runtime_context().gcs_address
    proc = subprocess.Popen(
        [sys.executable, "-c", ROUTER, address, ref.execution_id],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "routed"
        ref.post(UserMessage("approve z"))
        assert proc.stdout.readline().strip() == "asked"
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + WAIT  # a guard against a hang, never a threshold
    while "z: False" not in [m.text for m in ref.messages()]:  # the lease ran out: refused
        assert time.monotonic() < deadline, "the route outlived its router"
        time.sleep(0.05)
    ray.cancel(ref.run)


class Hanging:
    """An approver that never answers: says when it was asked and when it was cancelled."""

    def __init__(self) -> None:
        self.entered, self.cancelled = anyio.Event(), anyio.Event()

    async def __call__(self, call: ToolCall) -> bool:
        self.entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.cancelled.set()
        return True


LEAVER = """
import sys, threading, anyio, ray, agent_channel_ray as acr
errors = []
threading.excepthook = lambda args: errors.append(args.exc_type.__name__)
async def main():
    acr.connect(sys.argv[1])
    ref = acr.ref_for(sys.argv[2])
    async def never(call):
        await anyio.sleep_forever()
    ref.route_approvals(never)
    ref.snapshot()  # a later call of this process: the route (asked first) is in effect
    ray.shutdown()  # the driver leaves while its route's thread waits on the host
    for thread in threading.enumerate():
        if thread.name.startswith("ray-approvals-"):
            thread.join(60)
    print("thread errors:", errors, flush=True)
anyio.run(main)
"""


def test_a_router_that_shuts_ray_down_ends_its_route_quietly(pool: object) -> None:
    """Ray raises ``SystemExit`` (not an ``Exception``) in a thread waiting in ``ray.get``
    when its driver shuts down: the route's thread ends without an unhandled exception
    (seen as PytestUnhandledThreadExceptionWarning in the serve --ray suite)."""
    import os
    import subprocess
    import sys

    ref = acr.launch(bodies.asks, host=pool)
    address = ray.get_runtime_context().gcs_address
    env = {**os.environ, "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "RAY_ENABLE_AUTO_CONNECT": "0"}
    run = subprocess.run(
        [sys.executable, "-c", LEAVER, address, ref.execution_id],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "thread errors: []" in run.stdout, run.stdout + run.stderr[-2000:]
    ray.cancel(ref.run)
