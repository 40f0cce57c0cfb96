"""One connection to the database, and the queue of writes no caller waits on there.

A post is written while the channel holds its lock (write-ahead, in queue order), and a
PostgreSQL write is a round trip to a server and its WAL flush: no channel must wait for
that under its lock. So :meth:`Db.post` only queues the write (in the order the channel's
lock gives) and hands back its number; :meth:`Db.wait` (the post's settle, called once the
channel's lock is free) writes what is queued on the posting thread, every queued post in
one statement (group commit: posters that queue meanwhile are written by the next one),
and returns once its own write is committed. Every other call (a boundary's commit, a
read) first writes what is queued too, under the same mutex: so a drained item's insert is
always in before the commit that takes it. A thread writes what nobody waits for: a
withdrawal at once, a post whose settle never came after :data:`GRACE` seconds. A post
does not wake that thread unless it sleeps (its queue was empty for a grace): a wake per
post, a context switch and a contest for the GIL with the poster's round trip, was a
quarter of a post's time on a busy machine.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import LiteralString, TypeVar

import psycopg
from psycopg.pq import ExecStatus
from psycopg.pq.abc import PGresult

MAX_PENDING = 10_000
"""Queued writes (posts and withdrawals not yet written) past which a post is refused
to the store: its journal fails (goes on in memory) rather than queue without bound. Each
queued post has a poster waiting for it, so this is reached only by a stalled database."""

GRACE = 0.05
"""Seconds a queued post waits for its poster to write it before the thread does."""

T = TypeVar("T")

Failed = Callable[[str], None]
"""Told why a queued write of its journal failed."""

_INSERT = (
    "INSERT INTO agent_channel_items (execution, id, body)"
    " SELECT e, i, b FROM unnest(%s::text[], %s::text[], %s::text[]) WITH ORDINALITY"
    " AS t(e, i, b, n) ORDER BY n"
)
_INSERT_ONE = "INSERT INTO agent_channel_items (execution, id, body) VALUES (%s, %s, %s)"
_PREPARED = b"agent_channel_insert_one"
"""A lone post's insert, prepared on the session and run through libpq itself: psycopg's
cursor costs ~15 us of the poster's CPU a post (query conversion, adaptation, its wait
loop), a sixth of the post on loopback."""
_PREPARED_SQL = b"INSERT INTO agent_channel_items (execution, id, body) VALUES ($1, $2, $3)"
_WITHDRAW = "DELETE FROM agent_channel_items WHERE execution = %s AND id = %s"


class Db:
    """The store's connection under a mutex, and its queue of posts and withdrawals.

    Nothing but two counters, a bounded deque and a condition: the thread's state is
    bounded whatever the rate of posts.
    """

    __slots__ = (
        "_cond",
        "_conn",
        "_cur",
        "_done",
        "_mutex",
        "_oldest",
        "_prepared",
        "_queue",
        "_queued",
        "_sleeping",
        "_stopped",
        "_thread",
        "_withdrawals",
    )

    def __init__(self, conn: psycopg.Connection[tuple[object, ...]], name: str) -> None:
        self._conn = conn
        self._cur = conn.cursor()
        self._mutex = threading.Lock()  # the connection's: one statement or transaction at once
        self._cond = threading.Condition(threading.Lock())  # the queue's
        self._queue: deque[tuple[int, str | None, str, str, Failed]] = deque()
        self._queued = 0  # writes queued so far: the last one's number
        self._done = 0  # writes handled (committed, or failed and told) so far
        self._oldest = 0.0  # monotonic time the queue last went from empty to not
        self._withdrawals = 0  # withdrawals queued (the thread writes them at once)
        self._sleeping = False  # the thread waits without a deadline: a post must wake it
        self._prepared = False  # whether the session holds the prepared insert
        self._stopped = False
        self._thread = threading.Thread(
            target=self._run, name=f"agent-channel-pg-{name}", daemon=True
        )
        self._thread.start()

    # -- queued writes (under the channel's lock: never a round trip) ----------------------

    def post(self, execution: str, item_id: str, body: str, failed: Failed) -> int:
        """Queue the insert of a posted item; its number for :meth:`wait`, or 0 if refused."""
        return self._put(execution, item_id, body, failed)

    def withdraw(self, execution: str, item_id: str, failed: Failed) -> None:
        """Queue the deletion of a withdrawn item (nobody waits for it)."""
        self._put(execution, None, item_id, failed)

    def _put(self, execution: str, item_id: str | None, text: str, failed: Failed) -> int:
        with self._cond:
            if self._stopped:
                failed("the store was closed")
                return 0
            if len(self._queue) >= MAX_PENDING:
                failed(f"{MAX_PENDING} writes wait for the database (the store's limit)")
                return 0
            if not self._queue:
                self._oldest = time.monotonic()
                if self._sleeping:  # else its deadline comes within a grace: it looks then
                    self._cond.notify_all()  # the thread starts counting the grace
            self._queued += 1
            self._queue.append((self._queued, item_id, execution, text, failed))
            if item_id is None:
                self._withdrawals += 1
                self._cond.notify_all()
            return self._queued

    def wait(self, mark: int) -> None:
        """Write what is queued, unless write ``mark`` already is: on return it is committed,
        or its journal was told it failed. Off the channel's lock: this is the round trip."""
        with self._cond:
            if self._done >= mark:
                return
        with self._mutex:  # whoever holds it is writing a batch: ours, or the one before it
            self._flush()

    # -- everything else: the caller's thread, after what is queued ------------------------

    def call(self, fn: Callable[[psycopg.Connection[tuple[object, ...]]], T]) -> T:
        """``fn(connection)`` under the mutex, once every write queued before it is in."""
        with self._mutex:
            self._flush()
            return fn(self._conn)

    def close(self) -> None:
        """Write what is queued, end the thread, close the connection (its locks go)."""
        self.halt()
        self._thread.join()
        with self._mutex:
            self._conn.close()

    def halt(self) -> None:
        """No more writes are queued; the thread writes what is and ends (from any thread)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def _due(self) -> bool:
        """Under the condition: whether the thread writes the queue now."""
        if not self._queue:
            return False
        if self._stopped or self._withdrawals:
            return True
        return time.monotonic() - self._oldest >= GRACE

    def _run(self) -> None:
        cond = self._cond
        linger = True  # after a write, a grace awake: the next posts need not wake it
        while True:
            with cond:
                while not self._due():
                    if self._stopped:  # and nothing is queued
                        return
                    if self._queue:  # posts whose posters should write them: a grace
                        linger = True
                        cond.wait(self._oldest + GRACE - time.monotonic())
                    elif linger:  # a post meanwhile is seen at the deadline, not told
                        linger = False
                        cond.wait(GRACE)
                    else:
                        self._sleeping = True
                        cond.wait()
                        self._sleeping = False
                        linger = True
            with self._mutex:
                self._flush()

    def _flush(self) -> None:
        """Under the mutex: write every queued item in one round trip when it can."""
        with self._cond:
            batch = list(self._queue)
            self._queue.clear()
            self._withdrawals = 0
        if not batch:
            return
        failure: str | None = None
        try:
            _, item_id, execution, text, _ = batch[0]
            if len(batch) == 1 and item_id is not None:  # a lone post: the common case
                self._insert_one(execution, item_id, text)
            else:
                self._write(_statements(batch))
        except Exception as e:  # the connection, or a body it cannot take: told, never hung
            failure = one_line(e)
        if failure is not None:
            told: set[int] = set()
            for _, _, _, _, failed in batch:
                if id(failed) not in told:  # once per journal
                    told.add(id(failed))
                    failed(failure)
        with self._cond:  # nobody waits on this: the thread's deadline comes within a grace
            self._done = batch[-1][0]

    def _insert_one(self, execution: str, item_id: str, body: str) -> None:
        """One post's insert: one round trip of libpq's (the GIL free meanwhile)."""
        # libpq's text parameters end at a NUL: such a value goes by psycopg, which refuses
        # it in one line, never written cut short
        if "\x00" in execution or "\x00" in item_id or "\x00" in body:
            self._write([(_INSERT_ONE, (execution, item_id, body))])
            return
        values = [execution.encode(), item_id.encode(), body.encode()]
        pgconn = self._conn.pgconn
        if not self._prepared:
            _check(pgconn.prepare(_PREPARED, _PREPARED_SQL))
            self._prepared = True
        _check(pgconn.exec_prepared(_PREPARED, values))

    def _write(self, statements: list[tuple[LiteralString, tuple[object, ...]]]) -> None:
        """The statements in one transaction (one alone is its own)."""
        cur = self._cur  # one cursor for the queue's writes: a new one costs ~15 us a post
        if len(statements) == 1:
            cur.execute(*statements[0])
        else:
            with self._conn.transaction():
                for statement in statements:
                    cur.execute(*statement)


def _check(result: PGresult) -> None:
    """Raise libpq's error for a result that is not a command's success."""
    if result.status != ExecStatus.COMMAND_OK:
        message = result.error_message.decode(errors="replace")
        raise psycopg.OperationalError(message or f"the database answered {result.status}")


def _statements(
    batch: list[tuple[int, str | None, str, str, Failed]],
) -> list[tuple[LiteralString, tuple[object, ...]]]:
    """The batch as statements, in order: each run of inserts one statement (a single row
    the plain insert, a third quicker for the server than ``unnest``)."""
    out: list[tuple[LiteralString, tuple[object, ...]]] = []
    rows: list[tuple[str, str, str]] = []

    def inserts() -> None:
        if len(rows) == 1:
            out.append((_INSERT_ONE, rows[0]))
        elif rows:
            out.append((_INSERT, tuple(list(column) for column in zip(*rows, strict=True))))
        rows.clear()

    for _, item_id, execution, text, _ in batch:
        if item_id is None:  # a withdrawal
            inserts()
            out.append((_WITHDRAW, (execution, text)))
        else:
            rows.append((execution, item_id, text))
    inserts()
    return out


def one_line(e: BaseException) -> str:
    """A driver's error as one line (libpq's messages span several)."""
    text = " ".join(part.strip() for part in str(e).splitlines() if part.strip())
    return text or type(e).__name__
