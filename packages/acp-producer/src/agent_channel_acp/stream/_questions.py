"""The model's questions, asked of the driving client (Q2-Q4).

Exists apart from the hub because asking is a small protocol of its own. The hub routes
:meth:`Questions.resolve` onto its execution (the core sends a child's questions there
too, naming the child). Each question goes to the current driver (as approvals do, A20),
in the best way that client offers:

- ``elicitation/create`` in form mode when it advertised the ``elicitation.form``
  capability (a choice is a string property with an ``enum``; a form, one property each);
- ``session/request_permission`` with one option per choice when it did not and the
  question has choices (its card is sent to that client first);
- otherwise a message on its stream, answered by the next prompt of a driver.

Whatever the way, ``_agent_channel/answer`` (the ``answer`` verb) answers the oldest
pending question too. When the driver leaves before answering, the next one is asked
(Q4); an observer never is. When the asking turn is interrupted the wait is cancelled
and the client told the question is void (``elicitation/complete`` naming it, the card
``failed``, or a line on the stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Coroutine
from typing import Any, Protocol, TypeVar, cast

import anyio.to_thread
from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    ElicitationFormSessionMode,
    ElicitationSchema,
    PermissionOption,
    ToolCallUpdate,
)
from agent_channel import Answer, Question
from agent_channel.abc import ExecutionRef

from ..wire._frames import PendingQuestion
from . import _mapping as m
from ._fanout import Fanout
from ._items import META, Live, Sink

log = logging.getLogger("agent_channel_acp")

T = TypeVar("T")

DECLINED = "the operator declined to answer"
DISMISSED = "the operator dismissed the question"


class Elicitor(Protocol):
    """What a client connection offers for questions (the SDK's agent-side connection)."""

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any: ...

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None: ...


def can_elicit(capabilities: ClientCapabilities | None) -> bool:
    """Whether a client advertised form elicitation in ``initialize``."""
    e = capabilities.elicitation if capabilities is not None else None
    return e is not None and e.form is not None


def schema(q: Question) -> ElicitationSchema:
    """The form a question becomes: its fields, else one ``answer`` (an enum of its choices)."""
    if q.fields:
        props = {f.name: {"type": f.kind, "title": f.title or f.name} for f in q.fields}
        required = [f.name for f in q.fields if f.required]
    else:
        answer: dict[str, object] = {"type": "string", "title": "Answer"}
        if q.choices:
            answer["enum"] = list(q.choices)
        props, required = {"answer": answer}, ["answer"]
    return ElicitationSchema.model_validate({"properties": props, "required": required})


def message(q: Question) -> str:
    who = "" if q.child_id is None else f"[{q.asker}] "
    return who + q.text


class Pending:
    """One question waiting for its answer; ``by_prompt`` once it was asked as a message."""

    __slots__ = ("by_prompt", "future", "question")

    def __init__(self, question: Question, future: asyncio.Future[Answer]) -> None:
        self.question = question
        self.future = future
        self.by_prompt = False


class Questions:
    """One execution's questions: routed on its ref, asked of its drivers (see the module)."""

    def __init__(self, ref: ExecutionRef, fanout: Fanout) -> None:
        self._fanout = fanout
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self.pending: dict[str, Pending] = {}
        """By question id, oldest first."""
        self._release = ref.route_questions(self.resolve)

    def close(self) -> None:
        self._release()

    # -- answers from outside a client's request -------------------------------------------

    def oldest(self) -> PendingQuestion | None:
        """The oldest question not answered yet, as the list shows it."""
        for p in self.pending.values():
            if not p.future.done():
                q = p.question
                return {
                    "id": q.id,
                    "text": q.text,
                    "choices": list(q.choices),
                    "childId": q.child_id,
                }
        return None

    def answer(self, text: str, *, prompt: bool = False) -> str | None:
        """Answer the oldest pending question with ``text`` (with ``prompt``: only one asked
        as a message); its id, or None when none waits."""
        for qid, p in self.pending.items():
            if not p.future.done() and (p.by_prompt or not prompt):
                p.future.set_result(Answer(text))
                return qid
        return None

    # -- asking ----------------------------------------------------------------------------

    async def resolve(self, q: Question) -> Answer:
        """The resolver the hub routes (any thread: asked on the server's loop)."""
        if threading.get_ident() == self._thread:
            return await self._resolve(q)
        return await across(self._loop, self._resolve(q))

    async def _resolve(self, q: Question) -> Answer:
        p = Pending(q, self._loop.create_future())
        self.pending[q.id] = p
        try:
            while not p.future.done():
                driver = self._fanout.driver()
                if driver is None:  # nobody can answer yet: wait for a driver to bind
                    self._fanout.drivers.clear()
                    await _first(p.future, self._fanout.drivers.wait())
                    continue
                self._fanout.flush()  # what came before reaches the driver first
                answer = await self._ask(driver, p)
                if answer is not None and not p.future.done():
                    p.future.set_result(answer)
            return p.future.result()
        finally:
            del self.pending[q.id]

    async def _ask(self, driver: Sink, p: Pending) -> Answer | None:
        """``driver``'s answer; None when it left first or the question was answered apart."""
        q = p.question
        peer: object = getattr(driver, "peer", None)
        conn = cast("Elicitor | None", getattr(peer, "conn", None))
        if conn is not None and getattr(peer, "elicitation", False) is True:
            return await self._elicit(driver, conn, p)
        if q.choices:
            return await self._permission(driver, p)
        return await self._by_prompt(driver, p)

    async def _elicit(self, driver: Sink, conn: Elicitor, p: Pending) -> Answer | None:
        q = p.question
        mode = ElicitationFormSessionMode(session_id=driver.wire_id, requested_schema=schema(q))
        meta = {f"{META}questionId": q.id, f"{META}childId": q.child_id}
        response: Any = None
        try:
            response = await _while_there(
                driver, p, conn.create_elicitation(message(q), mode, **meta)
            )
        finally:
            if response is None and driver.alive:  # cancelled or answered apart: it is void
                with contextlib.suppress(Exception):
                    await asyncio.shield(conn.complete_elicitation(q.id))
        if response is None or isinstance(response, BaseException):
            return None if response is None else Answer(None, reason=DISMISSED)
        action = getattr(response, "action", "cancel")
        if action == "decline":
            return Answer(None, reason=DECLINED)
        if action != "accept":
            return Answer(None, reason=DISMISSED)
        content: dict[str, object] = dict(getattr(response, "content", None) or {})
        if q.fields:
            return Answer("", values=content)
        return Answer(str(content.get("answer", "")))

    async def _permission(self, driver: Sink, p: Pending) -> Answer | None:
        q = p.question
        card_id = f"question-{q.id}"
        card = m.tool_start(card_id, title=f"Question: {message(q)}", kind="think", raw_input=None)
        card_json = m.as_json(card)
        card_json["status"] = "pending"
        driver.take((Live(None, card_json, keep=True),))
        options = [
            PermissionOption(option_id=f"choice-{i}", name=c, kind="allow_once")
            for i, c in enumerate(q.choices)
        ]
        options.append(PermissionOption(option_id="decline", name="Decline", kind="reject_once"))
        request = ToolCallUpdate(tool_call_id=card_id, title=message(q), status="pending")
        status = "failed"
        try:
            outcome = await _while_there(driver, p, driver.ask_permission(request, options))
            if outcome is None:
                return None
            if isinstance(outcome, AllowedOutcome) and outcome.option_id.startswith("choice-"):
                index = int(outcome.option_id.removeprefix("choice-"))
                if 0 <= index < len(q.choices):
                    status = "completed"
                    return Answer(q.choices[index])
            return Answer(None, reason=DECLINED)
        finally:
            if status == "failed" and _answered(p):  # answered apart (the verb): it did not fail
                status = "completed"
            if driver.alive:
                done = {"sessionUpdate": "tool_call_update", "toolCallId": card_id}
                driver.take((Live(None, {**done, "status": status}, keep=True),))

    async def _by_prompt(self, driver: Sink, p: Pending) -> Answer | None:
        q = p.question
        p.by_prompt = True
        note: dict[str, object] = {
            "questionId": q.id,
            "text": q.text,
            "choices": list(q.choices),
            "fields": [f.name for f in q.fields],
            "childId": q.child_id,
        }
        driver.take(
            (
                Live(None, m.chunk_json("text", f"\n[question] {message(q)}\n", f"q-{q.id}")),
                Live("_agent_channel/question", note, keep=True),
            )
        )
        try:
            await _first(p.future, _left(driver))
        except BaseException:
            if driver.alive and not p.future.done():
                void = f"\n[question withdrawn] {q.text}\n"
                driver.take((Live(None, m.chunk_json("text", void, f"q-{q.id}-void")),))
            raise
        return None  # answered by a prompt (the future) or the driver left: ask again


async def across(loop: asyncio.AbstractEventLoop, ask: Coroutine[Any, Any, T]) -> T:
    """Run ``ask`` on the server's ``loop`` from another thread and wait for its result.

    The asking execution's own loop may be trio (``attachable().add``), where
    ``asyncio.wrap_future`` fails: the wait is in a worker thread, which either library
    can do, and cancelling it (an interrupt) cancels ``ask``.
    """
    future = asyncio.run_coroutine_threadsafe(ask, loop)
    try:
        return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
    except BaseException:
        future.cancel()
        raise


def _answered(p: Pending) -> bool:
    """Whether the question was answered (not declined, dismissed or voided)."""
    f = p.future
    return f.done() and not f.cancelled() and f.exception() is None and f.result().answered


async def _left(driver: Sink) -> None:
    """Until ``driver`` leaves (its client went away or bound elsewhere)."""
    await driver.left()


async def _first(future: asyncio.Future[Answer], other: Awaitable[object]) -> None:
    """Until ``future`` is done or ``other`` is."""
    task = asyncio.ensure_future(other)
    try:
        await asyncio.wait({future, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        task.cancel()


async def _while_there(driver: Sink, p: Pending, ask: Awaitable[Any]) -> Any:
    """The client's response to ``ask``; None when it left first or the question was
    answered apart (the verb); an exception it answered with, as the value."""
    task = asyncio.ensure_future(ask)
    left = asyncio.ensure_future(_left(driver))
    try:
        await asyncio.wait({task, left, p.future}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        left.cancel()
        if not task.done():
            task.cancel()
    if not task.done() or task.cancelled():
        return None
    error = task.exception()
    if error is None:
        return task.result()
    if isinstance(error, ConnectionError) or not driver.alive:
        return None
    if isinstance(error, RequestError | ValueError):
        log.warning("session %s: the question failed (%s); dismissed", driver.wire_id, error)
        return error
    raise error
