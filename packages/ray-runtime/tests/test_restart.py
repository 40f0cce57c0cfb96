"""A ref's watcher across its host's restart (a durable execution's actor restarted in place,
as after its node died, without a second node): what it tells its callback (D6)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import agent_channel_ray as acr
import cluster_bodies as bodies
import ray
from agent_channel import ChatMessage, ExecutionEvent, MessageAppended, UserMessage

WAIT = 120.0


def _until(condition: Any, what: str) -> None:
    """Poll an observable ``condition`` with a deadline (not a sleep as synchronisation)."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"{what} never held"
        time.sleep(0.05)


def _texts(messages: tuple[ChatMessage, ...]) -> list[str]:
    return [m.text for m in messages]


def _restored(ref: acr.RayRef) -> list[str]:
    try:
        return _texts(ref.messages())
    except Exception:  # restarting
        return []


def test_d6_a_watcher_is_told_what_the_restore_added_before_its_snapshot(tmp_path: Path) -> None:
    """The restored body adds a message before the watcher's snapshot of it (as the ReAct
    loop's "interrupted by a restart" result, a child "lost in a restart"). A watcher keeping
    the conversation from ``MessageAppended`` (as ``serve --ray``'s hub: an index past its end
    is dropped) has the execution's conversation, not one frozen at the kill; and it is told
    no message twice. On main it froze: ``['before', 'echo: before']``."""
    ref = acr.launch(bodies.durable_noted, store=str(tmp_path / "store.db"), title="noted")
    kept: list[str] = []  # the conversation as a hub keeps it
    told: list[tuple[int, str]] = []
    lock = threading.Lock()

    def watcher(event: ExecutionEvent) -> None:
        if not isinstance(event, MessageAppended):
            return
        with lock:
            told.append((event.index, event.message.id))
            if event.index == len(kept):
                kept.append(event.message.text)
            elif event.index < len(kept):
                kept[event.index] = event.message.text

    snapshot, release = ref.watch(watcher)
    assert snapshot.messages == ()
    try:
        ref.post(UserMessage("before"))
        _until(lambda: kept == ["before", "echo: before"], "the first answer told")
        ray.kill(ref.host, no_restart=False)  # restarted, its run submitted again: restored
        _until(lambda: "noted on restore" in _restored(ref), "the restore")
        ref.post(UserMessage("after"))
        _until(lambda: "echo: after" in _restored(ref), "the answer after the restart")
        direct = ref.messages()
        last = (len(direct) - 1, direct[-1].id)
        _until(lambda: last in told, "the watcher told the answer after the restart")
        with lock:
            assert kept == _texts(direct), told
            assert len(told) == len(set(told)), told  # nothing told twice
    finally:
        release()
        ref.end()


def test_d6_a_watcher_between_two_polls_as_its_host_restarts_resyncs(tmp_path: Path) -> None:
    """The watcher is handing an event to its callback (not waiting on the host) while the
    host restarts: its next poll reaches the restarted host, whose event numbers started
    again. It resyncs as after a poll the restart broke (the host's incarnation comes with
    each batch). Before: it asked the new host for the old numbers and skipped what they
    covered (``['before', 'echo: before']``, told only index 4)."""
    ref = acr.launch(bodies.durable_noted, store=str(tmp_path / "store.db"), title="between")
    kept: list[str] = []
    told: list[tuple[int, str]] = []
    held, go = threading.Event(), threading.Event()

    def watcher(event: ExecutionEvent) -> None:
        if not isinstance(event, MessageAppended):
            return
        told.append((event.index, event.message.id))
        if event.index == len(kept):
            kept.append(event.message.text)
        elif event.index < len(kept):
            kept[event.index] = event.message.text
        if event.message.text == "echo: before":  # the watcher held, off the host
            held.set()
            go.wait(WAIT)

    _, release = ref.watch(watcher)
    try:
        ref.post(UserMessage("before"))
        assert held.wait(WAIT)
        ray.kill(ref.host, no_restart=False)
        _until(lambda: "noted on restore" in _restored(ref), "the restore")
        go.set()  # its next poll reaches the restarted host
        ref.post(UserMessage("after"))
        _until(lambda: "echo: after" in _restored(ref), "the answer after the restart")
        direct = ref.messages()
        last = (len(direct) - 1, direct[-1].id)
        _until(lambda: last in told, "the watcher told the answer after the restart")
        assert kept == _texts(direct), told
        assert len(told) == len(set(told)), told
    finally:
        go.set()
        release()
        ref.end()
