"""What the wire fuzzer sends: hypothesis strategies for JSON-RPC frames, valid and broken.

``batch`` draws one example's frames for either server: frames of every method the
servers handle, valid ones first drawn, then mutated (a field dropped or replaced by any
JSON value, params of the wrong type, ``_meta`` stuffed with keys that shadow parameters
or name our own options, huge strings, deep nesting, ids of every JSON type, unknown
methods), interleaved ``session/cancel`` and ``$/cancel_request`` notifications, and
byte-level damage (invalid UTF-8, cut frames, stray bytes). ``cuts`` says where a batch's
bytes are cut into separate writes, so frames are split across writes and several share
one; a few frames are over the frame cap. What must come back is ``fuzz_checker``'s job.

Every draw is independent of what the server answered (session ids are drawn as indices
into the ``Pool``), so hypothesis replays an example with the same draws.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from conftest import HERE
from hypothesis import strategies as st

MAX_FRAME = 8 << 20  # the transport's cap (asserted against the producer's in the tests)

JSON = dict[str, Any]


def id_key(value: Any) -> str:
    """A request id as a dict key (ids of different JSON types stay apart)."""
    return json.dumps(value)


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
    "session/fork",
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
        "session/list",
        "session/resume",
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
    elif method == "session/list":
        params = draw(
            st.sampled_from([{}, {"cwd": cwd}, {"cwd": "/elsewhere"}, {"cursor": "nope"}])
        )
    elif method == "session/resume":
        params = {"cwd": cwd, "sessionId": sid, "mcpServers": []}
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
        while id_key(value) in self.used:
            self.n += 1
            value = f"{value}#{self.n}" if isinstance(value, str) else self.n + 10**12
        self.used.add(id_key(value))
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
