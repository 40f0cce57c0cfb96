"""A RayRef behaves as a local AgentRef: the same round trips, the same errors."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import agent_channel_ray as acr
import cluster_bodies as bodies
import pytest
import ray
from agent_channel import (
    AgentRef,
    ChannelClosed,
    ChannelFull,
    ExecutionEvent,
    ExecutionFinished,
    MessageAppended,
    UserMessage,
)


def _texts(ref: acr.RayRef | AgentRef) -> list[str]:
    return [m.text for m in ref.messages()]


def test_post_is_folded_in_and_the_body_returns() -> None:
    """An actor of its own: freed once its execution ends (the conversation goes with it)."""
    ref = acr.launch(bodies.inbox, title="inbox")
    ref.post(UserMessage("one"))
    ref.post(UserMessage("two"))
    deadline = time.monotonic() + 60
    while _texts(ref) != ["one", "two"]:
        assert time.monotonic() < deadline, _texts(ref)
        time.sleep(0.02)  # polling the conversation, with a deadline
    ref.post(UserMessage("stop"))
    assert ref.result(timeout=60) == 2
    assert ref.closed


def test_errors_are_the_local_refs_own(pool: object) -> None:
    ref = acr.launch(bodies.inbox, host=pool)
    with pytest.raises(TypeError) as remote:
        ref.post("not an item")  # type: ignore[arg-type]
    assert not isinstance(remote.value, ray.exceptions.RayError)
    with pytest.raises(TypeError):
        ref.interrupt("not a cancel")  # type: ignore[arg-type]
    ref.post(UserMessage("stop"))
    ref.result(timeout=60)
    with pytest.raises(ChannelClosed) as closed:
        ref.post(UserMessage("late"))
    assert type(closed.value) is ChannelClosed


def test_a_full_channel_raises_channel_full(pool: object) -> None:
    ref = acr.launch(bodies.forever, host=pool, max_queued=2)
    ref.post(UserMessage("a"))
    ref.post(UserMessage("b"))
    with pytest.raises(ChannelFull):
        ref.post(UserMessage("c"))
    ray.cancel(ref.run)


def test_withdraw_takes_back_a_queued_item(pool: object) -> None:
    ref = acr.launch(bodies.forever, host=pool)
    item = UserMessage("take me back")
    ref.post(item)
    assert ref.withdraw(item.id) is True
    assert ref.withdraw(item.id) is False
    assert ref.cancel_region("no-such-region") is False
    ray.cancel(ref.run)


def test_interrupt_arrives_as_agent_interrupted_in_the_body(pool: object) -> None:
    ref = acr.launch(bodies.stoppable, host=pool)
    seen = threading.Event()
    snapshot, stop = ref.watch(lambda e: seen.set() if e.type == "turn_started" else None)
    if snapshot.turn_state != "started":  # the scope may be entered before we watch
        assert seen.wait(60)
    ref.interrupt()
    assert ref.result(timeout=60) == "interrupted"
    stop()


def test_a_ref_from_the_registry_drives_the_same_execution(pool: object) -> None:
    launched = acr.launch(bodies.inbox, title="listed", host=pool)
    found = acr.ref_for(launched.execution_id)
    found.post(UserMessage("via the registry"))
    found.post(UserMessage("stop"))
    assert launched.result(timeout=60) == 1
    assert _texts(found) == ["via the registry"]
    with pytest.raises(LookupError):
        acr.ref_for("no-such-execution")


def test_a_late_watcher_gets_snapshot_then_live_with_no_gap(pool: object) -> None:
    """A thread posts while watchers join at random moments: each watcher's snapshot plus
    the events it is called with hold every message once, in order."""
    total = 60
    ref = acr.launch(bodies.inbox, host=pool)
    joined: list[tuple[list[str], list[ExecutionEvent], threading.Event]] = []
    lock = threading.Lock()
    stops: list[Callable[[], None]] = []

    def post_all() -> None:
        for i in range(total):
            ref.post(UserMessage(f"m{i}"))

    poster = threading.Thread(target=post_all)
    poster.start()
    for _ in range(5):
        done = threading.Event()
        events: list[ExecutionEvent] = []

        def on_event(
            e: ExecutionEvent, events: list[ExecutionEvent] = events, done: threading.Event = done
        ) -> None:
            with lock:
                events.append(e)
            if isinstance(e, ExecutionFinished):
                done.set()

        snapshot, stop = ref.watch(on_event)
        stops.append(stop)
        joined.append(([m.text for m in snapshot.messages], events, done))
    poster.join()
    ref.post(UserMessage("stop"))
    ref.result(timeout=60)
    expected = [f"m{i}" for i in range(total)]
    for before, events, done in joined:
        assert done.wait(60)
        live = [e.message.text for e in events if isinstance(e, MessageAppended)]
        assert before + live == expected
    for stop in stops:
        stop()
