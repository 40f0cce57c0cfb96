"""``durable=True``: the log fsynced on a thread of its own, so no writer waits for a disk
it does not need.

Every write commits with ``synchronous=NORMAL``: it is in the ``-wal`` file (the OS's
cache) when it returns, which a process crash never loses. This thread makes it survive a
power cut: it fsyncs the ``-wal`` file, and one fsync covers every write made before it
(group commit). A post waits for the fsync that covers its write (D2: durable before the
client's acknowledgement) and asks for it at once; a checkpoint does not wait, and its write
is fsynced at most :data:`SYNC_INTERVAL` seconds later (sooner if a post comes). SQLite
appends transactions to the log in order and recovery keeps a prefix of them, so what a
power cut loses is always the last writes, whole: never a post the client saw acknowledged.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Generator
from pathlib import Path

SYNC_INTERVAL = 0.05
"""Seconds a write no post waits for (a checkpoint, a withdrawal, an end) may stay unsynced."""


class Syncer:
    """Fsyncs one store's ``-wal`` file past every write, in the background, until :meth:`stop`.

    Writers count their writes with :meth:`wrote` (after the commit) and, to be durable,
    :meth:`wait` for the count they got back. Nothing is queued: two counters and a
    condition, so the thread's state is bounded whatever the rate of writes.
    """

    __slots__ = (
        "_cond",
        "_dirty_since",
        "_failure",
        "_held",
        "_stopped",
        "_synced",
        "_thread",
        "_waiting",
        "_wal",
        "_written",
        "fsync",
    )

    def __init__(self, path: Path) -> None:
        self._wal = Path(f"{path}-wal")
        self._cond = threading.Condition(threading.Lock())
        self._written = 0  # writes counted so far
        self._synced = 0  # writes an fsync has covered
        self._dirty_since = 0.0  # monotonic time of the oldest unsynced write
        self._waiting = 0  # writers waiting in wait()
        self._held = False  # a test holds the thread (hold())
        self._stopped = False
        self._failure: str | None = None
        self.fsync: Callable[[int], None] = os.fsync
        """How a file is synced (a test wraps it to see which file)."""
        _sync_directory(path.parent)  # the -wal file's name survives a power cut too
        self._thread = threading.Thread(
            target=self._run, name=f"agent-channel-sync-{path.name}", daemon=True
        )
        self._thread.start()

    @property
    def failure(self) -> str | None:
        """Why syncing stopped (an fsync failed), once it has."""
        return self._failure

    @property
    def written(self) -> int:
        """Writes counted so far: the number of the last one."""
        return self._written

    def wrote(self) -> int:
        """One more committed write; its number, for :meth:`wait`."""
        with self._cond:
            if self._written == self._synced:
                self._dirty_since = time.monotonic()
                self._cond.notify_all()  # the thread starts counting the interval
            self._written += 1
            return self._written

    def wait(self, mark: int) -> str | None:
        """Block until an fsync covered write ``mark`` (at once); ``None``, or why it cannot."""
        with self._cond:
            if self._synced >= mark:
                return self._failure
            self._waiting += 1
            self._cond.notify_all()
            try:
                while self._synced < mark and self._failure is None:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            return None if self._synced >= mark else self._failure

    def synced(self, mark: int, timeout: float) -> bool:
        """Whether an fsync covers write ``mark`` within ``timeout`` seconds (never asks for
        one: what a checkpoint gets)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._synced >= mark, timeout)

    def waiting(self, count: int, timeout: float) -> bool:
        """Whether ``count`` writers wait for an fsync within ``timeout`` seconds (tests)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._waiting >= count, timeout)

    @contextlib.contextmanager
    def hold(self) -> Generator[None]:
        """No fsync starts while inside, but the last one at :meth:`stop` (a test's hook: a
        post waits, a checkpoint does not)."""
        with self._cond:
            self._held = True
        try:
            yield
        finally:
            with self._cond:
                self._held = False
                self._cond.notify_all()

    def stop(self) -> None:
        """The last fsync (everything written so far), then the thread ends."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join()

    def halt(self) -> None:
        """Like :meth:`stop`, without waiting (a store dropped unclosed: from any thread)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def _due(self) -> bool:
        """Under the condition: whether to fsync now (at a stop, whatever holds it)."""
        if self._written == self._synced:
            return False
        if self._stopped:
            return True
        if self._held:
            return False
        return bool(self._waiting) or time.monotonic() - self._dirty_since >= SYNC_INTERVAL

    def _run(self) -> None:
        try:
            self._loop()
        finally:  # no waiter is left waiting for a thread that is gone
            with self._cond:
                if self._synced < self._written and self._failure is None:
                    self._failure = "the store was closed before its last writes were synced"
                self._cond.notify_all()

    def _loop(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._due():
                    if self._stopped:  # and everything is synced
                        return
                    if self._written == self._synced or self._held:
                        cond.wait()
                    else:  # unsynced writes, nobody waiting: until the interval is up
                        cond.wait(self._dirty_since + SYNC_INTERVAL - time.monotonic())
                target = self._written
            failure = self._sync()
            with cond:
                if failure is None:
                    self._synced = target
                    if self._written > target:  # what came during the fsync is dirty since
                        self._dirty_since = time.monotonic()
                else:
                    self._failure = failure
                cond.notify_all()
                if failure is not None:
                    return

    def _sync(self) -> str | None:
        """Fsync the ``-wal`` file: every write committed before this call is then durable."""
        try:
            fd = os.open(self._wal, os.O_RDONLY)
        except FileNotFoundError:  # no write ever reached a log: nothing to sync
            return None
        except OSError as e:
            return f"the store's log cannot be synced ({e})"
        try:
            self.fsync(fd)
        except OSError as e:
            return f"the store's log cannot be synced ({e})"
        finally:
            os.close(fd)
        return None


def _sync_directory(folder: Path) -> None:
    """Fsync ``folder`` so the files created in it are found after a power cut (POSIX)."""
    with contextlib.suppress(OSError):  # not supported everywhere (e.g. Windows): best effort
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
