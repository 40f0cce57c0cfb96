"""The PostgreSQL store: one database that many processes, on many hosts, share.

Durability as stated in ``docs/postgres.md``: every write is a committed transaction on
the server before the call returns (a post: before its settle returns, off the channel's
lock), so the crash of the process (or of its host) loses nothing written. As SQLite's
default, the session commits with ``synchronous_commit = off``: the server flushes its
log within a fraction of a second, and a crash of the database server's host may lose
the last writes (the database stays consistent). ``durable=True`` commits with
``synchronous_commit = on``: a post returns only once the server flushed it to disk.

Each execution is held by one live process at a time: a session-level advisory lock,
taken when its journal is opened and released when its connection ends (a process that
dies, on any host, lets it go: the server drops the session, within the keepalive's
bounds for a host that vanished). Another process opening it is refused with one line.
"""

from __future__ import annotations

import json
import logging
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, LiteralString, TypeVar, cast

import psycopg
from agent_channel import ExecutionStatus, Restored, StoreBusy, StoredExecution, StoreError
from agent_channel.lowlevel import decode_items, decode_messages
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ._db import Db, one_line

if TYPE_CHECKING:
    from agent_channel import ChannelItem, ChatMessage

JsonObject = Mapping[str, object]
"""Plain JSON data (``meta``, a consumer's state), as the core's ``Store`` protocol takes it."""

Conn = psycopg.Connection[tuple[object, ...]]
T = TypeVar("T")

SCHEMA = 1
"""The schema this version writes; table ``agent_channel_schema`` holds a database's."""

_MIGRATIONS: dict[int, tuple[LiteralString, ...]] = {
    # version -> the statements that bring a database from version - 1 to it
    1: (
        "CREATE TABLE agent_channel_executions (id text PRIMARY KEY, status text NOT NULL,"
        " meta text NOT NULL, state text, created double precision NOT NULL,"
        " updated double precision NOT NULL, restored double precision,"
        " messages integer NOT NULL DEFAULT 0, stop_reason text, error text)",
        "CREATE INDEX agent_channel_executions_by_status"
        " ON agent_channel_executions (status, updated)",
        "CREATE TABLE agent_channel_messages (execution text NOT NULL, seq integer NOT NULL,"
        " body text NOT NULL, PRIMARY KEY (execution, seq))",
        "CREATE TABLE agent_channel_items (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
        " execution text NOT NULL, id text NOT NULL, body text NOT NULL)",
        "CREATE INDEX agent_channel_items_by_execution ON agent_channel_items (execution, id)",
        "CREATE TABLE agent_channel_sections (execution text NOT NULL, name text NOT NULL,"
        " body text NOT NULL, PRIMARY KEY (execution, name))",
    ),
}

TAKEOVER_SECONDS = 2.0
"""How long opening an execution waits for another process to let it go (one that just
died: the server is ending its session) before it is refused as in use."""

KEEP_FINISHED = 200
"""Finished (ended or closed) executions kept; the oldest beyond it are pruned."""
KEEP_SECONDS = 30 * 24 * 3600.0
"""Finished executions older than this (30 days since their last write) are pruned."""

_NOW = "extract(epoch FROM clock_timestamp())"  # the server's clock: one for every host
_ROW = "SELECT id, status, meta, created, updated, restored, messages, stop_reason, error"
_LOCKS = 0x61632D7067  # the advisory locks' seed: agent-channel's own key space
_MIGRATING = 0x61632D7067_00  # the advisory lock that serialises schema changes

_SESSION: tuple[LiteralString, ...] = (
    # A session that holds executions must not hang forever on a lock or a dead peer.
    "SET lock_timeout = '10s'",
    "SET idle_in_transaction_session_timeout = '60s'",
    "SET tcp_keepalives_idle = 5",
    "SET tcp_keepalives_interval = 2",
    "SET tcp_keepalives_count = 3",
)
_CLIENT = {
    # libpq's side of the same: a server that vanished fails a write in about 10 s.
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "application_name": "agent-channel",
}


def describe(url: str) -> str:
    """``url`` without its password (what messages and listings show)."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.Error:
        return "postgresql://(unreadable URL)"
    user = parts.get("user")
    host = parts.get("host") or "localhost"
    port = parts.get("port")
    name = parts.get("dbname") or ""
    return f"postgresql://{f'{user}@' if user else ''}{host}{f':{port}' if port else ''}/{name}"


class PostgresStore:
    """A :class:`~agent_channel.Store` in a PostgreSQL database; see :func:`open_store`.

    ``url``: a libpq connection string or URL (``postgresql://user:pw@host:port/db``); the
    tables (``agent_channel_*``) live in the connection's current schema. ``durable=True``:
    every write is flushed to the server's disk before it returns (``synchronous_commit``
    on; off by default, as SQLite's default store does not fsync each write). ``keep`` and
    ``keep_seconds``: the pruning policy of finished executions.
    """

    def __init__(
        self,
        url: str,
        *,
        durable: bool = False,
        keep: int = KEEP_FINISHED,
        keep_seconds: float = KEEP_SECONDS,
    ) -> None:
        self.url = describe(url)
        """Where the store is, without the password."""
        self.durable = durable
        self.keep = keep
        self.keep_seconds = keep_seconds
        self._held: set[str] = set()  # executions this process holds (their advisory locks)
        conn = _connect(url, self.url, durable)
        self._db = Db(conn, self.url.rsplit("/", 1)[-1])
        weakref.finalize(self, self._db.halt)
        self.prune()

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"

    # -- the Store interface -----------------------------------------------------------

    def journal(
        self, execution_id: str, meta: JsonObject | None = None, *, wait: bool = False
    ) -> PostgresJournal:
        self._take(execution_id)
        restored = self._call(partial(self._open, execution_id, meta, wait))
        return PostgresJournal(self, execution_id, restored)

    def executions(self, status: ExecutionStatus | None = None) -> list[StoredExecution]:
        def read(conn: Conn) -> list[tuple[object, ...]]:
            if status is None:
                return conn.execute(
                    f"{_ROW} FROM agent_channel_executions ORDER BY updated DESC"
                ).fetchall()
            return conn.execute(
                f"{_ROW} FROM agent_channel_executions WHERE status = %s ORDER BY updated DESC",
                (status,),
            ).fetchall()

        return [_row(r) for r in self._call(read)]

    def get(self, execution_id: str) -> StoredExecution | None:
        r = self._call(
            lambda conn: conn.execute(
                f"{_ROW} FROM agent_channel_executions WHERE id = %s", (execution_id,)
            ).fetchone()
        )
        return None if r is None else _row(r)

    def messages(self, execution_id: str) -> tuple[ChatMessage, ...]:
        return self._call(partial(_messages, execution_id=execution_id))

    def close_execution(self, execution_id: str) -> None:
        self._call(partial(self._finish, execution_id, "closed", None, None))

    def close(self) -> None:
        """Write what is queued and close the connection: this process's executions are
        free for another to open."""
        self._db.close()

    def prune(self) -> int:
        """Drop finished executions past the policy (``keep``, ``keep_seconds``); how many."""

        def prune(conn: Conn) -> int:
            with conn.transaction():
                rows = conn.execute(
                    "DELETE FROM agent_channel_executions WHERE status != 'running' AND"
                    f" (updated < {_NOW} - %s OR id IN (SELECT id FROM agent_channel_executions"
                    " WHERE status != 'running' ORDER BY updated DESC OFFSET %s)) RETURNING id",
                    (self.keep_seconds, self.keep),
                ).fetchall()
                ids = [cast(str, r[0]) for r in rows]
                if ids:
                    for table in ("messages", "items", "sections"):
                        conn.execute(
                            f"DELETE FROM agent_channel_{table} WHERE execution = ANY(%s)", (ids,)
                        )
            return len(ids)

        return self._call(prune)

    # -- used by the journals -----------------------------------------------------------

    def _call(self, fn: Callable[[Conn], T]) -> T:
        """``fn`` on the connection after the queued writes; a driver error as StoreError."""
        try:
            return self._db.call(fn)
        except psycopg.Error as e:
            raise StoreError(f"the store {self.url} failed: {one_line(e)}") from None

    def _take(self, execution_id: str) -> None:
        """Hold ``execution_id``'s advisory lock, or :class:`StoreError`. A process that died
        a moment ago may still hold it while the server ends its session: tried again for up
        to :data:`TAKEOVER_SECONDS`, without keeping the connection from the writes."""

        def take(conn: Conn) -> bool:
            if execution_id in self._held:
                return True
            got = conn.execute(
                "SELECT pg_try_advisory_lock(hashtextextended(%s, %s))", (execution_id, _LOCKS)
            ).fetchone()
            if got is not None and got[0] is True:
                self._held.add(execution_id)
                return True
            return False

        deadline = time.monotonic() + TAKEOVER_SECONDS
        while not self._call(take):
            if time.monotonic() > deadline:
                raise StoreBusy(
                    f"execution {execution_id} is in use by another running server"
                    f" (store {self.url})"
                )
            time.sleep(0.05)  # polling the lock's holder going away, under the deadline

    def _open(
        self, execution_id: str, meta: JsonObject | None, wait: bool, conn: Conn
    ) -> Restored | None:
        try:
            with conn.transaction():
                row = conn.execute(
                    "SELECT status, state FROM agent_channel_executions WHERE id = %s",
                    (execution_id,),
                ).fetchone()
                if row is None:
                    conn.execute(
                        "INSERT INTO agent_channel_executions (id, status, meta, created, updated)"
                        f" VALUES (%s, 'running', %s, {_NOW}, {_NOW})",
                        (execution_id, json.dumps(meta or {})),
                    )
                    return None
                status, state = cast(tuple[str, "str | None"], row)
                if status != "running":
                    raise StoreError(f"execution {execution_id} is {status}: it cannot go on")
                restored = _restore(conn, execution_id, state, wait)
                if meta is not None:
                    conn.execute(
                        f"UPDATE agent_channel_executions SET meta = %s, restored = {_NOW}"
                        " WHERE id = %s",
                        (json.dumps(meta), execution_id),
                    )
                else:
                    conn.execute(
                        f"UPDATE agent_channel_executions SET restored = {_NOW} WHERE id = %s",
                        (execution_id,),
                    )
                return restored
        except BaseException:
            self._release(conn, execution_id)
            raise

    def _finish(
        self,
        execution_id: str,
        status: ExecutionStatus,
        stop_reason: str | None,
        error: str | None,
        conn: Conn,
    ) -> None:
        with conn.pipeline(), conn.transaction():
            conn.execute(
                "UPDATE agent_channel_executions SET status = %s, stop_reason = %s, error = %s,"
                f" updated = {_NOW} WHERE id = %s",
                (status, stop_reason, error, execution_id),
            )
            conn.execute("DELETE FROM agent_channel_items WHERE execution = %s", (execution_id,))
        self._release(conn, execution_id)

    def _release(self, conn: Conn, execution_id: str) -> None:
        if execution_id in self._held:
            self._held.discard(execution_id)
            conn.execute(
                "SELECT pg_advisory_unlock(hashtextextended(%s, %s))", (execution_id, _LOCKS)
            )


def _connect(url: str, shown: str, durable: bool) -> Conn:
    """A connection with the store's session settings, its schema created or migrated."""
    try:
        params = {**_CLIENT, **conninfo_to_dict(url)}
        conn: Conn = psycopg.connect(make_conninfo("", **params), autocommit=True)
    except psycopg.Error as e:
        raise StoreError(f"store {shown} cannot be opened: {one_line(e)}") from None
    try:
        for statement in _SESSION:
            conn.execute(statement)
        if durable:
            conn.execute("SET synchronous_commit = on")
        else:
            conn.execute("SET synchronous_commit = off")
        _migrate(conn, shown)
    except psycopg.Error as e:
        conn.close()
        raise StoreError(f"store {shown} cannot be opened: {one_line(e)}") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _migrate(conn: Conn, shown: str) -> None:
    """Create the tables, or bring them to :data:`SCHEMA`, one process at a time."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATING,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS agent_channel_schema"
            " (one boolean PRIMARY KEY DEFAULT true CHECK (one), version integer NOT NULL)"
        )
        row = conn.execute("SELECT version FROM agent_channel_schema").fetchone()
        version = 0 if row is None else cast(int, row[0])
        if version > SCHEMA:
            raise StoreError(
                f"store {shown} was written by a newer agent-channel (schema {version}; "
                f"this one reads up to {SCHEMA}): upgrade, or pass another --store"
            )
        for v in range(version + 1, SCHEMA + 1):  # the migration path, from the first on
            for statement in _MIGRATIONS[v]:
                conn.execute(statement)
        if version < SCHEMA:
            conn.execute(
                "INSERT INTO agent_channel_schema (version) VALUES (%s)"
                " ON CONFLICT (one) DO UPDATE SET version = excluded.version",
                (SCHEMA,),
            )


def _restore(conn: Conn, execution_id: str, state: str | None, wait: bool) -> Restored:
    bodies = [
        cast(str, r[0])
        for r in conn.execute(
            "SELECT body FROM agent_channel_items WHERE execution = %s ORDER BY seq",
            (execution_id,),
        )
    ]
    sections = {
        cast(str, name): cast(str, body)
        for name, body in conn.execute(
            "SELECT name, body FROM agent_channel_sections WHERE execution = %s", (execution_id,)
        )
    }
    return Restored(
        messages=_messages(conn, execution_id=execution_id),
        state=json.loads(state) if state else None,
        pending=tuple(decode_items(bodies)),
        sections=sections,
        wait=wait,
    )


def _messages(conn: Conn, *, execution_id: str) -> tuple[ChatMessage, ...]:
    bodies = [
        cast(str, r[0])
        for r in conn.execute(
            "SELECT body FROM agent_channel_messages WHERE execution = %s ORDER BY seq",
            (execution_id,),
        )
    ]
    return tuple(decode_messages(bodies))


def _row(r: tuple[object, ...]) -> StoredExecution:
    ident, status, meta, created, updated, restored, messages, stop_reason, error = r
    return StoredExecution(
        id=cast(str, ident),
        status=cast(ExecutionStatus, status),
        meta=json.loads(cast(str, meta)),
        created=cast(float, created),
        updated=cast(float, updated),
        restored=cast("float | None", restored),
        messages=cast(int, messages),
        stop_reason=cast("str | None", stop_reason),
        error=cast("str | None", error),
    )


class PostgresJournal:
    """One execution's :class:`~agent_channel.Journal` in a :class:`PostgresStore`."""

    __slots__ = ("__weakref__", "_failure", "_id", "_restored", "_store", "on_failure")

    def __init__(self, store: PostgresStore, execution_id: str, restored: Restored | None) -> None:
        self._store = store
        self._id = execution_id
        self._restored = restored
        self._failure: str | None = None
        self.on_failure: Callable[[str], object] | None = None
        """Told the reason once when writing stops (the channel publishes it), or ``None``."""

    @property
    def id(self) -> str:
        return self._id

    @property
    def failure(self) -> str | None:
        return self._failure

    def restored(self) -> Restored | None:
        return self._restored

    def posted(self, item: ChannelItem) -> Callable[[], None] | None:
        """Queued for the store's writer (no round trip under the channel's lock); the wait
        for its commit is returned, for the channel to call once its lock is free."""
        if self._failure is not None:
            return None
        db = self._store._db  # pyright: ignore[reportPrivateUsage]
        mark = db.post(self._id, item.id, item.model_dump_json(), self._failed)
        return partial(db.wait, mark) if mark else None

    def withdrawn(self, item_id: str) -> None:
        if self._failure is None:
            self._store._db.withdraw(self._id, item_id, self._failed)  # pyright: ignore[reportPrivateUsage]

    def commit(
        self,
        messages: Sequence[ChatMessage],
        taken: Sequence[str],
        state: JsonObject | None,
        *,
        start: int,
        sections: Mapping[str, str] | None = None,
    ) -> None:
        """One transaction, sent in one go (a pipeline), after every queued post."""
        if self._failure is not None:
            return
        eid = self._id
        bodies = [m.model_dump_json() for m in messages]

        def commit(conn: Conn) -> None:
            with conn.pipeline(), conn.transaction():
                if start == 0:
                    conn.execute("DELETE FROM agent_channel_messages WHERE execution = %s", (eid,))
                if bodies:
                    conn.execute(
                        "INSERT INTO agent_channel_messages (execution, seq, body)"
                        " SELECT %s, %s + n - 1, b FROM unnest(%s::text[]) WITH ORDINALITY"
                        " AS t(b, n)"
                        " ON CONFLICT (execution, seq) DO UPDATE SET body = excluded.body",
                        (eid, start, bodies),
                    )
                if taken:
                    conn.execute(
                        "DELETE FROM agent_channel_items WHERE execution = %s AND id = ANY(%s)",
                        (eid, list(taken)),
                    )
                if sections:
                    conn.execute(
                        "INSERT INTO agent_channel_sections (execution, name, body)"
                        " SELECT %s, n, b FROM unnest(%s::text[], %s::text[]) AS t(n, b)"
                        " ON CONFLICT (execution, name) DO UPDATE SET body = excluded.body",
                        (eid, list(sections), list(sections.values())),
                    )
                conn.execute(
                    "UPDATE agent_channel_executions SET state = COALESCE(%s, state),"
                    f" messages = %s, updated = {_NOW} WHERE id = %s",
                    (None if state is None else json.dumps(state), start + len(bodies), eid),
                )

        try:
            self._store._db.call(commit)  # pyright: ignore[reportPrivateUsage]
        except psycopg.Error as e:
            self._failed(one_line(e))

    def finish(self, status: ExecutionStatus, stop_reason: str | None, error: str | None) -> None:
        if self._failure is not None:
            return
        store = self._store
        try:
            store._db.call(partial(store._finish, self._id, status, stop_reason, error))  # pyright: ignore[reportPrivateUsage]
        except psycopg.Error as e:
            self._failed(one_line(e))
            return
        try:
            store.prune()
        except StoreError as e:  # the end is written; a later prune will do
            logging.getLogger("agent_channel").warning("%s", e)

    def _failed(self, reason: str) -> None:
        if self._failure is not None:
            return
        self._failure = (
            f"the store {self._store.url} failed ({reason}); this execution goes on in memory "
            "and will not survive a restart"
        )
        log = logging.getLogger("agent_channel")
        log.error("%s", self._failure)
        callback = self.on_failure
        if callback is not None:
            try:
                callback(self._failure)
            except Exception:
                log.exception("on_failure callback failed")


def open_store(
    url: str,
    *,
    durable: bool = False,
    keep: int = KEEP_FINISHED,
    keep_seconds: float = KEEP_SECONDS,
) -> PostgresStore:
    """Open the store in the PostgreSQL database at ``url`` (its tables created on first use).

    The entry point of ``agent_channel.stores`` for ``postgresql://`` and ``postgres://``.
    Raises :class:`~agent_channel.StoreError` with one line for a server that cannot be
    reached or refuses the login, or a database written by a newer schema.
    """
    return PostgresStore(url, durable=durable, keep=keep, keep_seconds=keep_seconds)
