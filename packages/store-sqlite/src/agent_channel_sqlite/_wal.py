"""The store's WAL checkpoints, on a thread of their own.

Left to SQLite, the write that crosses ``wal_autocheckpoint`` pages copies the log into
the database and syncs it, inside that write: a ``post`` on the event loop's thread then
took 11-22 ms about twice in a thousand (``benchmarks/durability.py``). Here the writers
never checkpoint; a daemon thread with its own connection does, passively (it never
waits for a writer, nor a writer for it), every :data:`INTERVAL` seconds or sooner once
:data:`WRITES` writes were made, so the log stays bounded by what a second of writes adds.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path

INTERVAL = 1.0
"""Seconds between two checkpoints when few writes come."""
WRITES = 500
"""Writes after which the next checkpoint runs at once."""


class Checkpointer:
    """Checkpoints one store file's WAL in the background until :meth:`stop`."""

    __slots__ = ("_db", "_due", "_path", "_stopped", "_thread", "_writes")

    def __init__(self, path: Path) -> None:
        self._path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._due = threading.Event()
        self._stopped = False
        self._writes = 0
        self._thread = threading.Thread(
            target=self._run, name=f"agent-channel-wal-{path.name}", daemon=True
        )
        self._thread.start()

    def wrote(self) -> None:
        """One more write (called under the store's mutex): maybe time for a checkpoint."""
        self._writes += 1
        if self._writes >= WRITES:
            self._writes = 0
            self._due.set()

    def stop(self) -> None:
        """The last checkpoint, then the thread ends and its connection closes."""
        self.halt()
        self._thread.join()

    def halt(self) -> None:
        """Like :meth:`stop`, without waiting (a store dropped unclosed: from any thread)."""
        self._stopped = True
        self._due.set()

    def _run(self) -> None:
        try:
            while not self._stopped:
                self._due.wait(INTERVAL)
                self._due.clear()
                with contextlib.suppress(sqlite3.Error):  # a busy or failing file: next time
                    self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            self._db.close()
