"""Issue 19's figures for durable executions: a turn, a post, a restart, the store's size.

    uv run python benchmarks/durability.py [--rounds N] [--backend asyncio|trio|both]
        [--only turn,post,wire,restore,cli,size] [--no-pyc] [--profile]

Every store is a file in a temporary directory on this machine's disk (``/tmp`` unless it
is a tmpfs or ramfs, then under ``benchmarks/``; the file system is reported). Each
figure is a ratio against a baseline measured in the same process, in alternating rounds
(ours, baseline, baseline, ours, ...) so a busy moment hits both; per round a median or a
p99, and the median over rounds is reported:

1. **turn**: a react agent (``react(model=ScriptedModel(...), tools=[nap])``, the model
   always calls ``nap``, a tool that sleeps 10 ms) runs ``TURNS`` turns with an operator
   surface attached (a ref marked live), in ``open_channel(journal=store.journal(...))``
   against the same in ``open_channel()``; wall time per turn, on asyncio and trio.
   Target: <= 1.05x (``3 * rounds`` runs a side). Also:
   the extra microseconds per turn (wall, and CPU time of the least disturbed run) and
   the store's transactions per turn (counted with SQLite's trace callback in a separate,
   unmeasured pair of runs: the difference between 2N and N turns, over N). In the same
   rounds, two more sides: ``open_store(durable=True)`` (the syncer: a checkpoint does not
   wait for the disk; target: a turn <= 2x the default store's), and the old
   ``durable=True`` for comparison, a store whose connection fsyncs every commit on the
   writer's thread (``synchronous=FULL``, as before the syncer).
2. **post**: (a) core: ``ref.post`` of a ``UserMessage`` into a channel with a journal
   (the write-ahead: an INSERT committed before ``post`` returns) against one without;
   p50 and p99 in microseconds (the queue is drained and checkpointed every 100 posts,
   outside the timing); also the worst post, and how many in 1,000 took over 5 ms; and
   p50/p99 with ``durable=True`` (each post waits for an fsync of the log).
   (b) wire: two ``agent-channel-acp serve --demo`` subprocesses at once, one with
   ``--store S``, each demo in a 600 s tool (``AGENT_CHANNEL_DEMO_TOOL_SECONDS``) so
   prompts only queue; the ACP SDK's client over each unix socket (``initialize``,
   ``session/load`` of the execution in the discovery record) sends ``session/prompt``,
   whose answer is the acknowledgement in attach mode (after the write-ahead). Prompts
   alternate between the servers, ``PROMPTS`` a side a cycle, then each is cancelled (the
   queued notes redirect the demo, which calls its tool again: queues stay short); a
   fresh pair of servers for each of ``ceil(rounds / 2)`` rounds. p50/p99 in ms per
   round, and the worst. Target: p99 <= 2 ms.
3. **restore**: a store holding one running execution whose conversation has 10,000
   messages (2,500 exchanges of user / assistant calling ``search`` / tool result /
   assistant answer, ~200 characters each), written through the API (``Conversation``
   appends, a ``checkpoint`` per exchange with the react loop's progress, parked after
   its answer) and left unfinished by an outer cancellation; copied afresh for each round.
   (a) in-process: ``open_store`` + ``store.journal(id)`` (the restore read) +
   ``open_channel(journal=)`` + a react agent adopting it, to it waiting for a message
   (``AwaitingInput``: restored and accepting prompts), then a ``UserMessage`` posted to
   the model's first call (its first drain folded); against the same on an empty store (a
   new execution, parked at once). (b) the real CLI: ``serve --agent
   durability_agent:agent --store S --json`` (``benchmarks/durability_agent.py``: an
   interactive react agent) from process start to the first ``session/prompt`` answered
   over the socket, against the same server on an empty store. Target: <= 1 s (the
   absolute time; the ratio shows what the restore adds). The servers start from
   bytecode cached in the temporary directory by a warm-up run, as an installed package
   does (this machine's environment sets ``PYTHONDONTWRITEBYTECODE=1``, and every start
   would compile the SDK's schema module from source); ``--no-pyc`` runs them so.
4. **size**: bytes of the .db and its -wal after ``PRAGMA wal_checkpoint(TRUNCATE)`` per
   1,000 messages of that shape (the 10,000-message store less an empty one), against
   the messages' own JSON.

``--profile`` prints the in-process restore's top functions by cumulative time on stderr.
Prints readable lines, then one JSON object. Not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import shutil
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from agent_channel import (
    AwaitingInput,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    Conversation,
    ExecutionEvent,
    ToolCall,
    UserMessage,
    open_channel,
)
from agent_channel_react import AgentOutput, AgentState, ScriptedModel, call, react, tool, tool_call
from agent_channel_sqlite import SqliteStore, open_store

HERE = Path(__file__).resolve().parent
AGENT_SPEC = "durability_agent:agent"
TOOL_SECONDS = 0.010
TURNS = 40  # per run, figure 1
POSTS = 2_000  # per round and side, figure 2a
CYCLES = 30  # per round, figure 2b
PROMPTS = 10  # per side and cycle, figure 2b
MESSAGES = 10_000  # figure 3 and 4
START_TIMEOUT = 120.0
STEP_TIMEOUT = 30.0
TARGETS = {"turn_ratio": 1.05, "durable_turn": 2.0, "wire_p99_ms": 2.0, "restart_s": 1.0}

perf = time.perf_counter
PYCACHE: Path | None = None
"""Where the servers keep their bytecode (set by ``run``; ``None``: as the environment says)."""


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def med(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def fs_type(path: Path) -> str:
    """The file system ``path`` is on (the longest mount point of /proc/self/mounts)."""
    best, kind = "", "?"
    with open("/proc/self/mounts") as f:
        for line in f:
            _, point, fstype, *_ = line.split()
            p = str(path)
            if (p == point or p.startswith(point.rstrip("/") + "/")) and len(point) > len(best):
                best, kind = point, fstype
    return kind


def scratch() -> Path:
    base = Path(tempfile.gettempdir()).resolve()
    if fs_type(base) in ("tmpfs", "ramfs"):
        base = HERE
    return Path(tempfile.mkdtemp(prefix="durability-", dir=base))


# -- 1. a turn with the store on vs off ---------------------------------------------------


@tool
async def nap() -> str:
    """Sleep 10 ms."""
    await anyio.sleep(TOOL_SECONDS)
    return "rested"


def _napping(messages: Sequence[ChatMessage], tools: object) -> Any:
    return call(tool_call("nap"), content="Napping.")


async def _turns(store: SqliteStore | None, turns: int) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``turns`` turns."""
    agent = react(
        model=ScriptedModel(_napping), tools=[nap], prompt=None, submit=False, max_turns=turns
    )
    journal = None if store is None else store.journal(uuid.uuid4().hex, {"bench": "turns"})
    async with open_channel(journal=journal) as ch:
        ch.ref().mark_live()  # an operator surface attached, as in serve
        t, c = perf(), time.process_time()
        await agent(AgentState(messages=[ChatMessageUser(content="Go.")]))
        return perf() - t, time.process_time() - c


def _count_transactions(store: SqliteStore) -> Callable[[], int]:
    """Count the store's write transactions from now on (its private connection's trace)."""
    state = {"open": False, "n": 0}

    def trace(sql: str) -> None:
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if head == "BEGIN":
            state["open"] = True
        elif head in ("COMMIT", "ROLLBACK"):
            state["open"] = False
            state["n"] += 1
        elif head in ("INSERT", "UPDATE", "DELETE") and not state["open"]:
            state["n"] += 1  # an autocommitted statement

    store._db.set_trace_callback(trace)  # pyright: ignore[reportPrivateUsage]
    return lambda: state["n"]


def _fsync_on_the_callers_thread(store: SqliteStore) -> SqliteStore:
    """The store as ``durable=True`` was before the syncer: every commit fsyncs on the
    writer's thread (``synchronous=FULL`` on its connection), the comparison for figure 1."""
    store._db.execute("PRAGMA synchronous=FULL")  # pyright: ignore[reportPrivateUsage]
    return store


async def turn_figure(tmp: Path, rounds: int, turns: int) -> dict[str, Any]:
    b = anyio_backend()
    store = open_store(tmp / f"turns-{b}.db")
    durable = open_store(tmp / f"turns-durable-{b}.db", durable=True)
    old = _fsync_on_the_callers_thread(open_store(tmp / f"turns-old-{b}.db"))
    sides: dict[str, SqliteStore | None] = {
        "store": store,
        "no_store": None,
        "durable": durable,
        "old_durable": old,
    }
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    try:
        for _ in range(2):  # warm up
            for s in sides.values():
                await _turns(s, turns)
        order = list(sides)
        for r in range(rounds):
            for name in order if r % 2 == 0 else order[::-1]:  # a busy moment hits all
                runs[name].append(await _turns(sides[name], turns))
        counted = _count_transactions(store)
        await _turns(store, turns)
        n1 = counted()
        await _turns(store, 2 * turns)
        per_turn_tx = (counted() - 2 * n1) / turns
    finally:
        for s in (store, durable, old):
            s.close()
    wall = {name: med([x[0] for x in r]) / turns * 1e6 for name, r in runs.items()}
    cpu = {name: min(x[1] for x in r) / turns * 1e6 for name, r in runs.items()}
    on, off = runs["store"], runs["no_store"]
    w_on, w_off, c_on, c_off = wall["store"], wall["no_store"], cpu["store"], cpu["no_store"]
    ratios = [a[0] / b[0] for a, b in zip(on, off, strict=True)]
    extra = {name: wall[name] - w_off for name in ("store", "durable", "old_durable")}
    return {
        "turns_per_run": turns,
        "runs": rounds,
        "per_turn_us_store": round(w_on, 1),
        "per_turn_us_no_store": round(w_off, 1),
        "ratio": round(w_on / w_off, 4),
        "ratio_per_round": [round(x, 4) for x in ratios],
        "extra_us_per_turn": round(w_on - w_off, 1),
        "cpu_per_turn_us_store": round(c_on, 1),
        "cpu_per_turn_us_no_store": round(c_off, 1),
        "cpu_extra_us_per_turn": round(c_on - c_off, 1),
        "transactions_per_turn": round(per_turn_tx, 2),
        "target_ratio": TARGETS["turn_ratio"],
        # durable=True (the syncer) and the old durable=True (fsync on the caller's thread)
        "per_turn_us_durable": round(wall["durable"], 1),
        "per_turn_us_old_durable": round(wall["old_durable"], 1),
        "extra_us_per_turn_durable": round(extra["durable"], 1),
        "extra_us_per_turn_old_durable": round(extra["old_durable"], 1),
        "cpu_extra_us_per_turn_durable": round(cpu["durable"] - c_off, 1),
        "cpu_extra_us_per_turn_old_durable": round(cpu["old_durable"] - c_off, 1),
        "durable_to_store_turn": round(wall["durable"] / w_on, 4),
        "durable_to_store_extra": round(extra["durable"] / max(extra["store"], 1e-9), 2),
        "target_durable_to_store_turn": TARGETS["durable_turn"],
    }


def anyio_backend() -> str:
    import sniffio

    return sniffio.current_async_library()


# -- 2a. post with write-ahead, core ------------------------------------------------------


async def _posts(store: SqliteStore | None, n: int) -> list[float]:
    journal = None if store is None else store.journal(uuid.uuid4().hex, {"bench": "posts"})
    out: list[float] = []
    async with open_channel(journal=journal) as ch:
        ref = ch.ref()
        for i in range(n):
            item = UserMessage(f"note {i}: " + "an operator's message of a line or two " * 4)
            t = perf()
            ref.post(item)
            out.append(perf() - t)
            if i % 100 == 99:  # as a boundary would: drained, folded, the items marked taken
                ch.drain()
                ch.checkpoint()
    return out


async def post_figure(tmp: Path, rounds: int, n: int) -> dict[str, Any]:
    store = open_store(tmp / f"posts-{anyio_backend()}.db")
    try:
        await _posts(store, n // 4)
        await _posts(None, n // 4)
        on: list[list[float]] = []
        off: list[list[float]] = []
        for r in range(rounds):
            pair = [(on, store), (off, None)]
            for out, s in pair if r % 2 == 0 else pair[::-1]:
                out.append(await _posts(s, n))
    finally:
        store.close()
    row: dict[str, Any] = {"posts_per_round": n, "rounds": rounds}
    for name, side in (("store", on), ("no_store", off)):
        for q in (0.5, 0.99):
            row[f"{name}_p{round(q * 100)}_us"] = round(med([pct(x, q) * 1e6 for x in side]), 2)
    row["ratio_p50"] = round(row["store_p50_us"] / row["no_store_p50_us"], 2)
    row["ratio_p99"] = round(row["store_p99_us"] / row["no_store_p99_us"], 2)
    row["write_ahead_us_p50"] = round(row["store_p50_us"] - row["no_store_p50_us"], 2)
    row["store_max_us"] = round(med([max(x) * 1e6 for x in on]), 1)
    row["no_store_max_us"] = round(med([max(x) * 1e6 for x in off]), 1)
    # posts that took over 5 ms: the one whose commit crosses SQLite's automatic WAL
    # checkpoint (1,000 pages) runs that checkpoint, fsyncs included, inline
    stalls = sum(1 for x in on for v in x if v > 0.005)
    row["store_posts_over_5ms_per_1000"] = round(stalls / (n * rounds) * 1000, 2)
    # durable=True: each post waits for an fsync of the log (fewer posts: each costs one)
    durable = open_store(tmp / f"posts-durable-{anyio_backend()}.db", durable=True)
    try:
        waited = [await _posts(durable, n // 10) for _ in range(rounds)]
    finally:
        durable.close()
    for q in (0.5, 0.99):
        row[f"durable_p{round(q * 100)}_us"] = round(med([pct(x, q) * 1e6 for x in waited]), 1)
    return row


# -- 2b and 3b: servers over the wire ----------------------------------------------------


class _Client:
    """The SDK client's handlers; sees the tool cards (a new one: the tool runs again)."""

    def __init__(self) -> None:
        self.cards: set[str] = set()
        self.card = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = getattr(update, "session_update", None)
        if kind == "tool_call" and update.tool_call_id not in self.cards:
            self.cards.add(update.tool_call_id)
            self.card.set()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        pass


class Server:
    """One ``agent-channel-acp serve`` subprocess and the SDK client bound to its execution."""

    def __init__(self, name: str, argv: Sequence[str], tmp: Path, **env: str) -> None:
        self.name = name
        self.argv = list(argv)
        self.runtime = tmp / f"rt-{name}"
        self.env = env
        self.proc: asyncio.subprocess.Process | None = None
        self.socket = ""
        self.record = ""
        self.execution = ""
        self.client = _Client()
        self.conn: Any = None
        self.writer: asyncio.StreamWriter | None = None

    async def start(self) -> None:
        self.runtime.mkdir(mode=0o700, exist_ok=True)
        path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
        env = {
            **os.environ,
            "PYTHONPATH": path,
            "AGENT_CHANNEL_RUNTIME_DIR": str(self.runtime),
            "AGENT_CHANNEL_ACP_LOG": "ERROR",
            **self.env,
        }
        if PYCACHE is not None:  # start from bytecode, as an installed package does
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agent_channel_acp",
            "serve",
            "--json",
            *self.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
        )
        assert self.proc.stdout is not None
        async with asyncio.timeout(START_TIMEOUT):
            line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name}: serve exited ({await self.proc.wait()})")
        announced = json.loads(line)
        self.socket, self.record = announced["listen"]["path"], announced["record"]

    async def bind(self) -> None:
        """The execution in the discovery record; ``initialize`` and ``session/load``."""
        from acp.client.connection import ClientSideConnection

        async with asyncio.timeout(START_TIMEOUT):
            while True:
                with contextlib.suppress(OSError, ValueError):
                    executions = _read_json(self.record)["executions"]
                    if executions:
                        self.execution = executions[0]["id"]
                        break
                await asyncio.sleep(0.002)
        reader, self.writer = await asyncio.open_unix_connection(self.socket, limit=1 << 24)
        self.conn = ClientSideConnection(self.client, self.writer, reader)  # pyright: ignore[reportArgumentType]
        await self.conn.initialize(protocol_version=1)
        await self.conn.load_session(session_id=self.execution, cwd="/", mcp_servers=[])

    async def prompt(self, text: str) -> float:
        import acp

        t = perf()
        await self.conn.prompt(session_id=self.execution, prompt=[acp.text_block(text)])
        return perf() - t

    async def redirect(self) -> None:
        """Cancel; the queued notes redirect the demo, whose next tool card ends this."""
        self.client.card.clear()
        await self.conn.cancel(session_id=self.execution)
        async with asyncio.timeout(STEP_TIMEOUT):
            await self.client.card.wait()

    async def stop(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await self.conn.close()
        if self.writer is not None:
            self.writer.close()
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


def _read_json(path: str) -> Any:
    return json.loads(Path(path).read_text())


async def _wire_round(tmp: Path, r: int, cycles: int, prompts: int) -> dict[str, list[float]]:
    busy = {"AGENT_CHANNEL_DEMO_TOOL_SECONDS": "600"}
    store = tmp / f"wire-{r}.db"
    sides = [
        Server(f"store{r}", ["--demo", "--store", str(store)], tmp, **busy),
        Server(f"nostore{r}", ["--demo"], tmp, **busy),
    ]
    out: dict[str, list[float]] = {"store": [], "no_store": []}
    names = {sides[0].name: "store", sides[1].name: "no_store"}
    try:
        await asyncio.gather(*(s.start() for s in sides))
        for s in sides:
            await s.bind()
            async with asyncio.timeout(STEP_TIMEOUT):  # the demo is in its first tool
                await s.client.card.wait()
        for s in sides:  # warm up
            for i in range(prompts):
                await s.prompt(f"warm {i}")
            await s.redirect()
        for c in range(cycles):
            order = sides if (c + r) % 2 == 0 else sides[::-1]
            for i in range(prompts):  # alternate prompt by prompt
                for s in order:
                    out[names[s.name]].append(await s.prompt(f"note {c}.{i}"))
            for s in order:
                await s.redirect()
    finally:
        await asyncio.gather(*(s.stop() for s in sides))
    return out


async def wire_figure(tmp: Path, rounds: int, cycles: int, prompts: int) -> dict[str, Any]:
    per: list[dict[str, list[float]]] = []
    for r in range(rounds):
        per.append(await _wire_round(tmp, r, cycles, prompts))
    row: dict[str, Any] = {"rounds": rounds, "prompts_per_round_and_side": cycles * prompts}
    for name in ("store", "no_store"):
        for q in (0.5, 0.99):
            key = f"{name}_p{round(q * 100)}_ms"
            vals = [pct(p[name], q) * 1e3 for p in per]
            row[key] = round(med(vals), 3)
            row[f"{key}_rounds"] = [round(v, 3) for v in vals]
    row["ratio_p50"] = round(row["store_p50_ms"] / row["no_store_p50_ms"], 2)
    row["ratio_p99"] = round(row["store_p99_ms"] / row["no_store_p99_ms"], 2)
    row["store_max_ms"] = round(max(max(p["store"]) for p in per) * 1e3, 3)
    row["no_store_max_ms"] = round(max(max(p["no_store"]) for p in per) * 1e3, 3)
    row["target_p99_ms"] = TARGETS["wire_p99_ms"]
    return row


# -- 3 and 4. a 10,000-message store: restore, restart, size ------------------------------


def conversation(n: int) -> list[list[ChatMessage]]:
    """``n // 4`` exchanges: user, assistant calling ``search``, its result, the answer."""
    pad = "words of an ordinary conversation about the work at hand, "
    exchanges: list[list[ChatMessage]] = []
    for k in range(n // 4):
        cid = f"call_{k + 1}"
        text = f"{k}: " + pad * 3
        exchanges.append(
            [
                ChatMessageUser(content=f"Question {text}"[:200]),
                ChatMessageAssistant(
                    content=f"Looking it up {text}"[:200],
                    tool_calls=(
                        ToolCall(id=cid, name="search", arguments={"query": f"topic {k}"}),
                    ),
                    model="scripted",
                ),
                ChatMessageTool(tool_call_id=cid, function="search", content=f"Found {text}"[:200]),
                ChatMessageAssistant(content=f"The answer {text}"[:200], model="scripted"),
            ]
        )
    return exchanges


def _progress(turns: int, answer: ChatMessageAssistant) -> dict[str, Any]:
    """The react loop's checkpoint state, parked after its answer (see its checkpoint())."""
    out = AgentOutput(completion=answer.text, stop_reason="end_turn")
    return {
        "react": 1,
        "turns": turns,
        "requests": 2,
        "submitted": 0,
        "parked": "end_turn",
        "message": answer.id,
        "output": out.model_dump(mode="json", exclude={"message"}),
    }


async def build_store(path: Path, n: int) -> tuple[str, float, int]:
    """A store with one running ``serve`` execution of ``n`` messages; its id, the seconds
    the writing took, and the messages' own JSON bytes."""
    eid = uuid.uuid4().hex
    meta = {"mode": "serve", "spec": AGENT_SPEC, "model": None, "title": "long", "cwd": "/"}
    exchanges = conversation(n)
    store = open_store(path)
    raw = 0
    t = perf()
    try:
        journal = store.journal(eid, meta)
        with anyio.CancelScope() as outer:
            async with open_channel(journal=journal) as ch:
                conv = Conversation(ch, [])
                for k, exchange in enumerate(exchanges):
                    conv.extend(exchange)
                    raw += sum(len(m.model_dump_json()) for m in exchange)
                    answer = exchange[-1]
                    assert isinstance(answer, ChatMessageAssistant)
                    ch.checkpoint(_progress(2 * (k + 1), answer))
                outer.cancel()  # unfinished: an outer cancellation records no end
                await anyio.sleep(1)
        took = perf() - t
    finally:
        store.close()
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return eid, took, raw


def store_bytes(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _fresh(pristine: Path, tmp: Path, name: str) -> Path:
    copy = tmp / name
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{copy}{suffix}")
    shutil.copyfile(pristine, copy)
    return copy


async def _restore_once(path: Path, eid: str | None) -> dict[str, float]:
    """open_store .. journal .. open_channel .. react waiting (accepting), then a post ..
    the model's first call; seconds from the start to each."""
    marks: dict[str, float] = {}
    called = anyio.Event()
    accepting = anyio.Event()

    def script(messages: Sequence[ChatMessage], tools: object) -> str:
        if not called.is_set():
            marks["model_called"] = perf() - t0
            called.set()
        return "Noted."

    def seen(e: ExecutionEvent) -> None:
        if isinstance(e, AwaitingInput) and not accepting.is_set():
            marks["accepting"] = perf() - t0
            accepting.set()

    t0 = perf()
    store = open_store(path)
    try:
        marks["opened"] = perf() - t0
        journal = store.journal(eid or uuid.uuid4().hex, None if eid else {"bench": "empty"})
        marks["read"] = perf() - t0
        agent = react(model=ScriptedModel(script), tools=[], prompt=None, submit=False)
        async with open_channel(journal=journal) as ch:
            ref = ch.ref()
            ref.mark_live()  # an operator surface attached: the run parks, as in serve
            ref.subscribe(seen)  # as serve's hub does: every event built and delivered
            async with anyio.create_task_group() as tg:
                tg.start_soon(agent, AgentState())
                with anyio.fail_after(STEP_TIMEOUT):
                    await accepting.wait()
                ref.post(UserMessage("Go on."))
                marks["posted"] = perf() - t0
                with anyio.fail_after(STEP_TIMEOUT):
                    await called.wait()
                tg.cancel_scope.cancel()
    finally:
        store.close()
    return marks


async def restore_figure(
    tmp: Path, rounds: int, full: Path, empty: Path, eid: str
) -> dict[str, Any]:
    on: list[dict[str, float]] = []
    off: list[dict[str, float]] = []
    await _restore_once(_fresh(full, tmp, "r.db"), eid)  # warm up (imports, caches)
    await _restore_once(_fresh(empty, tmp, "e.db"), None)
    for r in range(rounds):
        pair = [(on, full, eid), (off, empty, None)]
        for out, src, ident in pair if r % 2 == 0 else pair[::-1]:
            out.append(await _restore_once(_fresh(src, tmp, "r.db"), ident))
    row: dict[str, Any] = {"messages": MESSAGES, "rounds": rounds}
    for key in ("opened", "read", "accepting", "model_called"):
        row[f"{key}_ms_restored"] = round(med([m[key] for m in on]) * 1e3, 2)
        row[f"{key}_ms_empty"] = round(med([m[key] for m in off]) * 1e3, 2)
    row["ratio_accepting"] = round(row["accepting_ms_restored"] / row["accepting_ms_empty"], 2)
    row["target_s"] = TARGETS["restart_s"]
    return row


def profile_restore(tmp: Path, full: Path, eid: str) -> None:
    prof = cProfile.Profile()
    path = _fresh(full, tmp, "p.db")

    async def go() -> None:
        prof.enable()
        await _restore_once(path, eid)
        prof.disable()

    anyio.run(go)
    pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(35)
    pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(20)


async def _cli_once(tmp: Path, store: Path, r: int, name: str) -> dict[str, float]:
    server = Server(f"{name}{r}", ["--agent", AGENT_SPEC, "--store", str(store)], tmp)
    marks: dict[str, float] = {}
    t0 = perf()
    try:
        await server.start()
        marks["listening"] = perf() - t0
        await server.bind()
        marks["bound"] = perf() - t0
        await server.prompt("Go on.")
        marks["answered"] = perf() - t0
    finally:
        await server.stop()
    return marks


async def cli_figure(tmp: Path, rounds: int, full: Path, empty: Path) -> dict[str, Any]:
    on: list[dict[str, float]] = []
    off: list[dict[str, float]] = []
    await _cli_once(tmp, _fresh(empty, tmp, "c.db"), -1, "warm")
    for r in range(rounds):
        pair = [(on, full, "restored"), (off, empty, "empty")]
        for out, src, name in pair if r % 2 == 0 else pair[::-1]:
            out.append(await _cli_once(tmp, _fresh(src, tmp, "c.db"), r, name))
    row: dict[str, Any] = {"messages": MESSAGES, "rounds": rounds}
    for key in ("listening", "bound", "answered"):
        row[f"{key}_ms_restored"] = round(med([m[key] for m in on]) * 1e3, 1)
        row[f"{key}_ms_empty"] = round(med([m[key] for m in off]) * 1e3, 1)
    row["answered_ms_restored_rounds"] = [round(m["answered"] * 1e3, 1) for m in on]
    row["ratio_answered"] = round(row["answered_ms_restored"] / row["answered_ms_empty"], 2)
    row["restore_adds_ms"] = round(row["answered_ms_restored"] - row["answered_ms_empty"], 1)
    row["target_s"] = TARGETS["restart_s"]
    return row


# -- the run -----------------------------------------------------------------------------

FIGURES = ("turn", "post", "wire", "restore", "cli", "size")


def run(args: argparse.Namespace) -> dict[str, Any]:
    only = set(args.only.split(",")) if args.only else set(FIGURES)
    global PYCACHE
    tmp = scratch()
    PYCACHE = None if args.no_pyc else tmp / "pycache"
    backends = ["asyncio", "trio"] if args.backend == "both" else [args.backend]
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "store_dir": str(tmp),
        "store_fs": fs_type(tmp),
        "servers_bytecode": "none (compiled at every start)" if args.no_pyc else "cached",
    }
    try:
        for b in backends:
            if "turn" in only:
                result.setdefault("turn", {})[b] = anyio.run(  # cheap, and the noisiest
                    turn_figure, tmp, 3 * args.rounds, args.turns, backend=b
                )
                _say(f"  turn ({b}) done")
            if "post" in only:
                result.setdefault("post_core", {})[b] = anyio.run(
                    post_figure, tmp, args.rounds, POSTS, backend=b
                )
                _say(f"  post ({b}) done")
        if "wire" in only:
            wire_rounds = max(1, (args.rounds + 1) // 2)  # a pair of servers started each
            result["post_wire"] = asyncio.run(wire_figure(tmp, wire_rounds, CYCLES, PROMPTS))
            _say("  wire done")
        if only & {"restore", "cli", "size"}:
            full, empty = tmp / "full.db", tmp / "empty.db"
            eid, took, raw = anyio.run(build_store, full, MESSAGES)
            anyio.run(_empty_store, empty)
            size_full, size_empty = store_bytes(full), store_bytes(empty)
            if "size" in only:
                result["size"] = {
                    "messages": MESSAGES,
                    "db_bytes": size_full,
                    "empty_db_bytes": size_empty,
                    "bytes_per_1000_messages": round((size_full - size_empty) / MESSAGES * 1000),
                    "json_bytes_per_1000_messages": round(raw / MESSAGES * 1000),
                    "ratio_to_json": round((size_full - size_empty) / raw, 2),
                    "write_seconds": round(took, 2),
                    "checkpoints": MESSAGES // 4,
                }
            if args.profile:
                profile_restore(tmp, full, eid)
            if "restore" in only:
                result["restore_in_process"] = anyio.run(
                    restore_figure, tmp, args.rounds, full, empty, eid
                )
                _say("  restore done")
            if "cli" in only:
                result["restart_cli"] = asyncio.run(cli_figure(tmp, args.rounds, full, empty))
                _say("  cli done")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["load_average_at_end"] = [round(v, 2) for v in os.getloadavg()]
    return result


async def _empty_store(path: Path) -> None:
    open_store(path).close()


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def report(res: dict[str, Any]) -> None:
    print(
        f"durable executions (issue 19), {res['date']}, Python {res['python']},"
        f" {res['cpus']} CPUs; stores on {res['store_fs']} ({res['store_dir']})"
    )
    for b, t in res.get("turn", {}).items():
        ok = t["ratio"] <= t["target_ratio"]
        print(
            f"  turn ({b}, 10 ms tool): {t['per_turn_us_store']:.0f} us with the store,"
            f" {t['per_turn_us_no_store']:.0f} us without: {t['ratio']:.3f}x"
            f" (target <= {t['target_ratio']}) -> {'met' if ok else 'NOT met'};"
            f" +{t['extra_us_per_turn']:.0f} us wall, +{t['cpu_extra_us_per_turn']:.0f} us CPU,"
            f" {t['transactions_per_turn']} transactions a turn"
        )
        ok = t["durable_to_store_turn"] <= t["target_durable_to_store_turn"]
        print(
            f"  turn ({b}), durable=True: {t['per_turn_us_durable']:.0f} us"
            f" (+{t['extra_us_per_turn_durable']:.0f} us wall,"
            f" +{t['cpu_extra_us_per_turn_durable']:.0f} us CPU),"
            f" {t['durable_to_store_turn']:.3f}x the default store's turn (target <="
            f" {t['target_durable_to_store_turn']}) -> {'met' if ok else 'NOT met'},"
            f" {t['durable_to_store_extra']}x its extra; the old durable=True (fsync on the"
            f" loop's thread): {t['per_turn_us_old_durable']:.0f} us"
            f" (+{t['extra_us_per_turn_old_durable']:.0f} us wall,"
            f" +{t['cpu_extra_us_per_turn_old_durable']:.0f} us CPU)"
        )
    for b, p in res.get("post_core", {}).items():
        print(
            f"  post, core ({b}): p50 {p['store_p50_us']:.1f} us with the write-ahead,"
            f" {p['no_store_p50_us']:.1f} us without; p99 {p['store_p99_us']:.1f} vs"
            f" {p['no_store_p99_us']:.1f} us; max {p['store_max_us'] / 1e3:.1f} ms"
            f" ({p['store_posts_over_5ms_per_1000']} posts in 1,000 over 5 ms);"
            f" durable=True (an fsync each): p50 {p['durable_p50_us']:.0f} us,"
            f" p99 {p['durable_p99_us']:.0f} us"
        )
    if "post_wire" in res:
        w = res["post_wire"]
        ok = w["store_p99_ms"] <= w["target_p99_ms"]
        print(
            f"  prompt -> answer over the wire: p50 {w['store_p50_ms']:.3f} ms with --store,"
            f" {w['no_store_p50_ms']:.3f} ms without ({w['ratio_p50']}x); p99"
            f" {w['store_p99_ms']:.3f} vs {w['no_store_p99_ms']:.3f} ms ({w['ratio_p99']}x)"
            f" (target p99 <= {w['target_p99_ms']} ms) -> {'met' if ok else 'NOT met'};"
            f" max {w['store_max_ms']:.1f} vs {w['no_store_max_ms']:.1f} ms"
        )
    if "restore_in_process" in res:
        r = res["restore_in_process"]
        ok = r["accepting_ms_restored"] <= r["target_s"] * 1e3
        print(
            f"  restore in process ({r['messages']} messages): accepting after"
            f" {r['accepting_ms_restored']:.1f} ms (read {r['read_ms_restored']:.1f} ms),"
            f" first model call {r['model_called_ms_restored']:.1f} ms; empty store"
            f" {r['accepting_ms_empty']:.1f} ms ({r['ratio_accepting']}x)"
            f" (target <= {r['target_s']} s) -> {'met' if ok else 'NOT met'}"
        )
    if "restart_cli" in res:
        c = res["restart_cli"]
        ok = c["answered_ms_restored"] <= c["target_s"] * 1e3
        print(
            f"  serve --store restart to the first prompt answered: {c['answered_ms_restored']:.0f}"
            f" ms restored, {c['answered_ms_empty']:.0f} ms on an empty store"
            f" ({c['ratio_answered']}x, +{c['restore_adds_ms']:.0f} ms)"
            f" (target <= {c['target_s']} s) -> {'met' if ok else 'NOT met'}"
        )
    if "size" in res:
        s = res["size"]
        print(
            f"  store size: {s['bytes_per_1000_messages'] / 1024:.0f} KiB per 1,000 messages"
            f" (their JSON: {s['json_bytes_per_1000_messages'] / 1024:.0f} KiB,"
            f" {s['ratio_to_json']}x); {s['messages']} messages written in"
            f" {s['write_seconds']} s ({s['checkpoints']} checkpoints)"
        )
    print(f"  load average at the end: {res['load_average_at_end']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=TURNS, help="turns a run (figure 1)")
    parser.add_argument("--backend", choices=["asyncio", "trio", "both"], default="both")
    parser.add_argument("--only", help=f"comma-separated: {','.join(FIGURES)}")
    parser.add_argument(
        "--no-pyc",
        action="store_true",
        help="servers compile from source at each start (no bytecode cache; as with"
        " PYTHONDONTWRITEBYTECODE=1 and no __pycache__)",
    )
    parser.add_argument("--profile", action="store_true", help="profile the in-process restore")
    args = parser.parse_args()
    result = run(args)
    report(result)
    print(json.dumps(result, indent=2))
