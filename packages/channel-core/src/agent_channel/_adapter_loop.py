"""The loop a framework adapter runs: what serving any framework's agent shares.

A framework runs its own turns; the adapter decides when a prompt starts, what an interrupt
leaves behind and what a restart takes up. That part is the same for every framework (the
ReAct loop's discipline): drain at the top, park on ``end_turn`` when live, run the prompt
inside the channel's scope, and after an interrupt settle the framework's history, repair
both conversations (the framework's and the one operators read) and go on with the redirect
or wait for one. :class:`AdapterLoop` is that loop; an adapter supplies the prompt and its
framework's history format (how to repair, dump and load it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import ClassVar, Generic, TypeVar

import anyio.lowlevel

from ._channel import AgentChannel
from ._consume import Folded, fold, repair, wait_for_message
from ._conversation import Conversation
from ._errors import AgentInterrupted
from ._events import StopReason
from ._items import CancelReason
from ._messages import ChatMessageUser

H = TypeVar("H")
"""One item of the framework's own history (its message type)."""

CANCELLED_TEXT: dict[CancelReason, str] = {
    "user_cancel": "Tool call cancelled by the operator.",
    "limit": "Tool call cancelled by a limit.",
    "system": "Tool call cancelled by the system.",
}
"""The result an interrupt gives a call it stopped, by the interrupt's reason."""

RESTARTED_TEXT = "Tool call interrupted by a restart."
"""A call in flight when the process died: not run again (it may or may not have taken
effect), answered with this instead."""


class AdapterLoop(ABC, Generic[H]):
    """One execution of a framework's agent: the history its framework reads, the
    conversation operators read, and the loop between them (see the module docstring).

    A subclass names its checkpoint key (:attr:`state_key`) and implements :meth:`prompt`,
    :meth:`settle`, :meth:`repair_history`, :meth:`has_unanswered`, :meth:`resumes`,
    :meth:`dump` and :meth:`load`; :meth:`waiting`, :meth:`came_with_interrupt` and
    :meth:`adopted` are hooks with defaults.
    """

    state_key: ClassVar[str]
    """The checkpoint state's key for the history (its value is the format's version, 1)."""

    def __init__(self, ch: AgentChannel) -> None:
        self.ch = ch
        self.conv = Conversation(ch)
        self.history: list[H] = []
        """What the framework's next run reads."""
        self.users: list[ChatMessageUser] = []
        """Operators' messages taken, not yet in the history."""
        self.output: object = None
        """What the execution returns when it ends."""

    async def run(self) -> object:
        """The execution's body: prompts until it ends (not live) or is cancelled."""
        ch = self.ch
        resume = self.restore() if ch.durable else False
        while True:
            if not resume:
                folded = fold(ch.drain())
                if folded.cancel is not None:  # an interrupt between prompts: honoured here
                    await self.stop(folded, folded.cancel.reason)
                    continue
                self.take(folded)
                if not self.waiting():
                    if not ch.is_live:
                        ch.stop_reason = "end_turn"
                        self.checkpoint()
                        return self.output
                    self.checkpoint("end_turn")
                    self.take(await wait_for_message(ch, "end_turn"))
                    continue
            try:
                with ch.scope():
                    await self.prompt(resume)
            except AgentInterrupted as e:
                self.settle()
                # Let producers act on the cancel (answer their client) before the repair.
                await anyio.lowlevel.checkpoint()
                await self.stop(fold(ch.drain()), e.cancel.reason)
            resume = False

    # -- what every adapter does alike ---------------------------------------------------

    def waiting(self) -> bool:
        """Whether a prompt is due: operators' messages taken and not yet run."""
        return bool(self.users)

    def take(self, folded: Folded) -> None:
        """Messages drained: shown now (as the ReAct loop does), given to the next run."""
        self.users.extend(folded.messages)
        self.conv.extend(folded.messages)

    async def stop(self, folded: Folded, reason: CancelReason) -> None:
        """After an interrupt: repair both conversations, then the redirect or a wait."""
        self.repair(CANCELLED_TEXT[reason])
        redirect = folded.messages or folded.other or self.came_with_interrupt()
        if not redirect and self.ch.is_live:
            self.checkpoint("cancelled")  # a restart waits again
            folded = await wait_for_message(self.ch, "cancelled")
        self.take(folded)

    def came_with_interrupt(self) -> bool:
        """Whether the run already took a redirect that came with the interrupt."""
        return False

    def repair(self, text: str) -> None:
        """Give each call left open a result reading ``text``: in the framework's history,
        and in the conversation operators read (the same text for the calls it fixed)."""
        fixed = self.repair_history(text)
        for m in repair(self.conv.messages, "user_cancel"):
            if m.tool_call_id in fixed:
                m = m.model_copy(update={"content": text, "error": text})
            self.conv.append(m)

    def checkpoint(self, parked: StopReason | None = None, items: list[H] | None = None) -> None:
        """Write the history (``items`` instead, when given) and where the loop parks."""
        if not self.ch.durable:
            return
        history = self.dump(self.history if items is None else items)
        self.ch.checkpoint({self.state_key: 1, "history": history, "parked": parked})

    def restore(self) -> bool:
        """Take up what a crash left: the history and the shown conversation. Calls that
        were in flight get :data:`RESTARTED_TEXT`. Returns whether a run goes on at once
        (the history ends with something the model has not answered)."""
        restored = self.ch.restored
        state = restored.state if restored is not None else None
        if restored is None or not state or state.get(self.state_key) != 1:
            return False
        self.conv.messages[:] = restored.messages
        self.history = self.load(state.get("history") or [])
        self.adopted()
        if self.has_unanswered():
            self.repair(RESTARTED_TEXT)
        if restored.wait or state.get("parked") is not None:
            return False  # parks at the loop's top (live) until a message comes
        return self.resumes()

    def adopted(self) -> None:
        """The restored history was just adopted: a hook for what the adapter derives."""

    # -- the framework's part ------------------------------------------------------------

    @abstractmethod
    async def prompt(self, resume: bool) -> None:
        """Run the framework on the history and the taken messages, inside the scope
        (``resume``: a restored history's own next step, nothing new taken)."""

    @abstractmethod
    def settle(self) -> None:
        """After an interrupt: the history as the stopped run left it."""

    @abstractmethod
    def repair_history(self, text: str) -> Collection[str]:
        """Give each call the history left open a result reading ``text``; their ids."""

    @abstractmethod
    def has_unanswered(self) -> bool:
        """Whether the history's last model step has a call without a result."""

    @abstractmethod
    def resumes(self) -> bool:
        """Whether the history ends with something the model has not answered."""

    @abstractmethod
    def dump(self, history: list[H]) -> object:
        """The history as JSON data for a checkpoint."""

    @abstractmethod
    def load(self, data: object) -> list[H]:
        """The history a checkpoint's JSON data holds."""
