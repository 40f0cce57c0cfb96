"""An operator's reach into the children (:class:`ChildControl`), and where a supervisor
is opened and found; the children registry as a checkpoint section (D6)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from functools import cache
from typing import TYPE_CHECKING, Any, cast

import anyio

from agent_channel import Announce, ChildInfo, UnknownChild, agent_channel
from agent_channel.lowlevel import (
    CHILDREN,
    RESULT_CHARS,
    add_section,
    bounded,
    is_inert,
    journal_of,
    on_restore,
    post_reserved,
)

from ._lifecycle import SUPERVISOR
from ._records import Child, Steering
from ._supervisor import MAX_DEPTH, MAX_RUNNING, MAX_TOTAL, Supervisor

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from agent_channel import AgentChannel, ChatMessage, Content, Restored

SECTION = "agent_channel.children"
"""The checkpoint section of the children registry: this package's module name."""


class ChildControl:
    """An operator's reach into an execution's children, by id (:attr:`AgentRef.children`).

    Every call goes through the supervisor that spawned the child, which carries it out
    at once and leaves a note for its own model at the next boundary. Covers the whole
    tree below the execution; with no supervisor open there are no children. Safe from
    any thread; a producer never gets a child's ref.
    """

    __slots__ = ("_channel",)

    def __init__(self, channel: AgentChannel) -> None:
        self._channel = channel

    def list(self) -> tuple[ChildInfo, ...]:
        """Every child below the execution, each followed by its own children."""
        sup = SUPERVISOR.get(self._channel, None)
        return tuple(sup._tree()) if sup is not None else ()  # pyright: ignore[reportPrivateUsage]

    def info(self, child_id: str) -> ChildInfo:
        """One child's registry row."""
        return self._find(child_id)[0].info(child_id)

    def result(self, child_id: str) -> str:
        """A child's whole result (``""`` until it ends)."""
        return self._find(child_id)[0].result(child_id)

    def messages(self, child_id: str, tail: int | None = None) -> tuple[ChatMessage, ...]:
        """A child's conversation (its last ``tail`` messages)."""
        return self._find(child_id)[0].messages(child_id, tail)

    def steer(self, child_id: str, content: str | tuple[Content, ...]) -> Steering:
        """Steer a child as the operator (``source="operator"``); its parent's model is told."""
        owner, child = self._find(child_id)
        steering = owner.steer(child_id, content, source="operator")
        if steering.outcome != "undelivered":
            text = bounded(steering.steer.text, RESULT_CHARS)[0]
            owner._note(  # pyright: ignore[reportPrivateUsage]
                f"The operator told child {child.name} (id {child_id}): {text}"
            )
        return steering

    def stop(self, child_id: str, reason: str = "stopped by the operator") -> bool:
        """Kill a child as the operator; its parent's model is told. ``False`` if it had ended."""
        owner, child = self._find(child_id)
        stopped = owner.kill(child_id, reason)
        if stopped:
            owner._note(  # pyright: ignore[reportPrivateUsage]
                f"The operator stopped child {child.name} (id {child_id})."
            )
        return stopped

    def _find(self, child_id: str) -> tuple[Supervisor, Child]:
        sup = SUPERVISOR.get(self._channel, None)
        found = sup._find(child_id) if sup is not None else None  # pyright: ignore[reportPrivateUsage]
        found = cast("tuple[Supervisor, Child] | None", found)  # every one below is a Supervisor
        if found is None:
            raise UnknownChild(f"no child with id {child_id!r} in this execution")
        return found


def agent_supervisor() -> Supervisor | None:
    """The current execution's supervisor: the one :func:`open_supervisor` opened, or a
    child's own. ``None`` when the execution has none (or outside any execution)."""
    sup = SUPERVISOR.get(agent_channel(), None)
    return sup  # pyright: ignore[reportReturnType] (only Supervisors are set)


@asynccontextmanager
async def open_supervisor(
    *, max_running: int = MAX_RUNNING, max_total: int = MAX_TOTAL, max_depth: int = MAX_DEPTH
) -> AsyncGenerator[Supervisor, None]:
    """Give the current execution children for the block: ``async with open_supervisor():``.

    Open it inside ``open_channel()``, around the execution's body. Children run in a task
    group it owns, so they outlive any one turn; leaving the block ends every child still
    running (status ``parent_ended``) and waits for them. Caps: ``max_running`` children
    alive at once, ``max_total`` in all, and children may nest ``max_depth`` levels below
    the top; each child's own supervisor has the same caps.
    """
    for name, value in (("max_running", max_running), ("max_total", max_total)):
        if type(value) is not int or value < 1:
            raise ValueError(f"{name} must be an int of at least 1, not {value!r}")
    if type(max_depth) is not int or max_depth < 1:
        raise ValueError(f"max_depth must be an int of at least 1, not {max_depth!r}")
    channel = agent_channel()
    if is_inert(channel):
        raise RuntimeError("open_supervisor() needs an execution: open it inside open_channel()")
    if SUPERVISOR.get(channel, None) is not None:
        raise RuntimeError("this execution already has a supervisor")
    sup = Supervisor(
        channel,
        depth=0,
        owner=None,
        max_running=max_running,
        max_total=max_total,
        max_depth=max_depth,
    )
    SUPERVISOR.set(channel, sup)
    CHILDREN.set(channel, ChildControl(channel))
    unsection = add_section(channel, SECTION, lambda: _rows_json(sup.children()))
    try:
        error: BaseException | None = None
        async with anyio.create_task_group() as tg:  # every descendant's task runs in it
            sup._tg = tg  # pyright: ignore[reportPrivateUsage]
            try:
                yield sup
            except BaseException as e:  # re-raised as it is, not wrapped in a group
                error = e
            finally:
                sup._end_all()  # pyright: ignore[reportPrivateUsage]
        if error is not None:
            raise error
    finally:
        unsection()
        CHILDREN.delete(channel)
        SUPERVISOR.delete(channel)


@cache
def _rows() -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(list[ChildInfo])


def _rows_json(rows: tuple[ChildInfo, ...]) -> str:
    return _rows().dump_json(list(rows)).decode()


def _announce_lost(channel: AgentChannel, restored: Restored, text: str) -> None:
    """D6: children running when the process died cannot go on; their parent hears so.

    A child whose end was announced after the last checkpoint keeps that announcement,
    but "its parent ended" (what a server shutting down tells) becomes "lost". The
    announcements are written (as any post is) before the registry is cleared, so a
    second crash in between announces a child twice rather than never.
    """
    rows: list[ChildInfo] = _rows().validate_json(text) if text else []
    running = {c.id: c for c in rows if c.status != "ended"}
    if not running:
        return
    for item in restored.pending:
        if isinstance(item, Announce) and item.child_id in running:
            if item.status == "parent_ended":
                channel.withdraw(item.id)
            else:
                del running[item.child_id]
    for c in running.values():
        lost = Announce(child_id=c.id, name=c.name, status="lost", reason="its server restarted")
        post_reserved(channel, lost)
    journal = journal_of(channel)
    assert journal is not None  # restoring
    journal.commit((), (), None, start=len(restored.messages), sections={SECTION: "[]"})


on_restore(SECTION, _announce_lost)
