"""The reference store: :class:`~agent_channel.Store` and :class:`~agent_channel.Journal`
in memory, in as few lines as the protocols allow.

What a test uses instead of a database, and what another store is read against (as
httpx's mock transport is for its transports). It keeps what it is given as the JSON a
database would (the codec of :mod:`agent_channel.lowlevel` reads it back), so a restore
hands back fresh objects, never the ones written. Bounded as the SQLite store is:
finished executions past :data:`KEEP_FINISHED` or older than :data:`KEEP_SECONDS` are
pruned; a running one holds its conversation and its pending items (the channel bounds
those).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from .._store import ExecutionStatus, JsonObject, Restored, StoredExecution, StoreError
from ..lowlevel import decode_items, decode_messages

if TYPE_CHECKING:
    from .._items import ChannelItem
    from .._messages import ChatMessage

KEEP_FINISHED = 200
"""Finished (ended or closed) executions kept; the oldest beyond it are pruned."""
KEEP_SECONDS = 30 * 24 * 3600.0
"""Finished executions older than this (30 days since their last write) are pruned."""


@dataclass(slots=True)
class _Execution:
    """One execution's data, as JSON texts (what a database would hold)."""

    row: StoredExecution
    messages: list[str] = field(default_factory=list[str])
    pending: dict[str, str] = field(default_factory=dict[str, str])  # id -> item, in post order
    state: str | None = None
    sections: dict[str, str] = field(default_factory=dict[str, str])


class MemoryStore:
    """A :class:`~agent_channel.Store` in this process's memory.

    :meth:`reopen` is a restart: a new store over the same executions, as a new process
    opening the same file would find them (the journals of this one stop writing, like
    those of a closed database).
    """

    def __init__(self, *, keep: int = KEEP_FINISHED, keep_seconds: float = KEEP_SECONDS) -> None:
        self.keep = keep
        self.keep_seconds = keep_seconds
        self._data: dict[str, _Execution] = {}
        self._mutex = threading.Lock()
        self._closed = False

    def reopen(self) -> MemoryStore:
        """The same executions in a new store (this one closed, if it was not)."""
        self.close()
        store = MemoryStore(keep=self.keep, keep_seconds=self.keep_seconds)
        store._data = self._data
        return store

    # -- the Store interface -------------------------------------------------------------

    def journal(
        self, execution_id: str, meta: JsonObject | None = None, *, wait: bool = False
    ) -> MemoryJournal:
        now = time.time()
        with self._mutex:
            self._check_open()
            found = self._data.get(execution_id)
            if found is None:
                row = StoredExecution(
                    id=execution_id, status="running", meta=_copy(meta or {}), created=now,
                    updated=now,
                )  # fmt: skip
                self._data[execution_id] = _Execution(row)
                return MemoryJournal(self, execution_id, None)
            if found.row.status != "running":
                raise StoreError(f"execution {execution_id} is {found.row.status}: it cannot go on")
            restored = Restored(
                messages=tuple(decode_messages(found.messages)),
                state=None if found.state is None else json.loads(found.state),
                pending=tuple(decode_items(list(found.pending.values()))),
                sections=dict(found.sections),
                wait=wait,
            )
            found.row = replace(
                found.row, restored=now, meta=found.row.meta if meta is None else _copy(meta)
            )
        return MemoryJournal(self, execution_id, restored)

    def executions(self, status: ExecutionStatus | None = None) -> list[StoredExecution]:
        with self._mutex:
            rows = [e.row for e in self._data.values() if status in (None, e.row.status)]
        return sorted(rows, key=lambda r: r.updated, reverse=True)

    def get(self, execution_id: str) -> StoredExecution | None:
        with self._mutex:
            found = self._data.get(execution_id)
            return None if found is None else found.row

    def messages(self, execution_id: str) -> tuple[ChatMessage, ...]:
        with self._mutex:
            found = self._data.get(execution_id)
            return () if found is None else tuple(decode_messages(found.messages))

    def close_execution(self, execution_id: str) -> None:
        self._finish(execution_id, "closed", None, None)

    def close(self) -> None:
        with self._mutex:
            self._closed = True

    def prune(self) -> int:
        """Drop finished executions past the policy (``keep``, ``keep_seconds``); how many."""
        cutoff = time.time() - self.keep_seconds
        with self._mutex:
            finished = sorted(
                (e.row for e in self._data.values() if e.row.status != "running"),
                key=lambda r: r.updated,
                reverse=True,
            )
            gone = {r.id for r in finished[self.keep :]} | {
                r.id for r in finished if r.updated < cutoff
            }
            for execution_id in gone:
                del self._data[execution_id]
        return len(gone)

    # -- used by the journals -------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    def _write(self, execution_id: str, change: Callable[[_Execution], object]) -> None:
        """Apply ``change`` to the execution at once (one transaction: all or nothing)."""
        with self._mutex:
            self._check_open()
            found = self._data[execution_id]
            change(found)
            found.row = replace(found.row, updated=time.time(), messages=len(found.messages))

    def _finish(
        self, execution_id: str, status: ExecutionStatus, stop_reason: str | None, error: str | None
    ) -> None:
        def end(e: _Execution) -> None:
            e.pending.clear()
            e.row = replace(e.row, status=status, stop_reason=stop_reason, error=error)

        self._write(execution_id, end)
        self.prune()


@dataclass(slots=True, eq=False)
class MemoryJournal:
    """One execution's :class:`~agent_channel.Journal` in a :class:`MemoryStore`."""

    store: MemoryStore
    id: str
    restored_as: Restored | None
    """What :meth:`restored` returns: the execution as the store had it, or ``None``."""
    failure: str | None = None
    on_failure: Callable[[str], object] | None = None

    def restored(self) -> Restored | None:
        return self.restored_as

    def posted(self, item: ChannelItem) -> None:
        body = item.model_dump_json()
        self._apply(lambda e: e.pending.__setitem__(item.id, body))

    def withdrawn(self, item_id: str) -> None:
        self._apply(lambda e: e.pending.pop(item_id, None))

    def commit(
        self,
        messages: Sequence[ChatMessage],
        taken: Sequence[str],
        state: JsonObject | None,
        *,
        start: int,
        sections: Mapping[str, str] | None = None,
    ) -> None:
        bodies = [m.model_dump_json() for m in messages]
        text = None if state is None else json.dumps(state)

        def boundary(e: _Execution) -> None:
            e.messages[start:] = bodies
            for item_id in taken:
                e.pending.pop(item_id, None)
            if text is not None:
                e.state = text
            e.sections.update(sections or {})

        self._apply(boundary)

    def finish(self, status: ExecutionStatus, stop_reason: str | None, error: str | None) -> None:
        if self.failure is None:
            self._guarded(lambda: self.store._finish(self.id, status, stop_reason, error))  # pyright: ignore[reportPrivateUsage]

    def _apply(self, change: Callable[[_Execution], object]) -> None:
        if self.failure is None:
            self._guarded(lambda: self.store._write(self.id, change))  # pyright: ignore[reportPrivateUsage]

    def _guarded(self, write: Callable[[], None]) -> None:
        """Run ``write``; a failure is recorded and told once, never raised (the protocol)."""
        try:
            write()
        except StoreError as e:
            self.failure = reason = f"{e}; this execution goes on in memory only"
            if self.on_failure is not None:
                self.on_failure(reason)


def _copy(meta: JsonObject) -> dict[str, object]:
    """A deep copy through JSON, as a database would keep it (and refusing what is not)."""
    copied: dict[str, object] = json.loads(json.dumps(meta))
    return copied
