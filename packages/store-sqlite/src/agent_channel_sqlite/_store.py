"""The embedded store: one SQLite file (standard library), WAL, one writer process.

Durability as stated in ``docs/sqlite.md``: every write is its own committed transaction
(``synchronous=NORMAL``) before the call returns, so a process crash (SIGKILL included)
loses nothing written; a power failure may lose the last transactions (the file stays
consistent). ``durable=True`` adds a :class:`~._sync.Syncer`: a post returns only once the
log is fsynced past it, a checkpoint is fsynced within ``SYNC_INTERVAL`` without waiting.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Generator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

from agent_channel import ExecutionStatus, Restored, StoreBusy, StoredExecution, StoreError
from agent_channel.lowlevel import decode_items, decode_messages

from ._sync import Syncer
from ._wal import Checkpointer

if TYPE_CHECKING:
    from agent_channel import ChannelItem, ChatMessage

JsonObject = Mapping[str, object]
"""Plain JSON data (``meta``, a consumer's state), as the core's ``Store`` protocol takes it."""

SCHEMA = 2
"""The schema this version writes; ``PRAGMA user_version`` holds a file's."""

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    # version -> the statements that bring a file from version - 1 to it
    1: (
        "CREATE TABLE executions (id TEXT PRIMARY KEY, status TEXT NOT NULL, meta TEXT NOT NULL,"
        " state TEXT, children TEXT, created REAL NOT NULL, updated REAL NOT NULL,"
        " restored REAL, messages INTEGER NOT NULL DEFAULT 0, stop_reason TEXT, error TEXT)",
        "CREATE TABLE messages (execution TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,"
        " PRIMARY KEY (execution, seq)) WITHOUT ROWID",
        "CREATE TABLE items (seq INTEGER PRIMARY KEY, execution TEXT NOT NULL, id TEXT NOT NULL,"
        " body TEXT NOT NULL)",
        "CREATE INDEX items_by_execution ON items (execution, id)",
        "CREATE INDEX executions_by_status ON executions (status, updated)",
    ),
    # Named sections (Journal.commit(sections=...)), one row each; the children column's
    # text becomes the "agent_channel.children" section. The column stays, NULL: DROP COLUMN needs
    # SQLite 3.35, older than some a Python 3.11 links.
    2: (
        "CREATE TABLE sections (execution TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL,"
        " PRIMARY KEY (execution, name)) WITHOUT ROWID",
        "INSERT INTO sections (execution, name, body)"
        " SELECT id, 'agent_channel.children', children FROM executions WHERE children IS NOT NULL",
        "UPDATE executions SET children = NULL",
    ),
}

KEEP_FINISHED = 200
"""Finished (ended or closed) executions kept; the oldest beyond it are pruned."""
KEEP_SECONDS = 30 * 24 * 3600.0
"""Finished executions older than this (30 days since their last write) are pruned."""

_ROW = "SELECT id, status, meta, created, updated, restored, messages, stop_reason, error"


def default_store_path() -> Path:
    """``$XDG_STATE_HOME/agent-channel/store.db``, else ``~/.local/state/agent-channel/...``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "agent-channel" / "store.db"


def _lock(path: Path) -> int | None:
    """Hold an exclusive lock on ``path`` for this process's life (released at its death)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: SQLite's own locking only
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StoreBusy(
            f"store {path} is in use by another running server: stop it, or pass another --store"
        ) from None
    return fd


class SqliteStore:
    """A :class:`~agent_channel.Store` in one SQLite file; see :func:`open_store`.

    ``durable=True``: a post returns once the log is fsynced past it (a power cut loses no
    acknowledged post), a checkpoint within :data:`SYNC_INTERVAL` without waiting for the
    disk. ``keep`` and ``keep_seconds``: the pruning policy of finished executions.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durable: bool = False,
        keep: int = KEEP_FINISHED,
        keep_seconds: float = KEEP_SECONDS,
    ) -> None:
        self.path = Path(path)
        self.durable = durable
        self.keep = keep
        self.keep_seconds = keep_seconds
        self._mutex = threading.Lock()
        new = not self.path.exists()
        if new:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.touch()
        elif self.path.is_dir():
            raise StoreError(f"store {self.path} is a directory, not a store file")
        self._lock_fd = _lock(self.path)
        try:
            self._db = self._connect()
        except BaseException:
            self._unlock()
            raise
        self._wal = Checkpointer(self.path)  # writes never checkpoint on the caller's thread
        weakref.finalize(self, self._wal.halt)
        self._syncer = Syncer(self.path) if durable else None
        if self._syncer is not None:
            weakref.finalize(self, self._syncer.halt)
        self.prune()

    def _connect(self) -> sqlite3.Connection:
        path = self.path
        try:
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise StoreError(f"store {path} cannot be opened: {e}") from None
        try:
            version = cast(int, db.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA:
                raise StoreError(
                    f"store {path} was written by a newer agent-channel (schema {version}; "
                    f"this one reads up to {SCHEMA}): upgrade, or pass another --store"
                )
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if version == 0 and tables:
                raise StoreError(f"store {path} is an SQLite file of something else, not a store")
            check = db.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise StoreError(
                    f"store {path} is damaged ({check}): move it aside, or pass another --store"
                )
            db.execute("PRAGMA journal_mode=WAL")
            # durable=True too: its fsyncs are the Syncer's, off the writers' threads.
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA wal_autocheckpoint=0")
            db.execute("PRAGMA foreign_keys=OFF")
            for v in range(version + 1, SCHEMA + 1):  # the migration path, from the first on
                db.execute("BEGIN IMMEDIATE")
                for statement in _MIGRATIONS[v]:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version={v}")
                db.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            db.close()
            raise StoreError(
                f"store {path} is not a readable store ({e}): "
                "move it aside, or pass another --store"
            ) from None
        except BaseException:
            db.close()
            raise
        return db

    # -- the Store interface -----------------------------------------------------------

    def journal(
        self, execution_id: str, meta: JsonObject | None = None, *, wait: bool = False
    ) -> SqliteJournal:
        now = time.time()
        with self._transaction() as db:
            row = db.execute(
                "SELECT status, state FROM executions WHERE id = ?", (execution_id,)
            ).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO executions (id, status, meta, created, updated)"
                    " VALUES (?, 'running', ?, ?, ?)",
                    (execution_id, json.dumps(meta or {}), now, now),
                )
                return SqliteJournal(self, execution_id, None)
            status, state = cast(tuple[str, str | None], row)
            if status != "running":
                raise StoreError(f"execution {execution_id} is {status}: it cannot go on")
            restored = self._restore(execution_id, state, wait)
            if meta is not None:
                db.execute(
                    "UPDATE executions SET meta = ?, restored = ? WHERE id = ?",
                    (json.dumps(meta), now, execution_id),
                )
            else:
                db.execute("UPDATE executions SET restored = ? WHERE id = ?", (now, execution_id))
        return SqliteJournal(self, execution_id, restored)

    def executions(self, status: ExecutionStatus | None = None) -> list[StoredExecution]:
        with self._mutex:
            if status is None:
                rows = self._db.execute(f"{_ROW} FROM executions ORDER BY updated DESC").fetchall()
            else:
                rows = self._db.execute(
                    f"{_ROW} FROM executions WHERE status = ? ORDER BY updated DESC", (status,)
                ).fetchall()
        return [_row(r) for r in rows]

    def get(self, execution_id: str) -> StoredExecution | None:
        with self._mutex:
            r = self._db.execute(f"{_ROW} FROM executions WHERE id = ?", (execution_id,)).fetchone()
        return None if r is None else _row(r)

    def messages(self, execution_id: str) -> tuple[ChatMessage, ...]:
        with self._mutex:
            return self._messages(execution_id)

    def close_execution(self, execution_id: str) -> None:
        self._finish(execution_id, "closed", None, None)

    def close(self) -> None:
        if self._syncer is not None:
            self._syncer.stop()  # its last fsync covers every write
        self._wal.stop()
        with self._mutex:
            self._db.close()
        self._unlock()

    def prune(self) -> int:
        """Drop finished executions past the policy (``keep``, ``keep_seconds``); how many."""
        cutoff = time.time() - self.keep_seconds
        with self._mutex:
            ids = [
                r[0]
                for r in self._db.execute(
                    "SELECT id FROM executions WHERE status != 'running'"
                    " ORDER BY updated DESC LIMIT -1 OFFSET ?",
                    (self.keep,),
                )
            ]
            ids += [
                r[0]
                for r in self._db.execute(
                    "SELECT id FROM executions WHERE status != 'running' AND updated < ?",
                    (cutoff,),
                )
            ]
        if not ids:
            return 0
        with self._transaction() as db:
            for table, column in (
                ("executions", "id"),
                ("messages", "execution"),
                ("items", "execution"),
                ("sections", "execution"),
            ):
                db.executemany(f"DELETE FROM {table} WHERE {column} = ?", [(i,) for i in set(ids)])
        return len(set(ids))

    # -- used by the journals -----------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self) -> Generator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` under the mutex, rolled back on any error."""
        with self._mutex:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
                self._wrote()
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise

    def _write(self, sql: str, params: tuple[object, ...]) -> int:
        """One autocommitted statement; its write's number (for the syncer), else 0."""
        with self._mutex:
            self._db.execute(sql, params)
            return self._wrote()

    def _wrote(self) -> int:
        """Under the mutex, after a commit: count it for the WAL thread and the syncer."""
        self._wal.wrote()
        syncer = self._syncer
        return 0 if syncer is None else syncer.wrote()

    def _restore(self, execution_id: str, state: str | None, wait: bool) -> Restored:
        db = self._db
        bodies = [
            r[0]
            for r in db.execute(
                "SELECT body FROM items WHERE execution = ? ORDER BY seq", (execution_id,)
            )
        ]
        sections = dict(
            db.execute("SELECT name, body FROM sections WHERE execution = ?", (execution_id,))
        )
        return Restored(
            messages=self._messages(execution_id),
            state=json.loads(state) if state else None,
            pending=tuple(decode_items(bodies)),
            sections=sections,
            wait=wait,
        )

    def _messages(self, execution_id: str) -> tuple[ChatMessage, ...]:
        bodies = [
            r[0]
            for r in self._db.execute(
                "SELECT body FROM messages WHERE execution = ? ORDER BY seq", (execution_id,)
            )
        ]
        return tuple(decode_messages(bodies))

    def _finish(
        self, execution_id: str, status: ExecutionStatus, stop_reason: str | None, error: str | None
    ) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE executions SET status = ?, stop_reason = ?, error = ?, updated = ?"
                " WHERE id = ?",
                (status, stop_reason, error, time.time(), execution_id),
            )
            db.execute("DELETE FROM items WHERE execution = ?", (execution_id,))

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)


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


class SqliteJournal:
    """One execution's :class:`~agent_channel.Journal` in a :class:`SqliteStore`."""

    __slots__ = ("_failure", "_id", "_restored", "_store", "on_failure")

    def __init__(self, store: SqliteStore, execution_id: str, restored: Restored | None) -> None:
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
        """Written before it returns; with ``durable=True``, the wait for the fsync that
        covers it is returned, for the channel to call once its lock is free."""
        mark = self._write(
            "INSERT INTO items (execution, id, body) VALUES (?, ?, ?)",
            (self._id, item.id, item.model_dump_json()),
        )
        if mark and self._store._syncer is not None:  # pyright: ignore[reportPrivateUsage]
            return partial(self._settle, mark)
        return None

    def _settle(self, mark: int) -> None:
        syncer = self._store._syncer  # pyright: ignore[reportPrivateUsage]
        failure = None if syncer is None else syncer.wait(mark)
        if failure is not None:
            self._failed(failure)

    def withdrawn(self, item_id: str) -> None:
        self._write("DELETE FROM items WHERE execution = ? AND id = ?", (self._id, item_id))

    def commit(
        self,
        messages: Sequence[ChatMessage],
        taken: Sequence[str],
        state: JsonObject | None,
        *,
        start: int,
        sections: Mapping[str, str] | None = None,
    ) -> None:
        """One transaction; with ``durable=True`` it does not wait for the disk (fsynced
        within :data:`SYNC_INTERVAL`, or by the next post's wait, whichever comes first)."""
        if self._failure is not None or self._sync_failed():
            return
        eid = self._id
        rows = [(eid, start + i, m.model_dump_json()) for i, m in enumerate(messages)]
        try:
            with self._store._transaction() as db:  # pyright: ignore[reportPrivateUsage]
                if start == 0:
                    db.execute("DELETE FROM messages WHERE execution = ?", (eid,))
                db.executemany(
                    "INSERT OR REPLACE INTO messages (execution, seq, body) VALUES (?, ?, ?)", rows
                )
                db.executemany(
                    "DELETE FROM items WHERE execution = ? AND id = ?", [(eid, i) for i in taken]
                )
                if sections:
                    db.executemany(
                        "INSERT OR REPLACE INTO sections (execution, name, body) VALUES (?, ?, ?)",
                        [(eid, name, body) for name, body in sections.items()],
                    )
                db.execute(
                    "UPDATE executions SET state = COALESCE(?, state), messages = ?, updated = ?"
                    " WHERE id = ?",
                    (
                        state if state is None else json.dumps(state),
                        start + len(rows),
                        time.time(),
                        eid,
                    ),
                )
        except sqlite3.Error as e:
            self._failed(f"{e}")

    def finish(self, status: ExecutionStatus, stop_reason: str | None, error: str | None) -> None:
        if self._failure is not None or self._sync_failed():
            return
        try:
            self._store._finish(self._id, status, stop_reason, error)  # pyright: ignore[reportPrivateUsage]
        except sqlite3.Error as e:
            self._failed(f"{e}")
            return
        self._store.prune()

    def _write(self, sql: str, params: tuple[object, ...]) -> int:
        if self._failure is not None or self._sync_failed():
            return 0
        try:
            return self._store._write(sql, params)  # pyright: ignore[reportPrivateUsage]
        except sqlite3.Error as e:
            self._failed(f"{e}")
            return 0

    def _sync_failed(self) -> bool:
        """With ``durable=True``: whether the log can no longer be synced (then we stop)."""
        syncer = self._store._syncer  # pyright: ignore[reportPrivateUsage]
        if syncer is None or syncer.failure is None:
            return False
        self._failed(syncer.failure)
        return True

    def _failed(self, reason: str) -> None:
        self._failure = (
            f"the store {self._store.path} failed ({reason}); this execution goes on in memory "
            "and will not survive a restart"
        )
        import logging

        logging.getLogger("agent_channel").error("%s", self._failure)
        callback = self.on_failure
        if callback is not None:
            try:
                callback(self._failure)
            except Exception:
                logging.getLogger("agent_channel").exception("on_failure callback failed")


def open_store(path: str | os.PathLike[str] | None = None, *, durable: bool = False) -> SqliteStore:
    """Open (or create) the store at ``path`` (default :func:`default_store_path`).

    ``path`` may be written as a URL, ``sqlite:///abs/runs.db`` or ``sqlite://runs.db``:
    :func:`agent_channel.open_store` hands such a spec here (this store's scheme).

    Raises :class:`~agent_channel.StoreError` with one line for a store that is damaged,
    from a newer schema, not a store, or in use by another live process; nothing is
    written to it then.
    """
    if isinstance(path, str) and path[:9].lower() == "sqlite://":
        path = path[9:]
    return SqliteStore(default_store_path() if path is None else path, durable=durable)
