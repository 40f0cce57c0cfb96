"""Durable runs crashed at random moments (D3, D4): in process (an outer cancellation) with a
thread posting operator messages meanwhile, and in a real subprocess killed with SIGKILL.
Every message whose ``post`` returned is in the final conversation exactly once, in order,
and the conversation stays one a model accepts."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from agent_channel import (
    AgentRef,
    ChannelClosed,
    ChannelFull,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageUser,
    UserMessage,
)
from agent_channel_react import Agent, AgentState, ScriptedModel, Tool, react
from agent_channel_react.demo import TOOL_SECONDS_ENV, TOOLS, demo_script, task_demo
from agent_channel_sqlite import open_store

from .durable import EID, run_durable, stored, well_formed
from .durable import numbers as numbered
from .helpers import Recorder

pytestmark = pytest.mark.anyio
CHILD = Path(__file__).with_name("durable_child.py")


class Poster(threading.Thread):
    """Posts ``msg 1``, ``msg 2`` ... to whichever run is current, at random moments; a
    number is acked once its ``post`` returned (refused ones are posted again)."""

    def __init__(self, seed: int) -> None:
        super().__init__(daemon=True)
        self.ref: AgentRef | None = None
        self.acked: list[int] = []
        self.done = threading.Event()
        self.random = random.Random(seed)

    def run(self) -> None:
        n = 1
        while not self.done.is_set():
            ref = self.ref
            if ref is not None:
                try:
                    ref.post(UserMessage(f"msg {n}"))
                except (ChannelClosed, ChannelFull):
                    pass
                else:
                    self.acked.append(n)
                    n += 1
            time.sleep(self.random.uniform(0, 0.004))


def _demo_tools() -> list[Tool]:
    return list(TOOLS)


async def test_d4_hammer_messages_posted_while_crashing_arrive_exactly_once_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOOL_SECONDS_ENV, "0.003")
    path = tmp_path / "s.db"
    rng = random.Random(19)
    poster = Poster(seed=4)
    poster.start()
    try:
        for _ in range(12):

            async def crash_soon(ref: AgentRef, rec: Recorder) -> None:
                poster.ref = ref
                await anyio.sleep(rng.uniform(0, 0.08))

            agent = react(model=ScriptedModel(demo_script), tools=_demo_tools(), submit=False)
            await run_durable(path, agent, live=True, until=crash_soon)
            well_formed(stored(path), in_flight=True)
    finally:
        poster.done.set()
        poster.join()
    acked = poster.acked
    assert len(acked) > 20

    async def settle(ref: AgentRef, rec: Recorder) -> None:
        ref.post(UserMessage("msg END"))
        with anyio.fail_after(30):
            while True:
                messages = ref.messages()
                # Answered after the user message that carried it: messages queued before it
                # may fold into that one, and the tool's query keeps only its first 80
                # characters, so the line before the answer need not name it.
                end = [
                    i for i, m in enumerate(messages) if "msg END" in m.text and m.role == "user"
                ]
                if end and _answered_last(messages) and end[0] < len(messages) - 1:
                    return
                await anyio.sleep(0.01)

    agent = react(model=ScriptedModel(demo_script), tools=_demo_tools(), submit=False)
    await run_durable(path, agent, live=True, until=settle)
    final = stored(path)
    well_formed(final)
    assert numbered(final) == acked  # each once, in the order posted
    store = open_store(path)
    try:
        restored = store.journal(EID).restored()
        assert restored is not None and restored.pending == ()
    finally:
        store.close()


def _answered_last(messages: tuple[ChatMessage, ...]) -> bool:
    last = messages[-1] if messages else None
    return isinstance(last, ChatMessageAssistant) and not last.tool_calls


async def test_d4_the_task_demo_goes_on_after_crashes_at_random_moments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOOL_SECONDS_ENV, "0.01")
    path = tmp_path / "s.db"
    rng = random.Random(7)
    for _ in range(8):

        async def crash_soon(ref: AgentRef, rec: Recorder) -> None:
            await anyio.sleep(rng.uniform(0.005, 0.06))

        await run_durable(path, _task_body(), live=True, until=crash_soon)
        well_formed(stored(path), in_flight=True)

    async def briefed(ref: AgentRef, rec: Recorder) -> None:
        with anyio.fail_after(30):
            while not any(m.text.startswith("Briefing:") for m in ref.messages()):  # noqa: ASYNC110
                await anyio.sleep(0.01)

    await run_durable(path, _task_body(), live=True, until=briefed)
    final = stored(path)
    well_formed(final)
    tasks = [m for m in final if isinstance(m, ChatMessageUser) and m.source == "task"]
    assert len(tasks) == 1  # the task was not given again at any restart
    assert final[-1].text.startswith("Briefing:")


def _task_body() -> Agent:
    """The task demo's body as an agent (the state it is given is not used: the body
    starts from the task, and a restored run from the store)."""
    body = task_demo()

    async def agent(state: AgentState) -> AgentState:
        return await body()

    return agent


def test_d4_a_subprocess_killed_with_sigkill_goes_on_and_loses_no_acked_message(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    rng = random.Random(1919)
    env = {**os.environ, TOOL_SECONDS_ENV: "0.01"}
    acked: list[int] = []
    lives = 5
    for life in range(lives):
        # Each life numbers from a block of its own: the post in flight when it is killed may
        # be stored without its ack printed, and must not share a number with the next's.
        start = life * 1_000_000 + 1
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(path), "post", str(start)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        lines: list[str] = []
        reader = threading.Thread(target=lines.extend, args=(proc.stdout,), daemon=True)
        reader.start()
        deadline = time.monotonic() + 30
        while not any(x.startswith("ack") for x in lines) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        reader.join(10)
        got = [int(x.split()[1]) for x in lines if x.startswith("ack ")]
        assert got, "the child acked nothing before it was killed"
        acked += got
        well_formed(stored(path), in_flight=True)
    # The last life: no more posting; it takes what is queued, answers, parks, exits.
    done = subprocess.run(
        [sys.executable, str(CHILD), str(path), "settle", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    final = stored(path)
    well_formed(final)
    seen = numbered(final)
    assert seen == sorted(set(seen))  # each once, in the order posted
    assert set(acked) <= set(seen)  # nothing acknowledged was lost
    assert len(set(seen) - set(acked)) <= lives  # at most the one in flight at each kill
    assert final[-1].role == "assistant"
