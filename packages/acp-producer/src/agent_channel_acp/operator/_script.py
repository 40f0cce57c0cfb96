"""The demo's operator script: ``agent-channel-acp demo --script`` (and any non-terminal).

It starts ``agent-channel-acp serve --demo`` as a subprocess and plays an operator through
the console's own client (:class:`~._console._link.Link`, an ordinary ACP client over the
server's unix socket): send a message while the agent works, cancel one tool (the turn goes
on), interrupt mid-tool, redirect, queue a second thought and withdraw it, then let the
agent finish and end the execution. It prints what happened as a readable transcript and
exits 0, or 1 with the step that did not go as described.

Every step waits on something the wire shows (a card's status, a queue entry, a turn state),
never on a clock; the bound on each wait is a hang guard (:data:`STEP_SECONDS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import TextIO, TypeVar

from .._sigint import run
from .console._link import Link, LinkError
from .console._state import Entry, State

STEP_SECONDS = 60.0
"""Hang guard on one step of the script."""

FIRST = "What are you working on?"
REDIRECT = "Change of plan: brief me on operator consoles instead."
SECOND_THOUGHT = "Also add a section on pricing."


T = TypeVar("T")


class ScriptFailed(Exception):
    """A step did not go as described; the message says which."""


class _Player:
    def __init__(self, link: Link, out: TextIO) -> None:
        self.link = link
        self.state = link.state
        self.out = out
        self._changed = asyncio.Event()
        link.on_change = self._changed.set

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    async def until(self, what: str, check: Callable[[], T | None]) -> T:
        try:
            async with asyncio.timeout(STEP_SECONDS):
                while True:
                    found = check()
                    if found is not None and found is not False and found != "":
                        return found
                    if (ended := self.state.ended) is not None:  # nothing more will come
                        if error := ended.get("error"):
                            raise ScriptFailed(f"the execution failed before {what}: {error}")
                        why = ended.get("stopReason") or "it finished"
                        raise ScriptFailed(f"the execution ended before {what}: {why}")
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise ScriptFailed(f"waited in vain for {what}") from None

    def running_tool(self) -> Entry | None:
        running = self.state.running_tools()
        return running[-1] if running else None

    def _other_tool(self, old: Entry) -> Callable[[], Entry | None]:
        def check() -> Entry | None:
            tool = self.running_tool()
            return tool if tool is not None and tool.key != old.key else None

        return check

    def card(self, key: str) -> Entry:
        return self.state.entries[key]

    async def play(self) -> None:
        link, state = self.link, self.state
        await self.until("the console to bind", lambda: state.role)
        self.say(f"attached to {state.title or state.execution_id} as {state.role}")

        tool = await self.until("the agent's first tool call", self.running_tool)
        self.say(f"the agent works on its task: {tool.title} is running")

        self.say(f"operator sends: {FIRST!r} (while the agent works)")
        local = await link.post(FIRST)
        self.say("  shown as queued until the agent reads it")

        self.say(f"operator cancels just this tool call: {tool.title}")
        if await link.cancel_tool(tool.key.removeprefix("tool:")):
            await self.until(
                "the card to turn cancelled", lambda: self.card(tool.key).status == "cancelled"
            )
            self.say(f"  card: {self.card(tool.key).line()}")
        else:  # an agent whose tool calls are not cancellable one by one (A22)
            self.say("  this agent's tool calls cannot be cancelled one by one; it finishes")
        await self.until("the echo of the message", lambda: local.key not in state.entries)
        self.say("  the agent read the message at its next step: its echo replaced the queued line")

        tool = await self.until("the tool call for the message", self._other_tool(tool))
        self.say(f"the agent runs {tool.title}; operator interrupts the turn (Esc)")
        await link.cancel()
        await self.until("turn_state cancelled", lambda: state.turn == "cancelled")
        self.say(f"  card: {self.card(tool.key).line()}")
        self.say(f"  indicator: {state.activity}")

        self.say(f"operator redirects: {REDIRECT!r}")
        await link.send(REDIRECT)
        tool = await self.until("the tool call for the redirect", self._other_tool(tool))
        self.say(f"  the agent follows it: {tool.title} is running")

        self.say(f"operator queues a second thought: {SECOND_THOUGHT!r}")
        local = await link.post(SECOND_THOUGHT)
        await self.until(
            "the message in the pending queue",
            lambda: local.message_id in {q.id for q in state.queue},
        )
        self.say(f"  pending queue: {[q.text for q in state.queue]}")
        if not await link.withdraw(local.message_id):
            raise ScriptFailed("the queued message could not be withdrawn")
        await self.until("the queue to empty", lambda: not state.queue)
        self.say("  withdrawn before the agent read it; the queue is empty")

        self.say("operator lets the agent finish")
        await self.until("the turn to end", lambda: state.turn == "ended")
        self.say(f"  card: {self.card(tool.key).line()}")
        self.say(f"  indicator: {state.activity}")

        self.say("operator ends the execution")
        await link.end("the demo is over")
        await self.until("session_ended", lambda: state.ended is not None)

        said = " ".join(e.text for e in state.entries.values() if e.kind == "operator")
        if SECOND_THOUGHT in said:
            raise ScriptFailed("the withdrawn message reached the agent")
        self.say("")
        self.say("The conversation, as the console shows it:")
        for entry in state.entries.values():
            if entry.kind != "system":
                self.say("  " + entry.line().replace("\n", "\n    "))


class _Watcher(_Player):
    """``demo --orchestrator`` piped: the children's lives as the operator sees them."""

    async def play(self) -> None:
        state = self.state
        await self.until("the console to bind", lambda: state.role)
        self.say(f"attached to {state.title or state.execution_id} as {state.role}")
        seen: set[tuple[str, str]] = set()

        def news() -> bool:
            self._answer_question()
            for c in state.children:
                status = str(c.get("status"))
                if status == "ended":
                    status = f"ended ({c.get('end')})"
                    if c.get("reason"):
                        status += f": {c.get('reason')}"
                if (str(c.get("id")), status) not in seen:
                    seen.add((str(c.get("id")), status))
                    self.say(f"  child {c.get('name')}: {status}")
            return len(state.children) >= 3 and all(
                c.get("status") == "ended" for c in state.children
            )

        self.say("the orchestrator spawns its researchers; their cards and the tree follow:")
        await self.until("every child to end", news)
        await self.until("the orchestrator's answer", self._ended_answering)
        answer = [e for e in state.entries.values() if e.kind == "agent"]
        if answer:
            self.say(f"the orchestrator answers: {answer[-1].text}")

    def _ended_answering(self) -> bool:
        self._answer_question()
        return self.state.turn == "ended"

    def _answer_question(self) -> None:
        """The orchestrator's question (asked as a permission request: the console shows no
        forms) answered as an operator would: the first choice (Q2)."""
        asked = self.state.approval
        if asked is None or not str(asked["toolCall"].get("toolCallId", "")).startswith(
            "question-"
        ):
            return
        options = [o for o in asked["options"] if str(o.get("optionId", "")).startswith("choice-")]
        if options and self.link.answer(str(options[0]["optionId"])):
            title = asked["toolCall"].get("title", "")
            self.say(f"the orchestrator asks: {title}; the operator picks {options[0].get('name')}")


def start_server(
    tool_seconds: float | None,
    model: str | None = None,
    *,
    quiet: bool = False,
    orchestrator: bool = False,
) -> tuple[subprocess.Popen[str], int]:
    """``serve --demo`` (with ``--model``), its stdout read up to its discovery line;
    ``quiet``: its log is not written over the console's screen (the console shows how
    the execution ended)."""
    env = dict(os.environ)
    if env.get("AGENT_CHANNEL_ACP_LOG", "").strip().upper() not in ("DEBUG", "INFO"):
        # the demo says how the execution ended itself; a server log line would say it twice
        env["AGENT_CHANNEL_ACP_LOG"] = "CRITICAL"
    if tool_seconds is not None:
        env["AGENT_CHANNEL_DEMO_TOOL_SECONDS"] = str(tool_seconds)
    flags = ["--model", model] if model else []
    demo = ["--demo", "orchestrator"] if orchestrator else ["--demo"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_channel_acp", "serve", *demo, "--json", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else None,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    try:
        return proc, int(json.loads(line)["pid"])
    except (ValueError, KeyError, TypeError):
        stop_server(proc)
        raise ScriptFailed(f"serve --demo did not start (exit status {proc.poll()})") from None


def stop_server(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


async def _play(pid: int, out: TextIO, *, orchestrator: bool = False) -> None:
    link = Link(State(), pid=pid)
    player = (_Watcher if orchestrator else _Player)(link, out)
    running = asyncio.ensure_future(link.run())
    try:
        await player.play()
    except LinkError as e:
        raise ScriptFailed(str(e)) from None
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


def run_script(
    *,
    tool_seconds: float | None = None,
    model: str | None = None,
    out: TextIO | None = None,
    orchestrator: bool = False,
) -> int:
    """Play the operator script against a fresh ``serve --demo`` (with ``orchestrator``:
    watch ``serve --demo orchestrator``'s children); the exit status."""
    sink = out if out is not None else sys.stdout
    if orchestrator:
        sink.write("agent-channel demo: an orchestrator's children, seen through ACP\n\n")
    else:
        sink.write("agent-channel demo: an operator drives a running agent through ACP\n\n")
    try:
        proc, pid = start_server(tool_seconds, model, orchestrator=orchestrator)
    except ScriptFailed as e:
        sys.stderr.write(f"agent-channel-acp: demo: {e}\n")
        return 1
    try:
        run(_play(pid, sink, orchestrator=orchestrator))
    except ScriptFailed as e:
        sys.stderr.write(f"agent-channel-acp: demo: {e}\n")
        return 1
    finally:
        stop_server(proc)
    sink.write("\ndemo finished: every step behaved as described\n")
    return 0
