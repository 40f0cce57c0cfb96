"""The console under a fast stream: does it keep up, and is its memory bounded? JSON out.

    uv run python benchmarks/console_stream.py [--rate 5000] [--seconds 5]

``agent-channel-acp serve`` runs (as a subprocess) a react agent whose zero-latency model
streams ``rate`` chunks a second for ``seconds`` seconds, on schedule (each chunk is
``c<i> ``; every 500th says when the schedule started, 3 s after the task arrived so a
client can attach first). Two clients attach to it in this process, one after the other,
each to a server of its own:
- ``bare``: the console's link and state fold alone, no terminal (the baseline);
- ``console``: the Textual console in its headless harness, redrawing as it does on a
  terminal.

Measured for each, every 50 ms: lag = now minus the time the newest chunk it shows was due
(so a client that falls behind shows it however the server merges chunks). "Shows" is the
fold's text for ``bare`` and, for ``console``, the text the message widget last rendered
(the compositor's call, so a redraw that never happens counts as lag), and at the end
the peak of Python memory allocated (tracemalloc) above the start. Reported: the worst and
median lag of each, the console's worst lag as a ratio to the bare client's (same run), the
rate the agent really reached, and the memory. Target (issue 9): worst console lag at most
1 s at 5,000 chunks/s; memory bounded by the fold's caps (``MAX_ENTRIES`` entries of at
most ``MAX_TEXT`` characters) whatever the run's length. Not run in CI.

The agent factory is this file's ``factory`` (loaded by dotted path, this folder on
PYTHONPATH).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RATE_ENV = "CONSOLE_BENCH_RATE"
SECONDS_ENV = "CONSOLE_BENCH_SECONDS"
AGENT = ("--agent", "console_stream:factory", "--input", "go")
_LAST = re.compile(r"c(\d+) \S*$")


# -- the agent (runs in the serve subprocess) --------------------------------------------


def factory(model: str | None = None) -> Any:
    """A react agent whose model streams the benchmark's chunks, then waits for messages."""
    from agent_channel import ChatMessageAssistant
    from agent_channel_react import AgentState, ModelOutput, react

    rate = float(os.environ.get(RATE_ENV, "5000"))
    total = int(rate * float(os.environ.get(SECONDS_ENV, "5")))

    class StreamModel:
        name = "stream"

        def __init__(self) -> None:
            self.done = False

        async def generate(self, messages: Any, tools: Any, config: Any, stream: Any) -> Any:
            if self.done:
                await asyncio.Event().wait()  # stream once; then idle until ended
            self.done = True
            start = time.time() + 3.0  # a client attaches (and warms up) first
            stream.text(f"START@{start:.6f} ")
            await asyncio.sleep(max(0.0, start - time.time()))
            for i in range(total):
                due = start + i / rate
                if i % 50 == 0 and (ahead := due - time.time()) > 0:
                    await asyncio.sleep(ahead)
                stream.text(f"c{i} " if i % 500 else f"c{i} START@{start:.6f} ")
            stream.text(f"DONE@{time.time():.6f}")
            message = ChatMessageAssistant(id=stream.message_id, content="(streamed)")
            return ModelOutput(message=message)

    agent = react(model=StreamModel(), tools=(), prompt="stream", submit=False)  # pyright: ignore[reportArgumentType]

    async def body() -> Any:
        return await agent(AgentState())

    return body


# -- the clients (this process) ----------------------------------------------------------


class Probe:
    """Samples one client's lag from the newest agent text it has: the fold's (bare) or
    the text the console's widget last rendered (console)."""

    def __init__(self, text: Any, rate: float) -> None:
        self.text = text
        """Returns the agent text to look at ("" while there is none)."""
        self.rate = rate
        self.start: float | None = None
        self.lags: list[float] = []
        self.last = -1
        self.done_at: float | None = None
        """When the agent finished streaming (its last chunk says)."""

    def sample(self) -> None:
        text: str = self.text()
        if not text:
            return
        if self.start is None:
            m = re.search(r"START@([0-9.]+)", text[-30000:])
            if m is None:
                return
            self.start = float(m.group(1))
        if self.done_at is None and (d := re.search(r"DONE@([0-9.]+)", text[-64:])):
            self.done_at = float(d.group(1))
        m = _LAST.search(text[-64:].split("DONE@")[0].rstrip() + " ")
        if m is None:
            return
        self.last = int(m.group(1))
        self.lags.append(time.time() - (self.start + self.last / self.rate))


def folded_agent_text(state: Any) -> str:
    agent = [e for e in state.entries.values() if e.kind == "agent"]
    return agent[-1].text if agent else ""


async def measure(kind: str, rate: float, seconds: float) -> dict[str, Any]:
    """One client (``bare`` or ``console``) on a server of its own; its lag and memory."""
    from agent_channel_acp.operator.console._app import Console
    from agent_channel_acp.operator.console._link import Link
    from agent_channel_acp.operator.console._state import State
    from agent_channel_acp.operator.console._widgets import EntryView

    rt = Path(tempfile.mkdtemp(prefix="console-bench-"))
    os.chmod(rt, 0o700)
    os.environ["AGENT_CHANNEL_RUNTIME_DIR"] = str(rt)
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
            RATE_ENV: str(rate),
            SECONDS_ENV: str(seconds),
        }
    )
    proc = subprocess.Popen(  # noqa: ASYNC220 (started once, before anything is measured)
        [sys.executable, "-m", "agent_channel_acp", "serve", "--json", *AGENT],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    pid = int(json.loads(await asyncio.to_thread(proc.stdout.readline))["pid"])
    total = int(rate * seconds)
    frames = 0
    tracemalloc.start()
    base_mem = tracemalloc.get_traced_memory()[0]
    deadline = time.time() + seconds + 120

    async def watch(probe: Probe, pause: Any) -> None:
        while time.time() < deadline:
            probe.sample()
            if probe.last >= total - 1:
                return
            await pause(0.05)

    try:
        if kind == "bare":
            state = State()
            link = Link(state, pid=pid)
            task = asyncio.ensure_future(link.run())
            probe = Probe(lambda: folded_agent_text(state), rate)
            await watch(probe, asyncio.sleep)
            task.cancel()
        else:
            app = Console(pid=pid)
            rendered = [""]
            render = EntryView.render

            def recording(view: EntryView) -> Any:  # what the compositor paints, when it does
                if view.entry.kind == "agent":
                    rendered[0] = str(view.content)
                return render(view)

            EntryView.render = recording  # pyright: ignore[reportAttributeAccessIssue]
            try:
                async with app.run_test(size=(120, 40)):
                    probe = Probe(lambda: rendered[0], rate)
                    await watch(probe, asyncio.sleep)  # not pilot.pause: it waits for idle
                    frames = app.frames
            finally:
                EntryView.render = render
        peak = tracemalloc.get_traced_memory()[1] - base_mem
    finally:
        tracemalloc.stop()
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    lags = probe.lags or [float("nan")]
    produced = (
        round(total / (probe.done_at - probe.start), 1)
        if probe.done_at is not None and probe.start is not None
        else None
    )
    return {
        "worst_lag_s": round(max(lags), 4),
        "median_lag_s": round(statistics.median(lags), 4),
        "last_chunk_seen": probe.last,
        "agent_rate_reached": produced,
        "frames": frames,
        "python_peak_alloc_mib": round(peak / 2**20, 2),
    }


async def run(rate: float, seconds: float) -> dict[str, Any]:
    from agent_channel_acp.operator.console._state import MAX_ENTRIES, MAX_TEXT

    out: dict[str, Any] = {"rate": rate, "seconds": seconds, "chunks": int(rate * seconds)}
    out["bare"] = await measure("bare", rate, seconds)
    out["console"] = await measure("console", rate, seconds)
    out["console_worst_lag_over_bare"] = round(
        out["console"]["worst_lag_s"] / max(out["bare"]["worst_lag_s"], 1e-3), 2
    )
    out["fold_bound"] = f"{MAX_ENTRIES} entries x {MAX_TEXT} characters each"
    out["target_met"] = out["console"]["worst_lag_s"] <= 1.0
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=5000.0, help="chunks a second")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long the stream lasts")
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(run(args.rate, args.seconds)), indent=1))


if __name__ == "__main__":
    main()
