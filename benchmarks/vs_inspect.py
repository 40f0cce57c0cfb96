"""Attach mode next to Inspect AI's ACP server: a prompt's acknowledgement and a cancel.

    uv run python benchmarks/vs_inspect.py --reference-python /tmp/inspect-venv/bin/python
        [--rounds 5] [--cycles 60] [--prompts 5] [--baseline-src DIR] [--ours-src DIR]

The reference is Inspect AI 0.3.285's ``inspect eval --acp-server PATH`` running a
``react`` agent on its ``mockllm`` model. Install it into a throwaway environment once
(it pins the same ``agent-client-protocol`` as ours, 0.12.1; no network after this)::

    uv venv /tmp/inspect-venv --python 3.11
    uv pip install --python /tmp/inspect-venv/bin/python inspect_ai==0.3.285

Without ``--reference-python`` the benchmark says so in one line and exits 0. Inspect's
token counting loads a tiktoken encoding from the network: the launcher this file writes
to a temporary directory puts a stand-in encoder in its place (and the mock model's
outputs carry their usage, so nothing is counted on the measured path).

Both servers run at once as subprocesses, each with one execution of the same agent: a
zero-latency model that always calls ``block``, a tool that waits until cancelled. Ours
is ``agent-channel-acp serve`` (its socket read from its discovery record in a private
runtime directory), the reference's socket is the path given to ``--acp-server``. One
client does the same steps on both: the official ACP SDK's ``ClientSideConnection`` over
the unix socket, ``initialize`` then ``session/new`` (both servers bind a new session to
their only execution at once), and then cycles of:

- **prompt acknowledgement** (``--prompts`` a cycle, while the tool runs): from sending
  ``session/prompt`` to its response. Both servers answer a prompt into a running
  execution once it is queued for the agent's next boundary (ours after the queue's
  ``_agent_channel/queue`` update is written; Inspect's after ``submit_user_message``);
- **cancel to cancelled**: from sending ``session/cancel`` to the ``turn_state``
  notification saying ``cancelled`` (ours ``_agent_channel/turn_state``, Inspect's
  ``inspect/turn_state``), stamped as the SDK client dispatches the notification. The
  queued prompts are the redirect: both agents carry on with them, the model calls the
  tool again, and its new card starts the next cycle. Also reported: cancel to the
  cancelled tool card's ``failed`` update (``card``), the first thing either shows.

Each round starts both servers afresh, warms up, then alternates them cycle by cycle (so
machine noise hits both); p50 and p90 are taken per round and the medians over rounds
reported, with the ratio ours/reference (targets: acknowledgement p50 <= 0.9, p90 <= 1.0;
cancel p50 <= 0.8). ``--baseline-src DIR`` (repeatable) adds a side: our server with ``DIR``
first on its ``PYTHONPATH`` (another ``agent_channel_acp``, e.g. a worktree's
``packages/acp-producer/src``), interleaved with the others; ``--ours-src DIR`` runs ours
so too (a clean checkout while the working tree is being edited).

Prints readable lines, then one JSON object. Not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
START_TIMEOUT = 120.0
STEP_TIMEOUT = 30.0
TARGETS = {"ack_p50": 0.9, "ack_p90": 1.0, "cancel_p50": 0.8}


# -- our agent (loaded by `agent-channel-acp serve --agent vs_inspect:ours`) -----------


def ours(model: str | None = None) -> Any:
    import anyio
    from agent_channel_react import AgentState, ScriptedModel, call, react, tool, tool_call

    @tool(kind="execute")
    async def block(why: str) -> str:
        """Wait until cancelled.

        Args:
            why: Why.
        """
        await anyio.sleep_forever()
        return ""

    def script(messages: Any, tools: Any) -> Any:
        return call(tool_call("block", why="bench"), content="waiting")

    agent = react(model=ScriptedModel(script), tools=[block], prompt=None, submit=False)

    async def body() -> Any:
        return await agent(AgentState())

    return body


# -- the reference's agent and launcher (written to a temporary directory) --------------

REFERENCE_TASK = '''
import anyio
from inspect_ai import Task, task
from inspect_ai.agent import react
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.tool import tool


@tool
def block():
    async def execute(why: str) -> str:
        """Wait until cancelled.

        Args:
            why: Why.
        """
        await anyio.sleep_forever()
        return ""

    return execute


def outputs(input, tools, tool_choice, config):
    out = ModelOutput.for_tool_call("mockllm/model", "block", {"why": "bench"}, content="waiting")
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return out


@task
def bench():
    model = get_model("mockllm/model", custom_outputs=outputs)
    return Task(
        dataset=[Sample(input="go")],
        solver=react(tools=[block()], model=model, prompt=None, submit=False),
    )
'''

REFERENCE_LAUNCHER = """
import sys

import tiktoken


class _StandIn:  # tiktoken's encodings download on first use: a word count stands in
    def encode(self, text, **kwargs):
        return text.split()


tiktoken.get_encoding = lambda name: _StandIn()
from inspect_ai._cli.main import main

sys.argv = ["inspect", *sys.argv[1:]]
sys.exit(main())
"""


# -- one server and its SDK client ------------------------------------------------------


class Side:
    """One server subprocess, and the SDK client bound to its execution."""

    def __init__(self, name: str, turn_state: str) -> None:
        self.name = name
        self.turn_state = turn_state  # the notification method that carries turn states
        self.proc: asyncio.subprocess.Process | None = None
        self.socket = ""
        self.conn: Any = None
        self.session_id = ""
        self.cards: set[str] = set()  # tool call ids seen
        self.card = asyncio.Event()  # a new tool card arrived (the tool runs)
        self.cancelled = asyncio.Event()
        self.cancelled_at = 0.0
        self.failed_at = 0.0  # the cancelled tool's card said ``failed``

    async def start(self, tmp: Path) -> None:
        raise NotImplementedError

    def hook(self, conn: Any) -> None:
        """See each notification as the SDK client dispatches it, then let the SDK go on.

        Inspect's ``inspect/*`` methods have no route in the SDK's client router (it would
        raise): they end here, as in a client that knows them; ours (``_agent_channel/*``)
        go on to the SDK's ``ext_notification`` like in any SDK client. (Not a stream
        observer: the SDK deep-copies every frame for those, a cost no client pays.)
        """
        inner = conn._conn._handler  # the SDK's router: private, and the one way in

        async def handler(method: str, params: Any, is_notification: bool) -> Any:
            if is_notification:
                self.seen(method, params if isinstance(params, dict) else {})
                if method.startswith("inspect/"):
                    return None
            return await inner(method, params, is_notification)

        conn._conn._handler = handler

    def seen(self, method: str, params: dict[str, Any]) -> None:
        if method == self.turn_state:
            if params.get("state") == "cancelled" and not self.cancelled.is_set():
                self.cancelled_at = time.perf_counter()
                self.cancelled.set()
        elif method == "session/update":
            update = params.get("update") or {}
            kind = update.get("sessionUpdate")
            if kind == "tool_call_update" and update.get("status") == "failed":
                self.failed_at = self.failed_at or time.perf_counter()
            elif kind == "tool_call":
                call_id = update.get("toolCallId")
                if call_id not in self.cards:
                    self.cards.add(call_id)
                    self.card.set()

    async def connect(self, deadline: float) -> None:
        """``initialize`` and ``session/new`` until bound with the tool running."""
        from acp.client.connection import ClientSideConnection

        while True:
            reader, writer = await asyncio.open_unix_connection(self.socket, limit=1 << 24)
            conn = ClientSideConnection(_Client(), writer, reader)
            self.hook(conn)
            await conn.initialize(protocol_version=1)
            self.card.clear()
            self.session_id = (await conn.new_session(cwd="/", mcp_servers=[])).session_id
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await self.card.wait()
            if self.card.is_set():
                self.conn = conn
                return
            await conn.close()
            writer.close()
            if time.monotonic() > deadline:  # e.g. the reference's picker: no sample yet
                raise RuntimeError(f"{self.name}: bound to no running tool")

    async def cycle(self, prompts: int) -> tuple[list[float], float, float]:
        """One cycle (the tool runs): ``prompts`` acknowledgements, then the cancel (to the
        ``cancelled`` turn state, and to the tool card's ``failed`` update)."""
        import acp

        acks: list[float] = []
        for i in range(prompts):
            block = [acp.text_block(f"note {i}")]
            t = time.perf_counter()
            await self.conn.prompt(session_id=self.session_id, prompt=block)
            acks.append(time.perf_counter() - t)
        self.cancelled.clear()
        self.card.clear()
        self.failed_at = 0.0
        t = time.perf_counter()
        await self.conn.cancel(session_id=self.session_id)
        async with asyncio.timeout(STEP_TIMEOUT):
            await self.cancelled.wait()
        async with asyncio.timeout(STEP_TIMEOUT):  # the redirect ran: the tool runs again
            await self.card.wait()
        assert self.failed_at, f"{self.name}: no failed update for the cancelled tool"
        return acks, self.cancelled_at - t, self.failed_at - t

    async def stop(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await self.conn.close()
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            async with asyncio.timeout(15):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()


class Ours(Side):
    def __init__(self, name: str, src: str | None) -> None:
        super().__init__(name, "_agent_channel/turn_state")
        self.src = src

    async def start(self, tmp: Path) -> None:
        runtime = tmp / f"rt-{self.name}"
        path = os.pathsep.join(p for p in (self.src, str(HERE), os.environ.get("PYTHONPATH")) if p)
        env = {
            **os.environ,
            "PYTHONPATH": path,
            "AGENT_CHANNEL_RUNTIME_DIR": str(runtime),
            "AGENT_CHANNEL_ACP_LOG": "ERROR",
        }
        argv = ["-m", "agent_channel_acp", "serve", "--json", "--agent", "vs_inspect:ours"]
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *argv,
            "--input",
            "go",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
        )
        assert self.proc.stdout is not None
        async with asyncio.timeout(START_TIMEOUT):
            line = await self.proc.stdout.readline()
        record = _read_json(json.loads(line)["record"])  # the discovery record
        self.socket = record["transport"]["path"]


class Reference(Side):
    def __init__(self, python: str) -> None:
        super().__init__("inspect", "inspect/turn_state")
        self.python = python

    async def start(self, tmp: Path) -> None:
        work = tmp / "inspect"
        work.mkdir(exist_ok=True)
        (work / "task.py").write_text(REFERENCE_TASK)
        (work / "launch.py").write_text(REFERENCE_LAUNCHER)
        self.socket = str(work / "acp.sock")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket)
        env = {
            **os.environ,
            "XDG_DATA_HOME": str(work / "data"),  # its discovery files, out of the user's home
            "PYTHONPATH": "",
            "VIRTUAL_ENV": "",
        }
        self.proc = await asyncio.create_subprocess_exec(
            self.python,
            "launch.py",
            "eval",
            "task.py",
            "--model",
            "mockllm/model",
            f"--acp-server={self.socket}",
            "--display",
            "none",
            "--log-dir",
            str(work / "logs"),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            cwd=work,
        )
        end = time.monotonic() + START_TIMEOUT
        while not _exists(self.socket):
            if self.proc.returncode is not None or time.monotonic() > end:
                raise RuntimeError(f"the reference did not listen (exit {self.proc.returncode})")
            await asyncio.sleep(0.05)


def _read_json(path: str) -> Any:
    return json.loads(Path(path).read_text())


def _exists(path: str) -> bool:
    return os.path.exists(path)


class _Client:
    """The SDK client's handlers: what is measured is seen in :meth:`Side.hook`."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        pass

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        pass


# -- the run ---------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def one_round(
    sides: list[Side], cycles: int, prompts: int, warmup: int
) -> dict[str, dict[str, list[float]]]:
    tmp = Path(tempfile.mkdtemp(prefix="vs-inspect-"))
    out = {s.name: {"ack": list[float](), "cancel": [], "card": []} for s in sides}
    try:
        await asyncio.gather(*(s.start(tmp) for s in sides))
        deadline = time.monotonic() + START_TIMEOUT
        for s in sides:
            await s.connect(deadline)
        for s in sides:
            for _ in range(warmup):
                await s.cycle(prompts)
        for c in range(cycles):
            order = sides if c % 2 == 0 else sides[::-1]
            for s in order:
                acks, cancel, card = await s.cycle(prompts)
                out[s.name]["ack"].extend(acks)
                out[s.name]["cancel"].append(cancel)
                out[s.name]["card"].append(card)
    finally:
        for s in sides:
            await s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def summary(rounds: list[dict[str, list[float]]]) -> dict[str, Any]:
    """Per-round p50/p90 in ms, and their medians over the rounds."""
    row: dict[str, Any] = {}
    for key in ("ack", "cancel", "card"):
        for q in (0.5, 0.9):
            per_round = [1000 * pct(r[key], q) for r in rounds]
            name = f"{key}_p{round(q * 100)}"
            row[name] = round(statistics.median(per_round), 3)
            row[f"{name}_rounds"] = [round(v, 3) for v in per_round]
    row["samples_per_round"] = {"ack": len(rounds[0]["ack"]), "cancel": len(rounds[0]["cancel"])}
    return row


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rounds: dict[str, list[dict[str, list[float]]]] = {}
    for r in range(args.rounds):
        sides: list[Side] = [Ours("ours", args.ours_src), Reference(args.reference_python)]
        others = args.baseline_src or []
        for i, src in enumerate(others):
            sides.insert(1 + i, Ours(f"baseline{i + 1}" if len(others) > 1 else "baseline", src))
        if r % 2:
            sides.reverse()
        result = await one_round(sides, args.cycles, args.prompts, args.warmup)
        for name, samples in result.items():
            rounds.setdefault(name, []).append(samples)
        print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    table = {name: summary(rs) for name, rs in rounds.items()}
    ref = table["inspect"]
    ratios: dict[str, dict[str, float]] = {}
    for name, row in table.items():
        if name == "inspect":
            continue
        ratios[name] = {
            k: round(row[k] / ref[k], 2)
            for k in ("ack_p50", "ack_p90", "cancel_p50", "cancel_p90", "card_p50", "card_p90")
        }
    return {
        "rounds": args.rounds,
        "cycles": args.cycles,
        "prompts_per_cycle": args.prompts,
        "reference": "inspect_ai 0.3.285 --acp-server, react on mockllm",
        "cpus": os.cpu_count(),
        "load_average_at_end": [round(v, 2) for v in os.getloadavg()],
        "ms": table,
        "ratio_to_reference": ratios,
        "targets": TARGETS,
    }


def report(result: dict[str, Any]) -> None:
    print(
        f"attach mode vs Inspect AI's --acp-server: {result['rounds']} rounds x"
        f" {result['cycles']} cycles ({result['prompts_per_cycle']} prompts and a cancel each),"
        " medians over rounds, ms"
    )
    heads = ("ack p50", "ack p90", "cancel p50", "cancel p90", "card p50", "card p90")
    print("  " + " " * 9 + "".join(f"{h:>11}" for h in heads))
    for name, row in result["ms"].items():
        keys = ("ack_p50", "ack_p90", "cancel_p50", "cancel_p90", "card_p50", "card_p90")
        print(f"  {name:>9}" + "".join(f"{row[k]:>11.3f}" for k in keys))
    for name, r in result["ratio_to_reference"].items():
        t = result["targets"]
        verdict = (
            r["ack_p50"] <= t["ack_p50"]
            and r["ack_p90"] <= t["ack_p90"]
            and r["cancel_p50"] <= t["cancel_p50"]
        )
        print(
            f"  {name}/inspect: ack p50 {r['ack_p50']:.2f} (target <= {t['ack_p50']}),"
            f" ack p90 {r['ack_p90']:.2f} (<= {t['ack_p90']}),"
            f" cancel p50 {r['cancel_p50']:.2f} (<= {t['cancel_p50']})"
            f" -> {'met' if verdict else 'NOT met'}"
        )
    print(f"  load average at the end: {result['load_average_at_end']} on {result['cpus']} CPUs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--reference-python", help="the python of a venv with inspect_ai==0.3.285")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=60)
    parser.add_argument("--prompts", type=int, default=5, help="prompts a cycle")
    parser.add_argument("--warmup", type=int, default=3, help="cycles a side before measuring")
    parser.add_argument(
        "--baseline-src", action="append", help="another agent_channel_acp (repeatable)"
    )
    parser.add_argument("--ours-src", help="run ours from this agent_channel_acp instead")
    args = parser.parse_args()
    if not args.reference_python:
        print("vs_inspect: skipped (no --reference-python; see the docstring to install it)")
        sys.exit(0)
    result = asyncio.run(main(args))
    report(result)
    print(json.dumps(result, indent=2))
