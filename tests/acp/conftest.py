"""Fixtures for the ACP suite: a recording client and agent subprocesses.

ACP I/O here is asyncio-only: the ACP SDK is bound to asyncio, so these tests
run on anyio's asyncio backend only (the core and react suites also run trio).
Subprocesses are shared per module (tests use separate sessions), started with
an explicit environment and stderr inherited (the SDK's spawn helper would
otherwise pipe stderr and never read it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    RequestPermissionResponse,
)
from agent_channel_acp import AcpServer, AgentFactory, serve

HERE = Path(__file__).resolve().parent
GUARD = 30.0
"""Seconds before a hung wait fails the test: a hang guard, never a timing assertion."""

Update = dict[str, Any]
PermissionPolicy = Callable[[dict[str, Any]], Awaitable[RequestPermissionResponse]]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """What a durable test passes as ``--store``: a SQLite file, or a new database on a real
    PostgreSQL (the root conftest's ``postgres_url``), opened through the same ``--store``."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    return str(request.getfixturevalue("postgres_url"))


def agent_env(**extra: str) -> dict[str, str]:
    env = {k: v for k in ("PATH", "HOME", "LANG", "TMPDIR") if (v := os.environ.get(k))}
    env["PYTHONPATH"] = str(HERE)
    env["AGENT_CHANNEL_ACP_LOG"] = "WARNING"
    env.update(extra)
    return env


STDIO_AGENT = (sys.executable, "-m", "agent_channel_acp", "stdio", "--agent", "agents:react_agent")
"""The command line of the stdio test agent (the react agent of ``agents.py``)."""


async def raw_agent(env: dict[str, str] | None = None, **kwargs: Any) -> asyncio.subprocess.Process:
    """The stdio test agent on plain pipes, for tests that write and read frames themselves."""
    return await asyncio.create_subprocess_exec(
        *STDIO_AGENT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=agent_env() if env is None else env,
        **kwargs,
    )


@dataclass
class RawPipe:
    """Frames written and read by hand on a :func:`raw_agent`'s pipes."""

    proc: asyncio.subprocess.Process
    frames: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """Every frame read so far, in wire order."""

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", **msg}) + "\n").encode())

    async def read(self) -> dict[str, Any]:
        assert self.proc.stdout
        frame = json.loads(await self.proc.stdout.readline())
        self.frames.append(frame)
        return frame

    async def reply(self, msg_id: int) -> dict[str, Any]:
        """Read up to the response to ``msg_id``."""
        while (frame := await self.read()).get("id") != msg_id:
            pass
        return frame


NOBODY = 65534
"""The uid the other-uid tests become (``nobody``)."""


def as_other_uid(path: str, payload: bytes = b"") -> str:
    """Fork a child that becomes uid 65534 (:data:`NOBODY`), connects to the unix socket
    ``path``, sends ``payload`` and reads to the end; what happened, as text (``ok <what
    it read>`` or ``error <errno name>``)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no asyncio, no locks; report and leave
        os.close(r)
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(GUARD)
            s.connect(path)
            with contextlib.suppress(OSError):  # closed on us already: the read says why
                s.sendall(payload)
            data = b""
            try:
                while chunk := s.recv(65536):
                    data += chunk
            except ConnectionResetError:
                pass
            os.write(w, b"ok " + data)
        except OSError as e:
            os.write(w, f"error {e.errno and os.strerror(e.errno)}".encode())
        except BaseException as e:
            os.write(w, f"error {e!r}".encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return data.decode(errors="replace")


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory another uid (65534) can pass through: pytest's tmp dirs are root-only."""
    path = Path(tempfile.mkdtemp(prefix="acp-open-", dir="/tmp"))
    path.chmod(0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def allow(request: dict[str, Any]) -> RequestPermissionResponse:
    return RequestPermissionResponse(
        outcome=AllowedOutcome(outcome="selected", option_id="allow_once")
    )


async def deny(request: dict[str, Any]) -> RequestPermissionResponse:
    return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


@dataclass
class Recorder:
    """The client side: records every update per session and the raw inbound wire."""

    updates: dict[str, list[Update]] = field(default_factory=lambda: defaultdict(list))
    wire: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    sent: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    permissions: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    policy: PermissionPolicy = allow
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates[session_id].append(
            update.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        self._poke()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        request = {
            "sessionId": session_id,
            "toolCall": tool_call.model_dump(mode="json", by_alias=True, exclude_none=True),
            "options": [o.option_id for o in options],
        }
        self.permissions.append(request)
        self._poke()
        return await self.policy(request)

    def observe(self, event: StreamEvent) -> None:
        if event.direction is StreamDirection.INCOMING:
            self.wire.append(event.message)
        else:
            self.sent.append(event.message)  # noted once written to the agent's stdin
        self._poke()

    @contextmanager
    def answering(self, policy: PermissionPolicy) -> Iterator[None]:
        """Answer permission requests with ``policy`` for the block, then allow again."""
        self.policy = policy
        try:
            yield
        finally:
            self.policy = allow

    def asked(self, session_id: str) -> bool:
        """Whether the agent asked permission for ``session_id`` yet."""
        return any(p["sessionId"] == session_id for p in self.permissions)

    def _poke(self) -> None:
        self._changed.set()

    async def wait_until(self, predicate: Callable[[], object]) -> None:
        """Wait (event-driven) until ``predicate()`` holds; the guard only catches hangs."""
        with anyio.fail_after(GUARD):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    def kinds(self, session_id: str) -> list[str]:
        return [u["sessionUpdate"] for u in self.updates[session_id]]


@dataclass
class Agent:
    conn: ClientSideConnection
    proc: asyncio.subprocess.Process
    rec: Recorder

    async def session(self) -> str:
        return (await self.conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id

    async def request(self, method: str, params: Any) -> Any:
        """A raw request through the SDK's connection (for methods the typed API lacks)."""
        return await self.conn._conn.send_request(method, params)  # pyright: ignore[reportPrivateUsage]

    async def notify(self, method: str, params: Any) -> None:
        await self.conn._conn.send_notification(method, params)  # pyright: ignore[reportPrivateUsage]


@asynccontextmanager
async def spawn(*args: str, **env: str) -> AsyncIterator[Agent]:
    rec = Recorder()
    async with spawn_agent_process(
        rec,
        sys.executable,
        "-m",
        "agent_channel_acp",
        "stdio",
        *args,
        env=agent_env(**env),
        transport_kwargs={"stderr": None},
        observers=[rec.observe],
    ) as (conn, proc):
        with anyio.fail_after(GUARD):
            await conn.initialize(protocol_version=1)
        yield Agent(conn, proc, rec)


@pytest.fixture(scope="module")
async def agent(anyio_backend: str) -> AsyncIterator[Agent]:
    """One producer subprocess serving the react test agent, shared by a module."""
    async with spawn("--agent", "agents:react_agent") as a:
        yield a


@pytest.fixture(scope="module")
async def approving_agent(anyio_backend: str) -> AsyncIterator[Agent]:
    """The same agent behind ``--approve``: every tool call asks the client first."""
    async with spawn("--agent", "agents:react_agent", "--approve") as a:
        yield a


@dataclass
class Local:
    """An SDK client and an in-process server on a socket pair (same transport code as stdio)."""

    conn: ClientSideConnection
    rec: Recorder
    served: asyncio.Task[None]
    client_writer: asyncio.StreamWriter

    async def session(self) -> str:
        return (await self.conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id

    async def request(self, method: str, params: Any) -> Any:
        return await self.conn._conn.send_request(method, params)  # pyright: ignore[reportPrivateUsage]

    def stop_reading(self) -> None:
        """The client stops reading its socket (a stalled client); the server keeps writing."""
        self.client_writer.transport.pause_reading()  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]

    def read_again(self) -> None:
        self.client_writer.transport.resume_reading()  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]

    async def posted(self) -> None:
        """Return once every request sent so far has been handled by the server up to its first
        wait: requests are started in wire order, so a round trip after them proves it."""
        with anyio.fail_after(GUARD):
            await self.conn.initialize(protocol_version=1)


@asynccontextmanager
async def in_process(
    factory: AgentFactory, *, buffer: int | None = None, **options: Any
) -> AsyncIterator[Local]:
    """Serve ``AcpServer(factory, **options)`` in this process; ``buffer`` shrinks the kernel's
    socket buffers so a client that stops reading pushes back after a few KiB."""
    a, b = socket.socketpair()
    if buffer is not None:
        for s in (a, b):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
    server_reader, server_writer = await asyncio.open_connection(sock=a)
    client_reader, client_writer = await asyncio.open_connection(sock=b, limit=1 << 24)
    server = AcpServer(factory, **options)
    served = asyncio.ensure_future(serve(server, server_reader, server_writer))
    rec = Recorder()
    conn = ClientSideConnection(rec, client_writer, client_reader, observers=[rec.observe])
    try:
        with anyio.fail_after(GUARD):
            await conn.initialize(protocol_version=1)
        yield Local(conn, rec, served, client_writer)
    finally:
        await conn.close()
        client_writer.close()  # EOF for the server
        with anyio.fail_after(GUARD):
            await served


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A rule suite runs each transport with the ReAct loop and each adapter over the unix
    socket: what a transport carries does not depend on the agent behind it, and running
    every adapter over each transport would multiply CI's time for nothing it could show."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        crossed = params.get("transport") == "ws" and params.get("consumer", "react") != "react"
        (dropped if crossed else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(params=["unix", "ws"])
def transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """The attach suites' transport: a module that ``pytest.mark.usefixtures("transport")``
    runs each test twice, its clients over the unix socket and over WebSocket."""
    import attach_harness
    import serving

    kind: str = request.param
    attach_harness.TRANSPORT = kind
    serving.TRANSPORT = kind
    try:
        yield kind
    finally:
        attach_harness.TRANSPORT = "unix"
        serving.TRANSPORT = "unix"


CONSUMERS = {
    "react": None,
    "pydantic-ai": "pai_agents:agent",
    "openai-agents": "oai_agents:agent",
    "langgraph": "lg_agents:graph",
}
"""The consumers a rule suite runs against: the ReAct loop (the suite's own agents), a plain
``pydantic_ai.Agent``, a plain ``agents.Agent`` (the OpenAI Agents SDK's) and a compiled
LangGraph graph (its prebuilt ReAct agent) served through their adapters (``pai_agents.py``,
``oai_agents.py``, ``lg_agents.py``: the same keywords)."""


def chosen(names: Iterable[str]) -> list[str]:
    """The consumers a run tests: ``AGENT_CHANNEL_TEST_CONSUMERS`` (comma-separated) when set,
    else all. CI's other Pythons run the ReAct loop's alone: the adapters' version-specific
    code is their frameworks', which python3's run covers."""
    wanted = os.environ.get("AGENT_CHANNEL_TEST_CONSUMERS")
    names = list(names)
    if not wanted:
        return names
    keep = {w.strip() for w in wanted.split(",")}
    return [n for n in names if n in keep]


@pytest.fixture(params=chosen(CONSUMERS))
def consumer(request: pytest.FixtureRequest) -> Iterator[str]:
    """The attach suites' consumer: a module that ``pytest.mark.usefixtures("consumer")`` runs
    each test against each agent of :data:`CONSUMERS` (``attach_harness.serving``'s default)."""
    import attach_harness

    kind: str = request.param
    attach_harness.AGENT = CONSUMERS[kind]
    try:
        yield kind
    finally:
        attach_harness.AGENT = None


# The host fixtures (a test's agent in ``serve`` and on Ray): last, as ``hosts`` reads the
# names above.
from hosts import agent_host, cluster  # noqa: E402, F401
