"""How executions on the cluster end: a body's return, Ray's cancellation, a dead actor."""

from __future__ import annotations

import functools
import threading
import time

import agent_channel_ray as acr
import cluster_bodies as bodies
import pytest
import ray
from agent_channel import ChannelClosed, ExecutionEvent, ExecutionFinished, UserMessage
from ray.exceptions import TaskCancelledError

DEADLINE = 60.0


def _record(execution_id: str, status: str) -> acr.Record:
    """Poll the registry until ``execution_id`` has ``status`` (a deadline, not a sleep)."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        for record in acr.executions():
            if record.execution_id == execution_id and record.status == status:
                return record
        time.sleep(0.05)
    raise AssertionError(f"{execution_id} never became {status}")


def test_the_registry_lists_a_running_execution_then_its_end(pool: object) -> None:
    ref = acr.launch(bodies.stoppable, title="to stop", host=pool)
    running = _record(ref.execution_id, "running")
    assert running.title == "to stop"
    ref.interrupt()
    assert ref.result(timeout=DEADLINE) == "interrupted"
    assert _record(ref.execution_id, "ended").reason == "finished"


def test_ray_cancel_is_an_outer_cancellation_not_an_interrupt(pool: object) -> None:
    """``ray.cancel`` of the run reaches the body as a cancellation: ``AgentInterrupted`` is
    never raised in it (the body would have returned "interrupted")."""
    ref = acr.launch(bodies.stoppable, host=pool)
    finished = threading.Event()
    seen: list[ExecutionEvent] = []

    def on_event(event: ExecutionEvent) -> None:
        seen.append(event)
        if isinstance(event, ExecutionFinished):
            finished.set()

    _, stop = ref.watch(on_event)
    ray.cancel(ref.run)
    with pytest.raises(TaskCancelledError):
        ref.result(timeout=DEADLINE)
    assert finished.wait(DEADLINE)
    stop()
    assert _record(ref.execution_id, "ended").reason == "cancelled"
    assert ref.closed


def test_a_killed_actor_is_reported_ended_with_its_reason() -> None:
    ref = acr.launch(bodies.forever, title="to kill")  # an actor of its own
    _record(ref.execution_id, "running")
    ray.kill(ref.host)
    ended = _record(ref.execution_id, "ended")
    assert ended.reason is not None and ended.reason.startswith("its actor died")


def test_the_react_loop_runs_as_a_body(pool: object) -> None:
    from agent_channel import ChatMessageUser
    from agent_channel_react import AgentState

    state = AgentState(messages=[ChatMessageUser(content="?")])
    ref = acr.launch(functools.partial(bodies.quickstart_agent(), state), host=pool)
    done = ref.result(timeout=DEADLINE)
    assert (done.output.completion, done.output.end) == ("42", "submitted")
    assert any(m.role == "tool" for m in ref.messages())


def test_a_live_execution_waits_for_its_operator_between_turns(pool: object) -> None:
    """As ``serve`` runs its executions: with ``live=True`` an interactive agent parks after
    its answer for the operator's next message; without, nobody is there and it ends."""
    from agent_channel import ChatMessageUser
    from agent_channel_react import AgentState

    state = AgentState(messages=[ChatMessageUser(content="task")])
    alone = acr.launch(functools.partial(bodies.chatty_agent(), state), host=pool)
    assert alone.result(timeout=DEADLINE).output.completion == "first"
    live = acr.launch(functools.partial(bodies.chatty_agent(), state), host=pool, live=True)
    end = time.monotonic() + DEADLINE
    while live.snapshot().awaiting is None:
        assert time.monotonic() < end, "the live execution never parked"
        time.sleep(0.05)
    assert not live.closed and live.messages()[-1].text == "first"
    live.post(UserMessage("more"))
    while live.messages()[-1].text != "second":
        assert time.monotonic() < end, "the operator's message was not answered"
        time.sleep(0.05)
    ray.cancel(live.run)


def test_a_body_named_by_spec_runs_and_a_bad_spec_is_reported(pool: object) -> None:
    ref = acr.launch("asyncio:sleep", 0, host=pool)  # imported on the worker, then called
    assert ref.result(timeout=DEADLINE) is None
    assert _record(ref.execution_id, "ended").reason == "finished"
    bad = acr.launch("no-colon-here", host=pool)
    with pytest.raises(ValueError, match="module:attr"):
        bad.result(timeout=DEADLINE)
    reason = _record(bad.execution_id, "ended").reason
    assert reason is not None and reason.startswith("failed: ValueError: expected 'module:attr'")


def test_a_watcher_sees_the_execution_of_a_killed_actor_finish() -> None:
    """A local ref's watchers always see ``ExecutionFinished``; so do a Ray ref's when the
    actor dies (an attach server serving it would otherwise show it running forever)."""
    ref = acr.launch(bodies.forever, title="to kill, watched")  # an actor of its own
    finished: list[ExecutionFinished] = []
    seen = threading.Event()

    def on_event(event: ExecutionEvent) -> None:
        if isinstance(event, ExecutionFinished):
            finished.append(event)
            seen.set()

    _, stop = ref.watch(on_event)
    ray.kill(ref.host)
    assert seen.wait(DEADLINE)
    stop()
    (event,) = finished
    assert event.error is not None and event.error.startswith("its actor died")
    assert ref.messages() == ()  # the conversation died with the actor: no RayActorError
    with pytest.raises(ChannelClosed, match="its actor died"):
        ref.post(UserMessage("too late"))
