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
from ._client import QUESTION_ID, Handler, Reader, dump
from ._state import Entry, Form, State, form_of

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
ASKING = ("session/request_permission", "elicitation/create")
"""The server's requests an operator answers: their ids are kept while they wait."""

FormAnswer = tuple[str, dict[str, object] | None]
"""How a question was answered: ``accept`` with the values, ``decline`` or ``cancel``."""

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
        forms: bool = False,
    ) -> None:
        self.state = state
        self.forms = forms
        """Advertise form elicitation: the model's questions come as forms this console
        fills (:meth:`form`); without it a question with choices is a permission request."""
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
        self._asked: asyncio.Future[FormAnswer] | None = None
        self._requests: dict[object, str] = {}
        """The JSON-RPC id of each waiting request the operator answers, to what it asks
        (``tool:<toolCallId>`` or ``question:<questionId>``): a ``$/cancel_request`` names
        the id when the server stops waiting (answered elsewhere, a cancel, a stop)."""
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
            self._forget(f"tool:{tool_call.tool_call_id}")
            self.changed()

    async def form(self, question_id: str, text: str, schema: JsonObject) -> FormAnswer:
        """Show the model's question until the operator fills it (:meth:`fill`), declines
        it (:meth:`decline`), or the server voids it; how it was answered."""
        asked: asyncio.Future[FormAnswer] = asyncio.get_running_loop().create_future()
        form = form_of(question_id, text, schema)
        self.state.question = form
        self.state.note(f"the agent asks: {text}")
        self._asked = asked
        self.changed()
        try:
            return await asked
        finally:
            if self.state.question is form:
                self.state.question = None
            if self._asked is asked:
                self._asked = None
            self._forget(f"question:{question_id}")
            self.changed()

    def fill(self, text: str) -> bool:
        """The input line's ``text`` for the waiting question's current field; the question
        is answered once its last field is filled. False: no question waits."""
        form, asked = self.state.question, self._asked
        if form is None or asked is None or asked.done():
            return False
        if form.fill(text) and form.current is None:
            content = form.content()
            self.state.note("you answered: " + _said(form, content))
            asked.set_result(("accept", content))
        self.changed()
        return True

    def decline(self) -> bool:
        """Decline the waiting question (the model reads that the operator would not say)."""
        form, asked = self.state.question, self._asked
        if form is None or asked is None or asked.done():
            return False
        self.state.note(f"you declined to answer: {form.text}")
        asked.set_result(("decline", None))
        self.changed()
        return True

    def _settled(self, what: str) -> None:
        """The server stopped waiting for what ``what`` asks (answered by another client, an
        interrupt, a stop): its box goes, a note says so."""
        kind, _, key = what.partition(":")
        form, asked = self.state.question, self._asked
        if kind == "question" and form is not None and form.question_id == key:
            if asked is not None and not asked.done():
                self.state.note(f"no longer asked (answered elsewhere, or void): {form.text}")
                asked.set_result(("cancel", None))
            return
        approval, answer = self.state.approval, self._answer
        if approval is None or answer is None or answer.done():
            return
        if kind == "tool" and approval["toolCall"].get("toolCallId") == key:
            title = approval["toolCall"].get("title") or key
            self.state.note(f"no longer asked (answered elsewhere, or void): {title}")
            answer.set_result(None)

    def _request(self, frame: JsonObject) -> None:
        """Keep the id of a request the operator answers (see :attr:`_requests`)."""
        p = frame.get("params")
        params = p if isinstance(p, dict) else {}
        if frame.get("method") == ASKING[0]:
            call = params.get("toolCall")
            what = f"tool:{call.get('toolCallId') if isinstance(call, dict) else ''}"
        else:
            meta = params.get("_meta")
            what = f"question:{meta.get(QUESTION_ID) if isinstance(meta, dict) else ''}"
        self._requests[frame.get("id")] = what

    def _forget(self, what: str) -> None:
        """The request asking ``what`` is answered: its id is no longer kept."""
        for request_id in [i for i, w in self._requests.items() if w == what]:
            del self._requests[request_id]

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
        method = frame.get("method")
        if "id" in frame:  # a request or a response: the SDK's
            if method in ASKING:
                self._request(cast("JsonObject", message))
            return False
        p = frame.get("params")
        if not isinstance(p, dict):
            return False
        if method == "$/cancel_request":  # the server stopped waiting for a request
            what = self._requests.pop(p.get("requestId"), None)
            if what is not None:
                self._settled(what)
            return True
        if method == "elicitation/complete":  # a question voided, or answered elsewhere
            self._settled(f"question:{p.get('elicitationId')}")
            return True
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
            if self._asked is not None and not self._asked.done():
                self._asked.set_result(("cancel", None))  # the server asks the next driver
            self._requests.clear()
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
                record, Handler(self), name=self.name, reader=self._reader, forms=self.forms
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


def _said(form: Form, content: dict[str, object]) -> str:
    """An answer as the conversation notes it: the value, or each field's."""
    if len(form.fields) == 1 and form.fields[0].name in content:
        return str(content[form.fields[0].name])
    return "; ".join(f"{k}: {v}" for k, v in content.items()) or "(nothing)"


async def list_executions(record: Record) -> list[Execution]:
    """``_agent_channel/list`` (A24) on one server, on a connection of its own."""
    try:
        async with reached(record) as server:
            return server.executions
    except CtlError as e:
        raise LinkError(f"the server at {record.where()} did not list: {e}") from None
