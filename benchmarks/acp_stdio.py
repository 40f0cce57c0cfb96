"""ACP over stdio: our producer next to a bare SDK agent, one run, JSON out.

    uv run python benchmarks/acp_stdio.py [--runs 200] [--pieces 2000] [--stall 10]

Both agents run as subprocesses at the same time, driven by the SDK's client side, and
every measurement alternates between them sample by sample (so machine noise hits both):
- ``bare``: a minimal agent written on the SDK here (echoes a prompt in three chunks;
  ``block`` waits until cancelled; ``pieces N`` streams N chunks), the floor for the SDK
  and the pipes;
- ``ours``: ``agent-channel-acp stdio`` serving a react agent with a zero-latency
  scripted model (``block`` runs a tool that waits until cancelled, ``hang`` is a model
  call that never ends, ``pieces N`` streams N pieces).

Measured: startup to ``initialize`` answered; prompt round trip; cancel to the
``cancelled`` response, from the moment the agent visibly waits, like for like: during a
tool call (bare ``tool``: a tool card, then on cancel its ``failed`` update; ours: the
blocking tool's card and the same update) and during a model call (bare ``block``: its
``waiting`` chunk, nothing after; ours ``hang``: the model's first piece, nothing after);
also ours' tool call against bare ``block`` (one frame fewer), as measured before; update
throughput, the same text in the same pieces for both (pieces, frames and text bytes per
second: our producer merges pieces that queue up, so it may send fewer, larger frames);
and the memory a client costs that stops reading for ``--stall`` seconds while 2 MiB of
text streams (a raw client: peak RSS of the agent process above the same run with a
client that reads). Target: that cost at most 3x the text. Not run in CI.

``--agent-path DIR`` runs our producer from another source tree (``DIR/agent_channel_acp``),
to compare versions in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PIECE = "w w w "  # what every streamed piece says, for both agents
STREAM_BYTES = 2 * 1024 * 1024
TRICKLE = "w " * 12  # the stalled-client stream's pieces (24 bytes: the 2 MiB take a few seconds)


# -- the bare SDK agent (run with --bare-agent) --------------------------------------


class BareAgent:
    """Just enough of an ACP agent: sessions, chunked echo, cancellable waits, streams."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.waits: dict[str, asyncio.Event] = {}
        self.n = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> Any:
        from acp import InitializeResponse

        return InitializeResponse(protocol_version=1)

    async def new_session(self, cwd: str, **kwargs: Any) -> Any:
        from acp import NewSessionResponse

        self.n += 1
        return NewSessionResponse(session_id=f"s{self.n}")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        from acp import PromptResponse, update_agent_message_text

        words = prompt[0].text.split()
        if words[0] == "block":
            await self.conn.session_update(session_id, update_agent_message_text("waiting"))
            wait = self.waits[session_id] = asyncio.Event()
            await wait.wait()
            return PromptResponse(stop_reason="cancelled")
        if words[0] == "tool":  # what ours shows for its blocking tool: a card, then its failure
            from acp import start_tool_call, update_tool_call

            self.n += 1
            call_id = f"call{self.n}"
            await self.conn.session_update(session_id, update_agent_message_text("waiting"))
            card = start_tool_call(call_id, "block", kind="execute", status="in_progress")
            await self.conn.session_update(session_id, card)
            wait = self.waits[session_id] = asyncio.Event()
            await wait.wait()
            await self.conn.session_update(session_id, update_tool_call(call_id, status="failed"))
            return PromptResponse(stop_reason="cancelled")
        if words[0] in ("pieces", "trickle"):
            piece = PIECE if words[0] == "pieces" else TRICKLE
            for _ in range(int(words[1])):
                await self.conn.session_update(session_id, update_agent_message_text(piece))
            return PromptResponse(stop_reason="end_turn")
        for i in range(3):
            await self.conn.session_update(session_id, update_agent_message_text(f"w{i} w w "))
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        wait = self.waits.pop(session_id, None)
        if wait is not None:
            wait.set()


def bare_main() -> None:
    import acp

    asyncio.run(acp.run_agent(BareAgent()))  # pyright: ignore[reportArgumentType]


# -- our agent (loaded by the producer as acp_stdio:ours) ----------------------------


def ours(model: str | None = None) -> Any:
    import anyio
    import anyio.lowlevel
    from agent_channel import ChatMessage, ChatMessageAssistant, ChatMessageTool, ChatMessageUser
    from agent_channel_react import (
        AgentState,
        ModelOutput,
        ScriptedModel,
        call,
        react,
        reply,
        tool,
        tool_call,
    )

    @tool(kind="execute")
    async def block(why: str) -> str:
        """Wait until cancelled.

        Args:
            why: Why.
        """
        await anyio.sleep_forever()
        return ""

    def script(messages: Sequence[ChatMessage], tools: Any) -> Any:
        last = messages[-1]
        words = last.text.split() if isinstance(last, ChatMessageUser) else []
        if isinstance(last, ChatMessageTool):
            return reply("done")
        if words[:1] == ["block"]:
            return call(tool_call("block", why="bench"), content="waiting")
        if words[:1] == ["pieces"]:
            return reply(PIECE * int(words[1]))  # three words a piece
        return reply("w0 w w w1 w w w2 w w")

    class Model:
        def __init__(self) -> None:
            self.inner = ScriptedModel(script)
            self.name: str | None = "bench"

        async def generate(self, messages: Any, tools: Any, config: Any, stream: Any) -> Any:
            last = messages[-1]
            words = last.text.split() if isinstance(last, ChatMessageUser) else []
            if words == ["hang"]:
                stream.text("waiting")
                await anyio.sleep_forever()
            if words[:1] == ["trickle"]:  # a model that streams over time, as real ones do
                for _ in range(int(words[1])):
                    stream.text(TRICKLE)
                    await anyio.lowlevel.checkpoint()
                text = TRICKLE * int(words[1])
                message = ChatMessageAssistant(id=stream.message_id, content=text)
                return ModelOutput(message=message)
            return await self.inner.generate(messages, tools, config, stream)

    agent = react(model=Model(), tools=[block], prompt=None, submit=False)

    async def body() -> Any:
        return await agent(AgentState())

    return body


# -- the SDK client ------------------------------------------------------------------


class Client:
    def __init__(self, marker: Callable[[Any], bool]) -> None:
        self.pieces = 0
        self.frames = 0
        self.text_bytes = 0
        self.marker = asyncio.Event()
        self.is_marker = marker

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if update.session_update == "agent_message_chunk":
            text = getattr(update.content, "text", "")
            self.frames += 1
            self.text_bytes += len(text)
        if self.is_marker(update):
            self.marker.set()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def waiting_chunk(update: Any) -> bool:
    return (
        update.session_update == "agent_message_chunk"
        and getattr(update.content, "text", "") == "waiting"
    )


def tool_card(update: Any) -> bool:
    return update.session_update == "tool_call"


def stats(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return {"median_ms": round(statistics.median(ms), 3), "p99_ms": round(p99, 3), "n": len(ms)}


class Side:
    """One agent subprocess and its SDK client."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name, self.argv, self.env = name, argv, env
        self.client = Client(waiting_chunk)
        self.conn: Any = None
        self._cm: Any = None

    async def __aenter__(self) -> Side:
        import acp

        self._cm = acp.spawn_agent_process(
            self.client,
            sys.executable,
            *self.argv,
            env=self.env,
            transport_kwargs={"stderr": None},
        )
        self.conn, _proc = await self._cm.__aenter__()
        await self.conn.initialize(protocol_version=1)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._cm.__aexit__(None, None, None)

    async def session(self) -> str:
        return (await self.conn.new_session(cwd="/", mcp_servers=[])).session_id

    async def prompt(self, sid: str, text: str) -> Any:
        import acp

        return await self.conn.prompt(session_id=sid, prompt=[acp.text_block(text)])

    async def cancel_once(self, sid: str, word: str, marker: Callable[[Any], bool]) -> float:
        import acp

        self.client.marker.clear()
        self.client.is_marker = marker
        task = asyncio.ensure_future(
            self.conn.prompt(session_id=sid, prompt=[acp.text_block(word)])
        )
        await self.client.marker.wait()
        t = time.perf_counter()
        await self.conn.cancel(session_id=sid)
        r = await task
        dt = time.perf_counter() - t
        assert r.stop_reason == "cancelled", r
        return dt

    async def stream(self, sid: str, pieces: int) -> dict[str, float]:
        c = self.client
        c.frames = c.text_bytes = 0
        t = time.perf_counter()
        await self.prompt(sid, f"pieces {pieces}")
        dt = time.perf_counter() - t
        assert c.text_bytes == pieces * len(PIECE), (c.text_bytes, pieces)
        return {"seconds": dt, "frames": c.frames}


async def startup(argv: list[str], env: dict[str, str]) -> float:
    import acp

    t = time.perf_counter()
    async with acp.spawn_agent_process(
        Client(waiting_chunk), sys.executable, *argv, env=env, transport_kwargs={"stderr": None}
    ) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        return time.perf_counter() - t


# -- the raw client that may stop reading ----------------------------------------------


def rss(pid: int) -> int:
    """Resident set size of ``pid`` in bytes (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def backlog_cost(
    argv: list[str], env: dict[str, str], stall: float | None
) -> tuple[int, float]:
    """Peak RSS above the agent's own baseline while 2 MiB of text streams to a client that
    reads (``stall=None``) or does not read for ``stall`` seconds; and the prompt's time.

    The client reads the agent's stdout through a pipe transport it pauses, so nothing
    reads the pipe while it stalls and the agent meets real backpressure.
    """
    loop = asyncio.get_running_loop()
    out_r, out_w = os.pipe()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv, stdin=asyncio.subprocess.PIPE, stdout=out_w, env=env
    )
    os.close(out_w)
    stdout = asyncio.StreamReader(limit=1 << 24)
    pipe, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stdout), os.fdopen(out_r, "rb", buffering=0)
    )
    assert proc.stdin
    stdin = proc.stdin

    def send(msg: dict[str, Any]) -> None:
        stdin.write((json.dumps({"jsonrpc": "2.0", **msg}) + "\n").encode())

    async def reply(msg_id: int) -> dict[str, Any]:
        while True:
            frame = json.loads(await stdout.readline())
            if frame.get("id") == msg_id and "method" not in frame:
                return frame

    send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    await reply(1)
    send({"id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
    sid = (await reply(2))["result"]["sessionId"]
    hello = [{"type": "text", "text": "hello"}]
    send({"id": 3, "method": "session/prompt", "params": {"sessionId": sid, "prompt": hello}})
    await reply(3)
    base = peak = rss(proc.pid)
    n = STREAM_BYTES // len(TRICKLE)
    text = [{"type": "text", "text": f"trickle {n}"}]
    t = time.monotonic()
    send({"id": 4, "method": "session/prompt", "params": {"sessionId": sid, "prompt": text}})
    if stall is not None:
        pipe.pause_reading()
        end = time.monotonic() + stall
        while time.monotonic() < end:
            peak = max(peak, rss(proc.pid))
            await asyncio.sleep(0.05)
        pipe.resume_reading()
    answer = asyncio.ensure_future(reply(4))
    while not answer.done():
        peak = max(peak, rss(proc.pid))
        await asyncio.wait([answer], timeout=0.05)
    assert "result" in answer.result(), answer.result()
    took = time.monotonic() - t
    stdin.close()
    await proc.wait()
    pipe.close()
    return peak - base, took


# -- the run ---------------------------------------------------------------------------


async def main(runs: int, pieces: int, stall: float, agent_path: str | None) -> dict[str, Any]:
    env = {k: v for k in ("PATH", "HOME", "LANG") if (v := os.environ.get(k))}
    ours_env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [agent_path, str(HERE)])))
    bare_env = dict(env, PYTHONPATH=str(HERE))
    bare_argv = [str(Path(__file__)), "--bare-agent"]
    ours_argv = ["-m", "agent_channel_acp", "stdio", "--agent", "acp_stdio:ours"]
    out: dict[str, Any] = {"runs": runs, "bare_sdk": {}, "ours": {}}
    b, o = out["bare_sdk"], out["ours"]

    starts: dict[str, list[float]] = {"bare": [], "ours": []}
    for _ in range(5):
        starts["bare"].append(await startup(bare_argv, bare_env))
        starts["ours"].append(await startup(ours_argv, ours_env))
    b["startup_to_initialize"], o["startup_to_initialize"] = (
        stats(starts["bare"]),
        stats(starts["ours"]),
    )

    async with Side("bare", bare_argv, bare_env) as bare, Side("ours", ours_argv, ours_env) as us:
        sides = (bare, us)
        sids = {s.name: await s.session() for s in sides}
        for _ in range(20):  # warm up
            for s in sides:
                await s.prompt(sids[s.name], "hello")

        rt: dict[str, list[float]] = {"bare": [], "ours": []}
        for i in range(runs):
            for s in sides:
                if i % 50 == 0:
                    sids[s.name] = await s.session()  # keep the conversation short
                t = time.perf_counter()
                await s.prompt(sids[s.name], "hello")
                rt[s.name].append(time.perf_counter() - t)
        b["prompt_round_trip"], o["prompt_round_trip"] = stats(rt["bare"]), stats(rt["ours"])

        cancels: dict[str, list[float]] = {"bare": [], "bare_tool": [], "ours": [], "hang": []}
        for i in range(runs):
            for s in sides:
                if i % 50 == 0:
                    sids[s.name] = await s.session()
            cancels["bare"].append(await bare.cancel_once(sids["bare"], "block", waiting_chunk))
            cancels["hang"].append(await us.cancel_once(sids["ours"], "hang", waiting_chunk))
            cancels["bare_tool"].append(await bare.cancel_once(sids["bare"], "tool", tool_card))
            cancels["ours"].append(await us.cancel_once(sids["ours"], "block", tool_card))
        b["cancel_to_cancelled"] = stats(cancels["bare"])
        b["cancel_during_tool_call"] = stats(cancels["bare_tool"])
        o["cancel_to_cancelled"] = o["cancel_during_tool_call"] = stats(cancels["ours"])
        o["cancel_during_model_call"] = stats(cancels["hang"])

        flows: dict[str, list[dict[str, float]]] = {"bare": [], "ours": []}
        for _ in range(5):
            for s in sides:
                flows[s.name].append(await s.stream(await s.session(), pieces))
        for s, into in ((bare, b), (us, o)):
            best = min(flows[s.name], key=lambda f: f["seconds"])
            dt = best["seconds"]
            into["throughput"] = {
                "pieces": pieces,
                "pieces_per_s": round(pieces / dt),
                "frames_per_s": round(best["frames"] / dt),
                "text_bytes_per_s": round(pieces * len(PIECE) / dt),
            }

    for name, argv, e, into in (("bare", bare_argv, bare_env, b), ("ours", ours_argv, ours_env, o)):
        reading, took = await backlog_cost(argv, e, None)
        stalled, _ = await backlog_cost(argv, e, stall)
        into["stalled_client"] = {
            "text_bytes": STREAM_BYTES,
            "stream_s_when_read": round(took, 1),
            "stall_s": stall,
            "rss_reading_mib": round(reading / 2**20, 1),
            "rss_stalled_mib": round(stalled / 2**20, 1),
            "extra_per_text_byte": round((stalled - reading) / STREAM_BYTES, 2),
        }
        if name == "bare":
            into["stalled_client"]["note"] = "the bare agent waits on the pipe: its stream stalls"

    def ratio(key: str, field: str, bare_key: str | None = None) -> float:
        return round(o[key][field] / b[bare_key or key][field], 2)

    model_call = ("cancel_during_model_call", "median_ms", "cancel_to_cancelled")
    out["ratios"] = {
        "cancel_median (tool call, like for like)": ratio("cancel_during_tool_call", "median_ms"),
        "cancel_median (model call, like for like)": ratio(*model_call),
        "cancel_p99 (tool call, like for like)": ratio("cancel_during_tool_call", "p99_ms"),
        "cancel_median (ours' tool call / bare block: one frame more, as measured before)": ratio(
            "cancel_to_cancelled", "median_ms"
        ),
        "prompt_round_trip_median": ratio("prompt_round_trip", "median_ms"),
        "throughput_pieces": ratio("throughput", "pieces_per_s"),
        "stalled_client_extra_per_text_byte": o["stalled_client"]["extra_per_text_byte"],
    }
    return out


if __name__ == "__main__":
    if "--bare-agent" in sys.argv:
        bare_main()
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--runs", type=int, default=200)
        parser.add_argument("--pieces", type=int, default=2000)
        parser.add_argument("--stall", type=float, default=10.0)
        parser.add_argument("--agent-path", help="run our producer from this source tree")
        args = parser.parse_args()
        result = asyncio.run(main(args.runs, args.pieces, args.stall, args.agent_path))
        print(json.dumps(result, indent=2))
