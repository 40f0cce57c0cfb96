"""The console's connection to a ``serve`` process: an ordinary ACP client, kept alive.

A :class:`Link` finds the server in the discovery directory (``_discovery``), connects
with the SDK's client side (``_connect``'s stream and ``initialize`` helpers), binds with
``session/load`` to the chosen execution (A4), and folds everything it receives into a
:class:`~._state.State`. When the server goes away it reconnects with backoff
(:data:`BACKOFF`): to the same execution if the server still has it, else to the only one
served (a restarted server gives its executions new ids), else it asks again.

Requests the operator makes (send, cancel, cancel one tool, withdraw, answer an approval)
are methods here; each failure is a :class:`LinkError` with one line to show.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import uuid4

from acp import text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    PermissionOption,
    ToolCallUpdate,
)

from ...wire._discovery import Record, RuntimeDirError, live_records, runtime_dir
from .._connect import EXT, CtlError, ask_within, exec_id, reached
from .._sdk import connected
from ._client import Handler, Reader, dump
from ._state import Entry, State

if TYPE_CHECKING:
    from ...wire._frames import (
        CancelToolCallParams,
        EndParams,
        Execution,
        Frame,
        JsonObject,
        JsonValue,
        MessagesParams,
        SteerChildParams,
        StopChildParams,
        WithdrawParams,
    )

log = logging.getLogger(__name__)
BEHIND = 64 * 1024
"""Bytes waiting to be folded past which the link counts as behind (see :meth:`Link.behind`)."""
BACKOFF = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
"""Seconds between reconnect attempts (the last repeats)."""
ASK_SECONDS = 10.0
OBSERVE = "agent_channel.observe"
MESSAGE_ID = "agent_channel.messageId"
"""The prompt response's ``_meta`` key naming the queued message (A7)."""

T = TypeVar("T")

Target = tuple[Record, "Execution"]
Chooser = Callable[[list[Target]], Awaitable[Target | None]]
"""Asked when several executions are served and none was named: the picker."""


class LinkError(Exception):
    """A request failed; the message is the line to show."""


class Link:
    """One console's live connection (see the module docstring)."""

    def __init__(
        self,
        state: State,
        *,
        target: str | None = None,
        pid: int | None = None,
        choose: Chooser | None = None,
        on_change: Callable[[], None] | None = None,
        observe: bool = False,
    ) -> None:
        self.state = state
        self.target = target
        self.pid = pid
        """Only this serving process's executions (the demo watches the server it started)."""
        self.choose = choose
        self.on_change = on_change
        self._observe: dict[str, Any] = {OBSERVE: True} if observe else {}
        """``session/load`` ``_meta``: bind as an observer, never the driver (A4, A14). (The
        SDK's ``**kwargs`` are ``_meta``, beside its named parameters: hence ``Any``.)"""
        self.session_id: str | None = None
        self.name = f"console-{uuid4().hex[:6]}"
        state.client_name = self.name
        self._conn: ClientSideConnection | None = None
        self._reader: Reader | None = None
        self._answer: asyncio.Future[str | None] | None = None
        self.bound = asyncio.Event()
        """Set while bound to an execution (cleared while reconnecting)."""
        self.attempts = 0
        """Connections made (a test can wait for a reconnect)."""

    async def approval(
        self, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> str | None:
        """Show a permission request until :meth:`answer`; the option chosen (None: rejected)."""
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self.state.approval = {
            "toolCall": dump(tool_call),
            "options": [dump(o) for o in options],
        }
        self._answer = answer
        self.changed()
        try:
            return await answer
        finally:
            self.state.approval = None
            self._answer = None
            self.changed()

    def behind(self) -> bool:
        """More than :data:`BEHIND` bytes wait to be folded: the UI should let it read."""
        reader = self._reader
        return reader is not None and reader.backlog > BEHIND

    def changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def fold(self, line: bytes) -> bool:
        """Fold ``line`` if it is a notification of the stream; False: the SDK's to read."""
        try:
            message: object = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict):
            return False
        frame = cast("Frame", message)
        if "id" in frame:  # a request or a response
            return False
        method = frame.get("method")
        p = frame.get("params")
        if not isinstance(p, dict):
            return False
        ours = p.get("sessionId") == self.session_id
        try:
            if method == "session/update":
                update = p.get("update")
                if ours and isinstance(update, dict):
                    self.state.update(update)
                    self.changed()
                return True
            if isinstance(method, str) and method.startswith("_" + EXT):
                if ours:
                    self.state.notification(method, p)
                    self.changed()
                return True
        except Exception:  # a shape the fold does not know: skipped, the stream goes on
            log.debug("console: could not fold a %s", method, exc_info=True)
            return True
        return False

    # -- the connection's life ---------------------------------------------------------

    async def run(self) -> None:
        """Connect, bind, stream; on loss reconnect with backoff, until cancelled."""
        failures = 0
        while True:
            try:
                await self._session()
                failures = 0
                why = "the server closed the connection"
            except LinkError as e:
                why = str(e)
            except (OSError, ConnectionError) as e:
                why = f"connection lost: {e}"
            self.bound.clear()
            self._conn = None
            self._reader = None
            if self._answer is not None and not self._answer.done():
                self._answer.cancel()
            delay = BACKOFF[min(failures, len(BACKOFF) - 1)]
            failures += 1
            self.state.connection = f"disconnected: {why}; retrying in {delay:g} s"
            self.changed()
            await asyncio.sleep(delay)

    async def _session(self) -> None:
        record, execution = await self._find()
        try:
            self._reader = Reader(self)
            async with connected(
                record, Handler(self), name=self.name, reader=self._reader
            ) as server:
                conn = server.conn
                receiving = conn._conn._recv_task  # pyright: ignore[reportPrivateUsage]
                assert receiving is not None  # the SDK's connection listens unless told not
                session_id = exec_id(execution)
                self.state.reset()
                self.state.execution_id = session_id
                self.state.title = str(execution.get("title") or "")
                self.session_id = session_id
                self._conn = conn
                await self._ask(
                    conn.load_session(
                        cwd=os.getcwd(), session_id=session_id, mcp_servers=[], **self._observe
                    )
                )
                self.attempts += 1
                self.state.connection = "connected"
                self.bound.set()
                self.changed()
                # Not ``await receiving``: the SDK's loop swallows a cancel, which would turn
                # ours into "the server went away" and a reconnect.
                await asyncio.wait({receiving})
        except CtlError as e:
            raise LinkError(str(e)) from None

    async def probe(self) -> None:
        """Raise :class:`LinkError` now if no server runs or the target matches nothing
        (the console says so in one line instead of opening to retry)."""

        async def first(targets: list[Target]) -> Target:
            return targets[0]

        choose, self.choose = self.choose, first
        try:
            await self._find()
        finally:
            self.choose = choose

    async def _find(self) -> Target:
        """The execution to bind: the one watched before, the named one, the only one, or
        the picker's choice."""
        try:
            records = live_records(runtime_dir(create=False))
        except RuntimeDirError as e:
            raise LinkError(str(e)) from None
        if self.pid is not None:
            records = [r for r in records if r.pid == self.pid]
        if not records:
            raise LinkError(
                f"no agent-channel server is running (none in {runtime_dir(create=False)})"
            )
        every: list[Target] = []
        for record in records:
            with contextlib.suppress(LinkError, OSError, ConnectionError):
                every += [(record, e) for e in await list_executions(record)]
        if not every:
            raise LinkError("no executions are being served")
        if self.session_id is not None:
            same = [t for t in every if exec_id(t[1]) == self.session_id]
            if same:
                return same[0]
        if self.target is not None:
            exact = [t for t in every if exec_id(t[1]) == self.target]
            prefix = [t for t in every if exec_id(t[1]).startswith(self.target)]
            found = exact or prefix
            if len(found) == 1:
                return found[0]
            if not found and self.session_id is None:
                raise LinkError(f"no execution matches {self.target!r} (see agent-channel-acp ls)")
            if len(found) > 1:
                raise LinkError(f"{self.target!r} matches {len(found)} executions: give more of it")
        running = [t for t in every if t[1].get("drivable", True)] or every
        if len(running) == 1:
            return running[0]
        if self.choose is None:
            raise LinkError(f"{len(running)} executions are served: name one")
        chosen = await self.choose(running)
        if chosen is None:
            raise LinkError("no execution chosen")
        self.target = exec_id(chosen[1])
        return chosen

    async def _ask(self, call: Awaitable[T]) -> T:
        return await ask_within(call, LinkError)

    # -- what the operator does --------------------------------------------------------

    def _bound(self) -> tuple[ClientSideConnection, str]:
        if self._conn is None or self.session_id is None or not self.bound.is_set():
            raise LinkError("not connected")
        return self._conn, self.session_id

    async def send(self, text: str) -> str:
        """Post an operator message (A7: answered at once; read at the next boundary); the
        id the server queued it under ("" from a server that does not say)."""
        conn, session_id = self._bound()
        answer = await self._ask(conn.prompt(session_id=session_id, prompt=[text_block(text)]))
        return str((answer.field_meta or {}).get(MESSAGE_ID) or "")

    async def post(self, text: str) -> Entry:
        """Send ``text`` and show it as queued at once, linked to the server's id for it so
        its echo or a withdraw settles exactly this line; dropped again if the send fails."""
        entry = self.state.queued(text)
        self.changed()
        try:
            message_id = await self.send(text)
        except LinkError:
            self.state.drop(entry.key)
            self.changed()
            raise
        self.state.sent(entry, message_id)
        self.changed()
        return entry

    async def cancel(self) -> None:
        """``session/cancel``: interrupt the current turn."""
        conn, session_id = self._bound()
        try:
            await conn.cancel(session_id=session_id)
        except ConnectionError:
            raise LinkError("the server closed the connection") from None

    async def cancel_tool(self, tool_call_id: str) -> bool:
        conn, session_id = self._bound()
        params: CancelToolCallParams = {"sessionId": session_id, "toolCallId": tool_call_id}
        answer = await self._ask(conn.ext_method(EXT + "cancel_tool_call", dict(params)))
        return bool(answer.get("cancelled"))

    async def steer_child(self, child_id: str, text: str) -> str:
        """Steer a child as the operator (K12); its outcome: delivered, pending, undelivered."""
        conn, session_id = self._bound()
        params: SteerChildParams = {"sessionId": session_id, "childId": child_id, "text": text}
        answer = await self._ask(conn.ext_method(EXT + "steer_child", dict(params)))
        return str(answer.get("outcome", "?"))

    async def stop_child(self, child_id: str) -> bool:
        """Stop a child (K12); ``False`` when it had ended already."""
        conn, session_id = self._bound()
        params: StopChildParams = {"sessionId": session_id, "childId": child_id}
        answer = await self._ask(conn.ext_method(EXT + "stop_child", dict(params)))
        return bool(answer.get("stopped"))

    async def child_tail(self, child_id: str, tail: int = 5) -> list[JsonObject]:
        """A child's last ``tail`` messages, summarised."""
        conn, session_id = self._bound()
        params: MessagesParams = {"sessionId": session_id, "childId": child_id, "tail": tail}
        answer = await self._ask(conn.ext_method(EXT + "messages", dict(params)))
        found = cast("JsonValue", answer.get("messages"))
        rows = found if isinstance(found, list) else []
        return [m for m in rows if isinstance(m, dict)]

    async def withdraw(self, message_id: str) -> bool:
        conn, session_id = self._bound()
        self.state.withdrawing.add(message_id)
        try:
            params: WithdrawParams = {"sessionId": session_id, "messageId": message_id}
            answer = await self._ask(conn.ext_method(EXT + "withdraw", dict(params)))
        finally:
            self.state.withdrawing.discard(message_id)
        done = bool(answer.get("withdrawn"))
        if done:
            self.state.withdrawn(message_id)
        else:
            self.state.not_withdrawn(message_id)
        self.changed()
        return done

    async def end(self, reason: str | None = None) -> None:
        conn, session_id = self._bound()
        params: EndParams = {"sessionId": session_id}
        if reason:
            params["reason"] = reason
        await self._ask(conn.ext_method(EXT + "end", dict(params)))

    def answer(self, option_id: str | None) -> bool:
        """Answer the pending approval (None rejects as ``cancelled``); False if none."""
        if self._answer is None or self._answer.done():
            return False
        self._answer.set_result(option_id)
        return True


async def list_executions(record: Record) -> list[Execution]:
    """``_agent_channel/list`` (A24) on one server, on a connection of its own."""
    try:
        async with reached(record) as server:
            return server.executions
    except CtlError as e:
        raise LinkError(f"the server at {record.where()} did not list: {e}") from None
