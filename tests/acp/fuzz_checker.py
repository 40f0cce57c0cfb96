"""What the wire fuzzer checks: the responses owed for the bytes sent, and what came back.

``Owed`` models the server's framing on the exact bytes sent (split on newlines, strip,
parse) to know which lines are requests with a usable id (a string or an integer):
each such request gets exactly one well-formed response, and lines that are not JSON
objects each get an error with a null id. ``Wire`` is one connection: it writes a batch,
reads and sorts every frame that comes back, and fails on anything malformed, on an id
answered twice, and (after a hang guard, never a timing assertion) on an id never
answered. ``fds`` counts a process's open file descriptors in ``/proc/<pid>/fd``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conftest import GUARD
from fuzz_frames import JSON, MAX_FRAME, Pool, id_key

SETTLE = GUARD * 3
"""Hang guard for a whole batch's answers on a loaded machine."""


_OVERSIZE_HEAD = re.compile(rb'\{"jsonrpc": "2.0", "id": (\d+), "method": "session/prompt",')


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
            self.by_id[id_key(msg_id)] += 1
            self.methods[id_key(msg_id)] = message.get("method")
            self.lines[id_key(msg_id)] = line[:300]


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
            key = id_key(frame["id"])
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
        try:
            async with asyncio.timeout(SETTLE):  # a server that stops reading fails, not hangs
                for end in [*cut_at, len(stream)]:
                    if end > start:
                        self.writer.write(stream[start:end])
                        await self.writer.drain()
                        start = end
        except TimeoutError:
            raise AssertionError(
                f"the server stopped reading: {len(stream) - start} bytes of the batch not "
                f"written after {SETTLE:g} s; {self.owing()}"
            ) from None

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
        assert not missing, f"after {guard:g} s, {self.owing(keys)}"

    def owing(self, keys: Callable[[str], bool] = lambda k: True) -> str:
        """What is still owed, for a failure: each request never answered (its method and
        its line, the first ten), the null-id errors owed, and what did come back."""
        missing = self.missing(keys)
        lines = [
            f"  id {k} ({self.owed.methods.get(k)}): {self.owed.lines[k]!r}"
            for k in sorted(missing)[:10]
        ]
        return "\n".join(
            [
                f"{len(missing)} requests never answered, "
                f"{max(0, self.owed.null_errors - self.null_errors)} null-id errors owed "
                f"({sum(self.got.values())} answers and {self.notifications} notifications "
                "came back; reader "
                f"{'ended' if self.reading is not None and self.reading.done() else 'open'}):",
                *lines,
            ]
        )

    async def call(self, method: str, params: Any, msg_id: str, guard: float = SETTLE) -> JSON:
        """A clean request on the same wire, awaited: its response."""
        frame = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
        await self.send([json.dumps(frame).encode() + b"\n"], [])
        key = id_key(msg_id)
        await self.settled(lambda k: k == key, guard)
        return self.results[key]

    def check(self) -> None:
        """Everything read so far is well-formed and no id was answered twice."""
        assert not self.malformed, self.malformed[:5]
        assert not self.extra(), f"answered more than once: {self.extra()}"
        assert self.null_errors <= self.owed.null_errors, (
            f"{self.null_errors} responses with a null id, {self.owed.null_errors} owed"
        )


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))
