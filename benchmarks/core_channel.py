"""Cost of the core channel's hot paths and of building its events; prints JSON.

    uv run python benchmarks/core_channel.py [--backend asyncio|trio|both] [--reference]
        [--compare SRC_DIR [--rounds N]]

Every figure comes with a baseline measured in the same process (raw anyio /
a bare deque doing the same work / a frozen dataclass with as many fields), so
ratios stay meaningful on any machine. Interrupt latency alternates the channel's
interrupt and a bare cancel scope's cancel in rounds, so a busy moment hits both.
``--reference`` also runs the same workloads on Inspect AI 0.3.285's channel,
installed into a throwaway virtualenv (needs network; never run in CI).

``--compare SRC_DIR`` runs this script ``--rounds`` times (default 3) alternately on
the current core and with ``PYTHONPATH=SRC_DIR`` (an older checkout's
``packages/channel-core/src``, e.g. from ``git worktree add /tmp/perf-before <commit>``),
each in a fresh process, and prints the best of each figure side by side with
``current / compare`` ratios.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

TURNS = 200_000
POSTS = 1_000_000
INTERRUPTS = 2_000  # per side, in INTERRUPT_ROUNDS alternating rounds
INTERRUPT_ROUNDS = 8
EVENTS = 20_000  # per repeat; the best of EVENT_REPEATS is kept
EVENT_REPEATS = 7

# Inspect AI 0.3.285 on a 2-core machine, asyncio (figures from the issue).
REFERENCE_QUOTED = {
    "turn_us": 8.0,
    "interrupt_p50_us": 35.0,
    "interrupt_p99_us": 80.0,
    "post_drain_us": 0.22,
}


def per_op_us(fn: Callable[[int], None], n: int) -> float:
    fn(min(n, 1000))  # warm up
    gc.collect()
    gc.disable()
    try:
        t = time.perf_counter()
        fn(n)
        return (time.perf_counter() - t) / n * 1e6
    finally:
        gc.enable()


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# -- workloads over an "api": (open_channel, interrupt_error, user_message, cancel) -------------


async def measure(api: dict[str, Any]) -> dict[str, float]:
    open_channel, make_msg = api["open_channel"], api["message"]
    # Each api entry returns the bound method to call, so no wrapper sits on the hot path.
    drain_of, scope_of, post_of, ref_of = api["drain"], api["scope"], api["post"], api["ref"]
    out: dict[str, float] = {}

    def turns_of(ch: Any) -> Callable[[int], None]:
        drain, scope = drain_of(ch), scope_of(ch)

        def turns(n: int) -> None:
            for _ in range(n):
                drain()
                with scope():
                    pass

        return turns

    async with open_channel() as ch:
        out["turn_no_ref_us"] = per_op_us(turns_of(ch), TURNS)

    async with open_channel() as ch:
        ref = ref_of(ch)
        drain, post = drain_of(ch), post_of(ref)
        item = make_msg("x")

        def post_drain(n: int) -> None:
            for _ in range(n):
                post(item)
                drain()

        # a ref exists (so posts are thread-safe and scopes interruptible), nobody subscribed
        out["post_drain_us"] = per_op_us(post_drain, POSTS)
        unsubscribe = api["subscribe"](ref)
        out["turn_with_producer_us"] = per_op_us(turns_of(ch), TURNS)
        out["post_drain_subscribed_us"] = per_op_us(post_drain, POSTS)
        unsubscribe()

        before = rss_mib()
        post_drain(POSTS)
        out["rss_growth_after_1M_items_mib"] = round(rss_mib() - before, 2)

    ours, bare = await interrupt_latencies(api)
    out["interrupt_p50_us"] = statistics.median(ours)
    out["interrupt_p99_us"] = percentile(ours, 0.99)
    out["bare_cancel_p50_us"] = statistics.median(bare)
    out["bare_cancel_p99_us"] = percentile(bare, 0.99)
    return out


async def interrupt_latencies(api: dict[str, Any]) -> tuple[list[float], list[float]]:
    """From the producer's call to the consumer resuming: the channel's interrupt of its
    scope, and (the baseline) a bare anyio cancel scope's ``cancel()``, in alternating rounds."""
    open_channel, Interrupted, make_cancel = api["open_channel"], api["Interrupted"], api["cancel"]
    ours: list[float] = []
    bare: list[float] = []
    per_round = INTERRUPTS // INTERRUPT_ROUNDS
    holder: list[anyio.CancelScope] = []
    async with open_channel() as ch:
        drain, scope = api["drain"](ch), api["scope"](ch)
        interrupt = api["interrupt"](api["ref"](ch))
        for _ in range(INTERRUPT_ROUNDS):
            ready = anyio.Event()
            t0 = 0.0

            async def producer() -> None:
                nonlocal ready, t0
                for _ in range(per_round):
                    await ready.wait()
                    ready = anyio.Event()
                    cancel = make_cancel()
                    t0 = time.perf_counter()
                    interrupt(cancel)

            async with anyio.create_task_group() as tg:
                tg.start_soon(producer)
                for _ in range(per_round):
                    try:
                        with scope():
                            ready.set()
                            await anyio.sleep_forever()
                    except Interrupted:
                        ours.append((time.perf_counter() - t0) * 1e6)
                    drain()

            ready = anyio.Event()

            async def canceller() -> None:
                nonlocal ready, t0
                for _ in range(per_round):
                    await ready.wait()
                    ready = anyio.Event()
                    t0 = time.perf_counter()
                    holder[-1].cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(canceller)
                for _ in range(per_round):
                    with anyio.CancelScope() as cs:
                        holder.append(cs)
                        ready.set()
                        await anyio.sleep_forever()
                    bare.append((time.perf_counter() - t0) * 1e6)
    return ours, bare


def ours() -> dict[str, Any]:
    import agent_channel as ac

    return {
        "open_channel": ac.open_channel,
        "Interrupted": ac.AgentInterrupted,
        "message": lambda t: ac.UserMessage(t),
        "cancel": lambda: ac.Cancel(),
        "drain": lambda ch: ch.drain,
        "scope": lambda ch: ch.scope,
        "post": lambda ref: ref.post,
        "interrupt": lambda ref: ref.interrupt,
        "ref": lambda ch: ch.ref(),
        "subscribe": lambda ref: ref.subscribe(lambda e: None),
    }


async def baseline() -> dict[str, float]:
    """The same work with no channel: raw anyio cancel scopes and a bare deque.

    (The bare cancel-scope interrupt baseline is measured with ours, see
    :func:`interrupt_latencies`.)
    """
    out: dict[str, float] = {}
    q: deque[object] = deque()

    def turns(n: int) -> None:
        for _ in range(n):
            if q:
                q.popleft()
            with anyio.CancelScope():  # noqa: ASYNC100 (the cost of the scope is the point)
                pass

    out["turn_us"] = per_op_us(turns, TURNS)
    item = object()

    def post_drain(n: int) -> None:
        for _ in range(n):
            q.append(item)
            [q.popleft() for _ in range(len(q))]

    out["post_drain_us"] = per_op_us(post_drain, POSTS)
    return out


def reference_in_venv(backend: str) -> dict[str, float] | str:
    """Run the workloads on Inspect AI's channel in a throwaway venv (optional)."""
    venv = Path(tempfile.gettempdir()) / "agent-channel-bench-inspect"
    py = venv / "bin" / "python"
    if not py.exists():
        r = subprocess.run(
            ["uv", "venv", "-q", "--python", sys.executable, str(venv)], capture_output=True
        )
        r = (
            r
            if r.returncode
            else subprocess.run(
                ["uv", "pip", "install", "-q", "--python", str(py), "inspect-ai==0.3.285", "trio"],
                capture_output=True,
            )
        )
        if r.returncode:
            return f"could not install inspect-ai: {r.stderr.decode()[-300:]}"
    r = subprocess.run(
        [str(py), __file__, "--as-reference", "--backend", backend], capture_output=True, text=True
    )
    return json.loads(r.stdout) if r.returncode == 0 else f"reference run failed: {r.stderr[-500:]}"


def inspect_api() -> dict[str, Any]:
    from inspect_ai.agent._channel.channel import AgentChannel  # type: ignore[import-not-found]
    from inspect_ai.agent._channel.exceptions import AgentInterrupted  # type: ignore[import-not-found]
    from inspect_ai.agent._channel.items import Cancel, UserMessage  # type: ignore[import-not-found]
    from inspect_ai.model import ChatMessageUser  # type: ignore[import-not-found]

    class _Open:
        async def __aenter__(self) -> Any:
            return AgentChannel()

        async def __aexit__(self, *exc: object) -> None:
            return None

    return {
        "open_channel": _Open,
        "Interrupted": AgentInterrupted,
        "message": lambda t: UserMessage(message=ChatMessageUser(content=t)),
        "cancel": lambda: Cancel(reason="user_cancel"),
        "drain": lambda ch: ch._drain,
        "scope": lambda ch: ch.turn_scope,
        "post": lambda ref: ref.post,
        "interrupt": lambda ref: ref.interrupt,
        "ref": lambda ch: ch._ref(),
        "subscribe": lambda ref: ref._channel.subscribe_turn_state(lambda s: None),
    }


# -- building events (no backend dimension) -------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Record:
    """The baseline: the cheapest immutable record with as many fields as a big event."""

    type: str
    tool_call_id: str
    name: str
    arguments: object
    kind: str


ARGUMENTS = {"path": "src/app.py", "old": "x = 1", "new": "x = 2", "lines": [3, 4]}


def best_us(fn: Callable[[], object]) -> float:
    def loop(n: int) -> None:
        for _ in range(n):
            fn()

    return min(per_op_us(loop, EVENTS) for _ in range(EVENT_REPEATS))


def event_costs() -> dict[str, Any]:
    """Per event an observed tool-call turn publishes: validated construction, in µs."""
    import agent_channel as ac
    from agent_channel._frozen import freeze

    call = ac.ToolCall(id="c1", name="edit", arguments=ARGUMENTS)
    assistant = ac.ChatMessageAssistant(content="editing", tool_calls=(call,), model="m")
    tool_msg = ac.ChatMessageTool(tool_call_id="c1", function="edit", content="done")
    usage = ac.Usage(input_tokens=10, output_tokens=3, total_tokens=13)
    turn: dict[str, Callable[[], object]] = {  # TURN_EVENTS
        "ModelCallStarted": lambda: ac.ModelCallStarted(call_id="m1", model="m"),
        "ModelDelta": lambda: ac.ModelDelta(call_id="m1", message_id="a1", kind="text", text="ed"),
        "ModelCallFinished": lambda: ac.ModelCallFinished(
            call_id="m1", message=assistant, stop_reason="end_turn", usage=usage
        ),
        "MessageAppended (assistant)": lambda: ac.MessageAppended(message=assistant, index=1),
        "ToolCallStarted (the ToolCall's arguments)": lambda: ac.ToolCallStarted(
            tool_call_id=call.id,
            name=call.name,
            arguments=call.arguments,
            title="edit src/app.py",
            kind="edit",
        ),
        "ToolCallFinished": lambda: ac.ToolCallFinished(
            tool_call_id="c1", name="edit", status="completed", content="done"
        ),
        "MessageAppended (tool)": lambda: ac.MessageAppended(message=tool_msg, index=2),
    }
    other: dict[str, Callable[[], object]] = {
        "ToolCallStarted (plain dict arguments)": lambda: ac.ToolCallStarted(
            tool_call_id="c1",
            name="edit",
            arguments=ARGUMENTS,
            title="edit src/app.py",
            kind="edit",
        ),
        "ToolCall (plain dict arguments)": lambda: ac.ToolCall(
            id="c1", name="edit", arguments=ARGUMENTS
        ),
        "freeze (plain dict)": lambda: freeze(ARGUMENTS),
        "freeze (already frozen)": lambda: freeze(call.arguments),
    }
    base = best_us(lambda: _Record("tool_call_started", "c1", "edit", ARGUMENTS, "edit"))
    us = {name: best_us(fn) for name, fn in {**turn, **other}.items()}
    return {"frozen_dataclass_baseline_us": base, "us": us}


TURN_EVENTS = (
    "ModelCallStarted",
    "ModelDelta",
    "ModelCallFinished",
    "MessageAppended (assistant)",
    "ToolCallStarted (the ToolCall's arguments)",
    "ToolCallFinished",
    "MessageAppended (tool)",
)
"""What an observed turn with one tool call publishes (besides the shared turn events)."""


def event_ratios(events: dict[str, Any]) -> dict[str, Any]:
    us, base = events["us"], events["frozen_dataclass_baseline_us"]
    return {
        **events,
        "vs_frozen_dataclass": {name: v / base for name, v in us.items()},
        f"observed_turn_{len(TURN_EVENTS)}_events_us": sum(us[name] for name in TURN_EVENTS),
    }


# -- running ----------------------------------------------------------------------------------


async def channel_costs(api: dict[str, Any]) -> dict[str, Any]:
    return {"ours": await measure(api), "baseline": await baseline()}


def channel_ratios(result: dict[str, Any], backend: str, reference: bool) -> dict[str, Any]:
    """``result`` (ours and baseline of one backend) with its ratios and targets."""
    o, b = result["ours"], result["baseline"]
    result = dict(result)
    result["ratios_vs_baseline"] = {
        "turn_with_producer / raw cancel-scope turn": o["turn_with_producer_us"] / b["turn_us"],
        "post_drain / bare deque": o["post_drain_us"] / b["post_drain_us"],
        "interrupt_p99 / bare cancel p99": o["interrupt_p99_us"] / o["bare_cancel_p99_us"],
        "interrupt_p50 / bare cancel p50": o["interrupt_p50_us"] / o["bare_cancel_p50_us"],
    }
    ref = reference_in_venv(backend) if reference else None
    result["reference"] = ref if ref is not None else {"quoted": REFERENCE_QUOTED}
    r = (
        ref
        if isinstance(ref, dict)
        else {
            "turn_with_producer_us": REFERENCE_QUOTED["turn_us"],
            "interrupt_p99_us": REFERENCE_QUOTED["interrupt_p99_us"],
            "post_drain_us": REFERENCE_QUOTED["post_drain_us"],
        }
    )
    result["ratios_vs_reference"] = {
        "turn_with_producer": o["turn_with_producer_us"] / r["turn_with_producer_us"],
        "interrupt_p99": o["interrupt_p99_us"] / r["interrupt_p99_us"],
        "post_drain": o["post_drain_us"] / r["post_drain_us"],
    }
    if "post_drain_subscribed_us" in r:  # measured in this run (an operator attached)
        result["ratios_vs_reference"]["post_drain_subscribed"] = (
            o["post_drain_subscribed_us"] / r["post_drain_subscribed_us"]
        )
    result["targets"] = {
        "turn_no_ref_us <= 1": o["turn_no_ref_us"] <= 1.0,
        "turn_with_producer <= 0.6x reference": result["ratios_vs_reference"]["turn_with_producer"]
        <= 0.6,
        "interrupt_p99 <= 0.6x reference": result["ratios_vs_reference"]["interrupt_p99"] <= 0.6,
        "interrupt_p99 <= 1.2x bare cancel p99": result["ratios_vs_baseline"][
            "interrupt_p99 / bare cancel p99"
        ]
        <= 1.2,
        "post_drain <= 1.2x reference": result["ratios_vs_reference"]["post_drain"] <= 1.2,
        "post_drain_subscribed <= 1.2x reference": result["ratios_vs_reference"].get(
            "post_drain_subscribed", 0.0
        )
        <= 1.2,
        "memory flat after 1M items (< 1 MiB)": o["rss_growth_after_1M_items_mib"] < 1.0,
    }
    return result


def measure_all(backends: list[str]) -> dict[str, Any]:
    """The raw figures: per backend the channel's and its baseline's, then the events'."""
    result: dict[str, Any] = {"python": sys.version.split()[0]}
    for backend in backends:
        result[backend] = anyio.run(channel_costs, ours(), backend=backend)
    result["events"] = event_costs()
    return result


def with_ratios(raw: dict[str, Any], backends: list[str], reference: bool) -> dict[str, Any]:
    result = dict(raw)
    for backend in backends:
        result[backend] = channel_ratios(raw[backend], backend, reference)
    result["events"] = event_ratios(raw["events"])
    return result


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


def best_of(runs: list[Any]) -> Any:
    """Leaf by leaf: the lowest number (the least disturbed run), or the first value."""
    first = runs[0]
    if isinstance(first, dict):
        return {k: best_of([r[k] for r in runs]) for k in first}
    if isinstance(first, float) and not isinstance(first, bool):
        return min(runs)
    return first


def ratios(current: Any, compare: Any) -> Any:
    if isinstance(current, dict):
        out = {k: ratios(current[k], compare[k]) for k in current if k in compare}
        return {k: v for k, v in out.items() if v is not None and v != {}}
    if isinstance(current, float) and isinstance(compare, float) and compare:
        return current / compare
    return None


def compare_trees(src: str, backends: list[str], rounds: int) -> dict[str, Any]:
    """Alternate fresh runs on the current core and on ``src``; best of each, side by side."""
    cmd = [sys.executable, __file__, "--raw", "--backend", ",".join(backends)]
    env_compare = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
    runs: dict[str, list[Any]] = {"current": [], "compare": []}
    for _ in range(rounds):
        for tree, env in (("current", dict(os.environ)), ("compare", env_compare)):
            r = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if r.returncode:
                raise SystemExit(f"{tree} run failed:\n{r.stderr[-2000:]}")
            runs[tree].append(json.loads(r.stdout))
    current, compare = best_of(runs["current"]), best_of(runs["compare"])
    return {
        "rounds": rounds,
        "compare_src": src,
        "current / compare (best raw figures)": ratios(current, compare),
        "current": with_ratios(current, backends, reference=False),
        "compare": with_ratios(compare, backends, reference=False),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backend", default="both", help="asyncio, trio or both (default), or a comma list"
    )
    parser.add_argument(
        "--reference", action="store_true", help="also measure Inspect AI's channel"
    )
    parser.add_argument("--compare", metavar="SRC_DIR", help="also run on this core source tree")
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs per tree")
    parser.add_argument("--as-reference", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    backends = ["asyncio", "trio"] if args.backend == "both" else args.backend.split(",")
    if args.as_reference:
        print(json.dumps(anyio.run(measure, inspect_api(), backend=backends[0])))
        return
    if args.raw:
        print(json.dumps(measure_all(backends)))
    elif args.compare:
        print(json.dumps(rounded(compare_trees(args.compare, backends, args.rounds)), indent=2))
    else:
        result = with_ratios(measure_all(backends), backends, args.reference)
        print(json.dumps(rounded(result), indent=2))


if __name__ == "__main__":
    main()
