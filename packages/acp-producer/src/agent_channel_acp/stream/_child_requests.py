"""The operator's reads and controls of one child, through the top-level ref (K12).

A producer never holds a child's ref: each request goes to the execution's supervisor via
``ref.children``, and the answer waits (up to :data:`STEER_WAIT`) for what the child does.
"""

from __future__ import annotations

import asyncio
import contextlib

from agent_channel import ChatMessage, UnknownChild
from agent_channel.abc import ExecutionRef

from ..wire import _frames as f
from ..wire._errors import WireError
from ._children import ChildCards

STEER_WAIT = 5.0
"""Seconds an operator's steer waits for the child to read it before the answer says
``pending`` (a child busy in a long tool reads it at its next boundary; its card says when)."""


class ChildRequests:
    """One execution's child requests (``_agent_channel/steer_child``, ``stop_child``, reads)."""

    __slots__ = ("_cards", "_id", "_ref")

    def __init__(self, execution_id: str, ref: ExecutionRef, cards: ChildCards) -> None:
        self._id = execution_id
        self._ref = ref
        self._cards = cards

    def messages(self, child_id: str, tail: int | None) -> tuple[ChatMessage, ...]:
        """A child's conversation (its tail), read through the top-level ref (K12)."""
        try:
            return self._ref.children.messages(child_id, tail)
        except UnknownChild:
            if self._cards.known(child_id) is not None:
                raise WireError.child_gone(self._id, child_id) from None
            raise WireError.unknown_child(self._id, child_id) from None

    async def steer(self, child_id: str, text: str) -> f.SteerChildResult:
        """Steer a child as the operator (K12); the answer waits (up to :data:`STEER_WAIT`)
        for the child to read it or end."""
        try:
            steering = self._ref.children.steer(child_id, text)
        except UnknownChild:
            if self._cards.known(child_id) is None:
                raise WireError.unknown_child(self._id, child_id) from None
            return {"steerId": "", "outcome": "undelivered", "reason": "the execution ended"}
        outcome, seq, reason = steering.outcome, steering.seq, steering.reason
        if outcome == "pending":
            future = self._cards.expect(steering.id)
            if steering.outcome == "pending":  # else it resolved before the future was there
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(STEER_WAIT):
                        await asyncio.shield(future)
            if future.done() and not future.cancelled():  # the event: a receipt from another
                event = future.result()  # process (a Ray ref's) is not updated in place
                outcome, seq, reason = event.outcome, event.seq, event.reason
            else:
                outcome, seq, reason = steering.outcome, steering.seq, steering.reason
            future.cancel()
        answer: f.SteerChildResult = {"steerId": steering.id, "outcome": outcome}  # pyright: ignore[reportAssignmentType] (an outcome)
        if seq is not None:
            answer["seq"] = seq
        if reason is not None:
            answer["reason"] = reason
        return answer

    async def stop(self, child_id: str, reason: str | None) -> f.StopChildResult:
        """Stop a child as the operator (K12); the answer waits (up to :data:`STEER_WAIT`)
        for it to have ended. ``stopped`` false when it had ended (or was ending) already."""
        children = self._ref.children
        ended = self._cards.expect_end(child_id)
        try:
            stopped = children.stop(child_id, reason) if reason else children.stop(child_id)
            if stopped and children.info(child_id).status != "ended":
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(STEER_WAIT):
                        await asyncio.shield(ended)
            status = children.info(child_id).status
        except UnknownChild:
            row = self._cards.known(child_id)
            if row is None:
                raise WireError.unknown_child(self._id, child_id) from None
            return {"stopped": False, "status": row.status}
        finally:
            ended.cancel()
        return {"stopped": stopped, "status": status}
