"""A wire fuzzer for both servers: hypothesis draws JSON-RPC frames, valid and broken.

What it sends (``batch``): frames of every method the servers handle, valid ones first
drawn, then mutated (a field dropped or replaced by any JSON value, params of the wrong
type, ``_meta`` stuffed with keys that shadow parameters or name our own options, huge
strings, deep nesting, ids of every JSON type, unknown methods), interleaved
``session/cancel`` and ``$/cancel_request`` notifications, and byte-level damage (invalid
UTF-8, cut frames, stray bytes). A batch's bytes go out in randomly cut writes, so frames
are split across writes and several share one; a few frames are over the frame cap.

What it checks (``Wire``): it models the server's framing on the exact bytes it sent
(split on newlines, strip, parse) to know which lines are requests with a usable id
(a string or an integer), and counts the responses per id: each such request gets exactly
one well-formed response. Lines that are not JSON objects must each get an error with a
null id. Nothing else it reads may be malformed.

The servers run as subprocesses (``Target``): ``stdio --agent agents:react_agent`` on
pipes, and ``serve --demo`` on its unix socket or on TCP with the token, with
``AGENT_CHANNEL_ACP_DEBUG=1`` so ``_agent_channel/debug`` reports their task and
connection counts; file descriptors are counted in ``/proc/<pid>/fd``. Driving is
asyncio on one loop the test owns (hypothesis calls the example synchronously); waits
are on observable conditions under a hang guard, never timing assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import GUARD, HERE, agent_env, raw_agent
from hypothesis import strategies as st

MAX_FRAME = 8 << 20  # the transport's cap (asserted against the producer's in the tests)
SETTLE = GUARD * 3
"""Hang guard for a whole batch's answers on a loaded machine."""

JSON = dict[str, Any]

# -- strategies ------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
any_id = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63),
    st.text(max_size=16),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.lists(scalars, max_size=2),
    st.dictionaries(st.text(max_size=4), scalars, max_size=2),
)
texts = st.one_of(
    st.sampled_from(["hello", "quick", "think", "inspect", "noisy", "loop", "1", "2", "nope"]),
    st.text(max_size=40),
)
SHADOW_KEYS = [
    "sessionId",
    "session_id",
    "cwd",
    "prompt",
    "protocol_version",
    "mcp_servers",
    "self",
    "kwargs",
    "method",
    "params",
    "agent_channel.observe",
    "agent_channel.token",
    "agent_channel.replay",
]
UNKNOWN_METHODS = [
    "authenticate",
    "logout",
    "session/list",
    "session/resume",
    "session/delete",
    "session/set_model",
    "session/set_config_option",
    "fs/read_text_file",
    "terminal/create",
    "session/update",
    "$/cancel_request",
    "_agent_channel/nope",
    "_agent_channel/",
    "_",
    "",
    "/",
    "session/",
]
EXTENSIONS = [
    "list",
    "messages",
    "queue",
    "withdraw",
    "cancel_tool_call",
    "cancel_turn",
    "end",
    "debug",
]


@dataclass
class Pool:
    """Session ids to aim frames at: learned from responses, plus a bogus one."""

    sessions: list[str] = field(default_factory=lambda: ["nope"])
    protect: set[str] = field(default_factory=set[str])
    """Ids ``_agent_channel/end`` must not name (the execution the final check prompts)."""

    def learn(self, frame: JSON) -> None:
        result = frame.get("result")
        sid = result.get("sessionId") if isinstance(result, dict) else None
        if isinstance(sid, str) and sid not in self.sessions:
            self.sessions.append(sid)


def _session(draw: st.DrawFn, pool: Pool) -> str:
    """A session id from the pool (drawn as an index: the draws must not depend on the pool)."""
    i = draw(st.integers(0, 1 << 16))
    return pool.sessions[i % len(pool.sessions)]


def _content(draw: st.DrawFn) -> list[Any]:
    block = draw(
        st.sampled_from(["text", "text", "text", "image", "resource", "resource_link", "audio"])
    )
    if block == "text":
        return [{"type": "text", "text": draw(texts)}]
    if block == "image":
        return [{"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}]
    if block == "audio":
        return [{"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="}]
    if block == "resource_link":
        return [{"type": "resource_link", "uri": "file:///x", "name": "x"}]
    return [{"type": "resource", "resource": {"uri": "file:///x", "text": draw(texts)}}]


def valid(draw: st.DrawFn, pool: Pool, attach: bool) -> tuple[str, Any, bool]:
    """(method, params, is_request) of a well-formed call the server handles."""
    cwd = str(HERE)
    methods = [
        "initialize",
        "session/new",
        "session/load",
        "session/prompt",
        "session/prompt",
        "session/prompt",
        "session/cancel",
        "session/cancel",
        "session/set_mode",
        "session/close",
        *(f"_agent_channel/{e}" for e in EXTENSIONS),
    ]
    method = draw(st.sampled_from(methods))
    sid = _session(draw, pool)
    if method == "initialize":
        params: Any = {
            "protocolVersion": draw(st.sampled_from([1, 0, 2, 99])),
            "clientCapabilities": {"fs": {"readTextFile": draw(st.booleans())}},
            "clientInfo": {"name": draw(texts), "version": "1"},
        }
    elif method == "session/new":
        params = {"cwd": cwd, "mcpServers": []}
        if attach and draw(st.booleans()):
            params["_meta"] = {"agent_channel.observe": draw(st.booleans())}
    elif method == "session/load":
        params = {"cwd": cwd, "sessionId": sid, "mcpServers": []}
    elif method == "session/prompt":
        params = {"sessionId": sid, "prompt": _content(draw)}
    elif method == "session/cancel":
        return method, {"sessionId": sid}, False
    elif method == "session/set_mode":
        params = {"sessionId": sid, "modeId": draw(texts)}
    elif method == "session/close":
        params = {"sessionId": sid}
    else:
        name = method.removeprefix("_agent_channel/")
        params = {"sessionId": sid}
        if name == "messages":
            params.update(
                {"all": draw(st.booleans()), "full": draw(st.booleans()), "tail": draw(scalars)}
            )
        elif name == "withdraw":
            params["messageId"] = draw(texts)
        elif name == "cancel_tool_call":
            params["toolCallId"] = draw(texts)
        elif name == "end" and sid in pool.protect:
            params["sessionId"] = "nope"  # ending the served execution would end the run
        elif name == "list":
            params = {}
    return method, params, True


@dataclass(frozen=True)
class Deep:
    """Nesting deeper than ``json.dumps`` can write: spliced into the frame's bytes."""

    depth: int
    kind: str
    leaf: Any

    def raw(self) -> bytes:
        leaf = json.dumps(self.leaf).encode()
        if self.kind == "list":
            return b"[" * self.depth + leaf + b"]" * self.depth
        return b'{"a":' * self.depth + leaf + b"}" * self.depth


def mutate(draw: st.DrawFn, frame: JSON) -> JSON:
    """Break one thing about a frame (or several, drawn one after another)."""
    params = frame.get("params")
    how = draw(
        st.sampled_from(
            [
                "drop",
                "replace",
                "params",
                "meta",
                "shadow",
                "huge",
                "deep",
                "id",
                "method",
                "jsonrpc",
                "extra",
            ]
        )
    )
    if how == "drop":
        keys = [
            *frame.keys(),
            *((f"params.{k}" for k in params) if isinstance(params, dict) else ()),
        ]
        if not keys:
            return frame
        key = draw(st.sampled_from(keys))
        if key.startswith("params.") and isinstance(params, dict):
            params.pop(key.removeprefix("params."), None)
        else:
            frame.pop(key, None)
    elif how == "replace" and isinstance(params, dict) and params:
        params[draw(st.sampled_from(sorted(params)))] = draw(json_values)
    elif how == "params":
        frame["params"] = draw(json_values)
    elif how in ("meta", "shadow") and isinstance(params, dict):
        if how == "meta":
            params["_meta"] = draw(json_values)
        else:
            keys = draw(st.lists(st.sampled_from(SHADOW_KEYS), min_size=1, max_size=4))
            params["_meta"] = {k: draw(json_values) for k in keys}
    elif how == "huge":
        # mostly small; now and then past the stream reader's 1 MiB line buffer
        size = draw(st.sampled_from([1 << 10, 1 << 10, 1 << 10, 64 << 10, 64 << 10, 1 << 20 | 1]))
        text = draw(st.sampled_from(["x", "é", "\U0001f600", "\\", '"']))
        huge = text * (size // len(text.encode()))
        target = params if isinstance(params, dict) and params else frame
        target[draw(st.sampled_from(sorted(target)))] = huge
    elif how == "deep":
        depth = draw(st.sampled_from([50, 200, 900, 3000, 100_000]))
        kind = draw(st.sampled_from(["list", "dict"]))
        target = params if isinstance(params, dict) and params else frame
        target[draw(st.sampled_from(sorted(target)))] = Deep(depth, kind, draw(scalars))
    elif how == "id":
        frame["id"] = draw(any_id)
    elif how == "method":
        frame["method"] = draw(st.one_of(st.sampled_from(UNKNOWN_METHODS), st.text(), json_values))
    elif how == "jsonrpc":
        frame["jsonrpc"] = draw(json_values)
    elif how == "extra":
        frame[draw(st.sampled_from(["result", "error", "id", "x", "_meta"]))] = draw(json_values)
    return frame


def encode(frame: Any, draw: st.DrawFn) -> bytes:
    """One frame as bytes: compact or spaced JSON, lone surrogates escaped (as JSON allows)."""
    spaced = draw(st.booleans())
    deep: list[Deep] = []

    def hold(value: Any) -> Any:
        if isinstance(value, Deep):
            deep.append(value)
            return f"\x00deep-{len(deep) - 1}"
        if isinstance(value, dict):
            return {k: hold(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
        if isinstance(value, list):
            return [hold(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
        return value

    data = json.dumps(hold(frame), separators=(", ", ": ") if spaced else (",", ":")).encode()
    for i, d in enumerate(deep):
        data = data.replace(f'"\\u0000deep-{i}"'.encode(), d.raw())
    return data


def damage(draw: st.DrawFn, data: bytes) -> bytes:
    """Byte-level harm: invalid UTF-8, a cut, a stray byte, a BOM, an inner newline."""
    how = draw(st.sampled_from(["utf8", "cut", "byte", "bom", "newline", "nul"]))
    at = _at(draw, len(data))
    if how == "utf8":
        bad = draw(st.sampled_from([b"\xff", b"\xc0\x80", b"\x80", b"\xed\xa0\x80", b"\xf8\x88"]))
        return data[:at] + bad + data[at:]
    if how == "cut":
        return data[:at]
    if how == "byte":
        return data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    if how == "bom":
        return b"\xef\xbb\xbf" + data
    if how == "newline":
        return data[:at] + b"\n" + data[at:]
    return data[:at] + b"\x00" + data[at:]


@dataclass
class Ids:
    """Hands out request ids unique on one connection, of the drawn JSON type."""

    used: set[str] = field(default_factory=set[str])
    n: int = 0

    def unique(self, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, str | int):
            return value  # unusable: the server answers it with a null id
        while _key(value) in self.used:
            self.n += 1
            value = f"{value}#{self.n}" if isinstance(value, str) else self.n + 10**12
        self.used.add(_key(value))
        return value


def batch(
    draw: st.DrawFn, pool: Pool, ids: Ids, *, attach: bool, oversize: bool, size: int = 40
) -> tuple[list[bytes], Counter[str]]:
    """Frames for one example (each ending in a newline) and what kind each is."""
    kinds: Counter[str] = Counter()
    lines: list[bytes] = []
    for _ in range(draw(st.integers(1, size))):
        kind = draw(
            st.sampled_from(
                ["valid", "valid", "mutated", "mutated", "mutated", "cancel", "garbage", "damaged"]
            )
        )
        kinds[kind] += 1
        if kind == "cancel":
            if draw(st.booleans()):
                frame: Any = {"jsonrpc": "2.0", "method": "session/cancel"}
                frame["params"] = {"sessionId": _session(draw, pool)}
            else:
                frame = {"jsonrpc": "2.0", "method": "$/cancel_request"}
                frame["params"] = {"requestId": draw(any_id)}
            lines.append(encode(frame, draw) + b"\n")
            continue
        if kind == "garbage":
            raw = draw(
                st.one_of(
                    st.binary(max_size=64),
                    st.sampled_from([b"[1,2,3]", b"42", b'"x"', b"null", b"[]", b"{}", b"[{}]"]),
                    json_values.map(lambda v: json.dumps(v).encode()),
                )
            )
            lines.append(raw.replace(b"\n", b" ") + b"\n")
            continue
        method, params, request = valid(draw, pool, attach)
        frame = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            frame["id"] = draw(st.one_of(st.integers(0, 2**31), st.text(max_size=12), any_id))
        if kind == "mutated":
            for _ in range(draw(st.integers(1, 3))):
                frame = mutate(draw, frame)
        if "id" in frame:
            frame["id"] = ids.unique(frame["id"])
        data = encode(frame, draw)
        if kind == "damaged":
            data = damage(draw, data)
        lines.append(data.replace(b"\n", b"") + b"\n" if kind != "damaged" else data + b"\n")
    drawn = draw(st.integers(0, 2**31))
    if oversize:
        kinds["oversize"] += 1
        msg_id = ids.unique(drawn)
        head = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "session/prompt"})
        lines.append(head[:-1].encode() + b',"params":"' + b"y" * (MAX_FRAME + 16) + b'"}\n')
    return lines, kinds


def cuts(draw: st.DrawFn, total: int) -> list[int]:
    """Where to cut a batch's bytes into separate writes."""
    points = draw(st.lists(st.integers(0, 1 << 20), max_size=8))
    return sorted({p * total >> 20 for p in points})


def _at(draw: st.DrawFn, size: int) -> int:
    """A position in ``size`` bytes, drawn as a fraction (ids make sizes differ between runs,
    and hypothesis wants the same draws when it replays an example)."""
    return draw(st.integers(0, 1 << 20)) * size >> 20


# -- the model of what must come back ----------------------------------------------------------


_OVERSIZE_HEAD = re.compile(rb'\{"jsonrpc": "2.0", "id": (\d+), "method": "session/prompt",')


def _key(value: Any) -> str:
    return json.dumps(value)


def usable(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


@dataclass
class Owed:
    """What the server owes for the bytes sent: responses per id, errors with a null id."""

    by_id: Counter[str] = field(default_factory=Counter[str])
    methods: dict[str, Any] = field(default_factory=dict[str, Any])
    lines: dict[str, bytes] = field(default_factory=dict[str, bytes])
    null_errors: int = 0
    """Responses owed with a null id: errors for frames refused as a whole, and the answers
    to requests whose id is null."""
    oversize: list[Any] = field(default_factory=list[Any])

    def expect(self, stream: bytes) -> None:
        """Model the transport's framing on ``stream`` (whole lines, newline-terminated)."""
        for line in stream.split(b"\n")[:-1]:
            if len(line) > MAX_FRAME:  # refused by the id at its head (ours are all alike)
                self.oversize.append(line[:200])
                head = _OVERSIZE_HEAD.match(line)
                if head is not None:
                    self.by_id[head.group(1).decode()] += 1
                    self.lines[head.group(1).decode()] = line[:300]
                continue
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                self.null_errors += 1
                continue
            if not isinstance(message, dict):
                self.null_errors += 1
                continue
            if "id" not in message:
                continue
            msg_id = message["id"]
            if msg_id is None:  # a request may have a null id (JSON-RPC discourages it)
                method = message.get("method")
                if method is None:
                    self.null_errors += "result" not in message and "error" not in message
                else:
                    self.null_errors += 1  # refused (not a string method) or answered, id null
                continue
            if not usable(msg_id):
                self.null_errors += 1
                continue
            if "method" not in message and ("result" in message or "error" in message):
                continue  # a response to the server: nothing owed
            self.by_id[_key(msg_id)] += 1
            self.methods[_key(msg_id)] = message.get("method")
            self.lines[_key(msg_id)] = line[:300]


def well_formed(frame: Any) -> str | None:
    """Why ``frame`` (something the server wrote) is not a well-formed JSON-RPC frame, or None."""
    if not isinstance(frame, dict):
        return "not an object"
    if frame.get("jsonrpc") != "2.0":
        return "jsonrpc is not 2.0"
    if "method" in frame:
        return None if isinstance(frame["method"], str) else "method not a string"
    if "id" not in frame:
        return "a response without an id"
    if ("result" in frame) == ("error" in frame):
        return "a response needs exactly one of result and error"
    if "error" in frame:
        error = frame["error"]
        if not isinstance(error, dict):
            return "error is not an object"
        code, message = error.get("code"), error.get("message")
        if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
            return "error needs an integer code and a string message"
    return None


@dataclass
class Wire:
    """One connection to a server: writes bytes, reads and sorts every frame that comes back."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    pool: Pool
    owed: Owed = field(default_factory=Owed)
    got: Counter[str] = field(default_factory=Counter[str])
    results: dict[str, JSON] = field(default_factory=dict[str, JSON])
    null_errors: int = 0
    notifications: int = 0
    malformed: list[str] = field(default_factory=list[str])
    frames_sent: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    reading: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.reading = asyncio.ensure_future(self._read())

    async def stop(self) -> None:
        if self.reading is not None:
            self.reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.reading
            self.reading = None

    async def _read(self) -> None:
        while line := await self.reader.readline():
            self._sort(line)
        self.changed.set()

    def _sort(self, line: bytes) -> None:
        try:
            frame = json.loads(line)
        except ValueError as e:
            self.malformed.append(f"not JSON ({e}): {line[:200]!r}")
            return
        why = well_formed(frame)
        if why is not None:
            self.malformed.append(f"{why}: {line[:200]!r}")
            return
        if "method" in frame:
            self.notifications += 1
        elif frame["id"] is None:
            self.null_errors += 1
            self.pool.learn(frame)
        else:
            key = _key(frame["id"])
            self.got[key] += 1
            self.pool.learn(frame)
            if "result" in frame or "error" in frame:
                self.results[key] = frame
        self.changed.set()

    async def send(self, lines: list[bytes], cut_at: list[int]) -> None:
        """Write the frames as one stream cut at ``cut_at``; the model learns what is owed."""
        stream = b"".join(lines)
        self.owed.expect(stream)
        self.frames_sent += len(lines)
        start = 0
        for end in [*cut_at, len(stream)]:
            if end > start:
                self.writer.write(stream[start:end])
                await self.writer.drain()
                start = end

    def missing(self, keys: Callable[[str], bool] = lambda k: True) -> dict[str, int]:
        """Ids still owed a response (how many)."""
        return {
            k: n - self.got[k] for k, n in self.owed.by_id.items() if keys(k) and self.got[k] < n
        }

    def extra(self) -> dict[str, int]:
        """Ids answered more often than asked (or never asked)."""
        return {k: n - self.owed.by_id[k] for k, n in self.got.items() if n > self.owed.by_id[k]}

    async def settled(
        self, keys: Callable[[str], bool] = lambda k: True, guard: float = SETTLE
    ) -> None:
        """Wait until every id owed (among ``keys``) has its response, or fail with the list."""
        try:
            async with asyncio.timeout(guard):
                while self.missing(keys) or self.null_errors < self.owed.null_errors:
                    if self.reading is not None and self.reading.done():
                        break
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            pass
        missing = self.missing(keys)
        assert not missing, "requests never answered: " + "\n".join(
            repr(self.owed.lines[k]) for k in sorted(missing)[:10]
        )

    async def call(self, method: str, params: Any, msg_id: str, guard: float = SETTLE) -> JSON:
        """A clean request on the same wire, awaited: its response."""
        frame = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
        await self.send([json.dumps(frame).encode() + b"\n"], [])
        key = _key(msg_id)
        await self.settled(lambda k: k == key, guard)
        return self.results[key]

    def check(self) -> None:
        """Everything read so far is well-formed and no id was answered twice."""
        assert not self.malformed, self.malformed[:5]
        assert not self.extra(), f"answered more than once: {self.extra()}"
        assert self.null_errors <= self.owed.null_errors, (
            f"{self.null_errors} responses with a null id, {self.owed.null_errors} owed"
        )


# -- the servers ---------------------------------------------------------------------------------


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass
class Target:
    """A server subprocess under fuzz: how to reach it, and its log."""

    kind: str  # "stdio" | "unix" | "tcp"
    proc: subprocess.Popen[bytes]
    log: Path
    transport: JSON = field(default_factory=dict[str, Any])
    announced: str = ""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    async def connect(self, pool: Pool) -> Wire:
        if self.kind == "stdio":
            raise RuntimeError("stdio has one wire: stdio_wire()")
        if self.kind == "unix":
            reader, writer = await asyncio.open_unix_connection(
                self.transport["path"], limit=1 << 24
            )
        else:
            reader, writer = await asyncio.open_connection(
                self.transport["host"], self.transport["port"], limit=1 << 24
            )
        wire = Wire(reader, writer, pool)
        wire.start()
        if self.kind == "tcp":
            token = {"agent_channel.token": self.transport["token"]}
            reply = await wire.call("initialize", {"protocolVersion": 1, "_meta": token}, "auth")
            assert "result" in reply, reply
        return wire

    def stop(self) -> int:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(GUARD)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(GUARD)


def fuzz_env(rt: Path, level: str = "INFO", debug: bool = True) -> dict[str, str]:
    return agent_env(
        AGENT_CHANNEL_ACP_DEBUG="1" if debug else "0",
        AGENT_CHANNEL_RUNTIME_DIR=str(rt),
        AGENT_CHANNEL_DEMO_TOOL_SECONDS="0",
        AGENT_CHANNEL_ACP_LOG=level,
    )


async def start_stdio(tmp: Path) -> tuple[Target, asyncio.subprocess.Process]:
    log = tmp / "stdio.log"
    with log.open("wb") as err:
        proc = await raw_agent(fuzz_env(tmp / "rt"), stderr=err, cwd=HERE, limit=1 << 24)
    return Target("stdio", _Popenish(proc), log), proc  # pyright: ignore[reportArgumentType]


class _Popenish:
    """The bits of ``Popen`` a ``Target`` uses, over an asyncio subprocess."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self.pid = proc.pid

    def poll(self) -> int | None:
        return self._proc.returncode

    def send_signal(self, sig: int) -> None:
        self._proc.send_signal(sig)

    def kill(self) -> None:
        self._proc.kill()

    def wait(self, timeout: float) -> int:
        raise NotImplementedError("await the asyncio process instead")


def start_serve(tmp: Path, *, tcp: bool, level: str = "INFO", debug: bool = True) -> Target:
    """``agent-channel-acp serve --demo`` (unix socket, or TCP with the token); its runtime
    directory is ``tmp/rt``, its log ``tmp/unix.log`` or ``tmp/tcp.log``, its stdout the
    announcement (``Target.announced``)."""
    log = tmp / ("tcp.log" if tcp else "unix.log")
    rt = tmp / "rt"
    where = ["--port", "0"] if tcp else []
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent_channel_acp", "serve", "--demo", "--json", *where],
            env=fuzz_env(rt, level, debug),
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=HERE,
        )
    line = _first_line(proc)
    assert line, f"serve did not start: {log.read_text()}"
    announced = json.loads(line)
    record = json.loads(Path(announced["record"]).read_text())
    return Target("tcp" if tcp else "unix", proc, log, record["transport"], announced=line)


def _first_line(proc: subprocess.Popen[bytes]) -> str:
    import threading

    out: list[bytes] = []
    stdout = proc.stdout
    assert stdout is not None
    reader = threading.Thread(target=lambda: out.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(GUARD * 3)
    return out[0].decode() if out else ""
