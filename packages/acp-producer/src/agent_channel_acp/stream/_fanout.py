"""Fan-out: one execution's rendered stream handed to every client session bound to it.

Exists so that what an event costs does not grow with the number of clients: the items
of one loop step are handed over together at its end, and every session in step with
the stream gets them as one write of bytes built once for all of them. A session that
is not (it has a backlog or a hold, or owes a card) takes them item by item; one whose
wire id is not the execution's (a picked session) gets its own bytes.
It also knows who drives: approvals go to the last driver that prompted or bound (A20).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ._items import Item, Live, Sink


class Fanout:
    """The sessions bound to one execution, in bind order, and the step being gathered."""

    __slots__ = ("_changed", "_flush_soon", "_id", "_last_driver", "_step", "drivers", "sinks")

    def __init__(self, execution_id: str, changed: Callable[[], None]) -> None:
        self._id = execution_id
        self._changed = changed
        self.sinks: tuple[Sink, ...] = ()
        """In bind order; replaced, never mutated (so handing over may unbind)."""
        self._last_driver: Sink | None = None
        self.drivers = asyncio.Event()
        """Set whenever the sessions change (an approval waiting for a driver looks again)."""
        self._step: list[Item] = []  # this loop step's items, not handed over yet
        loop = asyncio.get_running_loop()
        self._flush_soon = lambda: loop.call_soon(self.flush)

    def add(self, sink: Sink, *, driver: bool) -> None:
        if sink not in self.sinks:
            self.sinks = (*self.sinks, sink)
        if driver:
            self._last_driver = sink
        self.drivers.set()
        self._changed()

    def remove(self, sink: Sink) -> None:
        if sink in self.sinks:
            self.sinks = tuple(s for s in self.sinks if s is not sink)
        if self._last_driver is sink:
            self._last_driver = None
        self.drivers.set()
        self._changed()

    def prompted(self, sink: Sink) -> None:
        self._last_driver = sink

    def driver(self) -> Sink | None:
        """Who answers approval requests: the last driver that prompted or bound, else the
        first one still there (A20)."""
        last = self._last_driver
        if last is not None and last.is_driver and last.alive:
            return last
        return next((s for s in self.sinks if s.is_driver and s.alive), None)

    def hand(self, item: Item) -> None:
        """Give ``item`` to every session at the end of this loop step."""
        if not self.sinks:
            return
        step = self._step
        step.append(item)
        if len(step) == 1:
            self._flush_soon()

    def flush(self) -> None:
        """Hand the items of this loop step over now (before a bind, an approval request or
        an answer that must come after them)."""
        step = self._step
        if not step:
            return
        self._step = []
        cards = {i.card for i in step if type(i) is Live and i.card is not None}
        shared: bytes | None = None  # the same bytes for every session in step with the stream
        for sink in self.sinks:
            if sink.in_sync(cards):
                if sink.wire_id != self._id:  # a picked session: its own session id
                    sink.write_step(sink.encode(step))
                    continue
                if shared is None:
                    shared = sink.encode(step)
                sink.write_step(shared)
            else:
                sink.take(step)
                if sink.dropped:
                    self.remove(sink)


class Direct(Fanout):
    """Each item handed over at once (stdio: one session, whose pipe is checked before each
    frame; a client reads the turn's updates while the agent goes on, instead of all at the
    end of the loop step)."""

    __slots__ = ()

    def hand(self, item: Item) -> None:
        for sink in self.sinks:
            sink.take((item,))
