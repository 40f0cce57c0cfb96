"""Logging that never makes the agent wait for whoever reads its stderr.

A client may launch the agent with a stderr pipe it never reads (the ACP SDK's
own spawn helper does). A plain ``StreamHandler`` then blocks in its first
write past the pipe's buffer (~64 KiB), and with it the event loop: the agent
stops answering. So the CLI routes every record through a bounded queue to one
writer thread:

- the queue holds :data:`QUEUE_BOUND` records; a record that finds it full is
  dropped and counted, never waited for, and the writer reports the count
  ("N log records dropped") once it has caught up;
- a message is one line of at most :data:`MESSAGE_MAX` characters (control
  characters escaped), whatever a client put into it (:class:`BoundedFormatter`);
- a message that repeats is rate-limited (:class:`RateLimit`): per logger,
  level and message template, the 1st-10th records pass, then only the 20th,
  40th, 80th..., each saying how many there were so far; a template quiet for
  a minute starts over.

Records are formatted (tracebacks included) before they are queued, so the
writer thread only writes text. Python-level writes to ``sys.stderr`` (and so
``print``, which the stdio server points at stderr) take the same queue, line
by line, without the rate limit.
"""

from __future__ import annotations

import io
import logging
import queue
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from logging.handlers import QueueHandler
from typing import Any, TextIO

MESSAGE_MAX = 1000
"""Characters of a record's message kept; the rest is cut (its length is said)."""

QUEUE_BOUND = 1000
"""Records waiting for the writer thread; past this, records are dropped (and counted)."""

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

_STOP = object()


def parse_level(text: str) -> int:
    """A level name (any case) as its number; ValueError for anything else."""
    name = text.strip().upper()
    if name not in LEVELS:
        raise ValueError(f"unknown log level {text!r}: choose one of {', '.join(LEVELS)}")
    return logging.getLevelNamesMapping()[name]


class RateLimit(logging.Filter):
    """Let a repeated message through at its 1st-``first``-th, then its 2x, 4x, 8x... ``first``-th.

    Keyed on (logger, level, template), so one message with changing arguments
    (a parse error per bad frame) counts as one. At most ``keep`` templates are
    tracked (the least recently seen is forgotten); ``quiet`` seconds without a
    record reset a template's count.
    """

    def __init__(
        self,
        first: int = 10,
        quiet: float = 60.0,
        keep: int = 512,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._first = first
        self._quiet = quiet
        self._keep = keep
        self._clock = clock
        self._seen: OrderedDict[tuple[str, int, str], tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        with self._lock:
            count, last = self._seen.pop(key, (0, now))
            count = 1 if now - last > self._quiet else count + 1
            self._seen[key] = (count, now)
            if len(self._seen) > self._keep:
                self._seen.popitem(last=False)
        if count <= self._first:
            return True
        times, rest = divmod(count, self._first)
        if rest or times & (times - 1):
            return False
        record.msg = f"{record.msg} [{count} times so far, most not shown]"
        return True


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F) if c != 0x09} | {
    0x0A: "\\n",
    0x0D: "\\r",
}


class BoundedFormatter(logging.Formatter):
    """One line per record, of bounded length, whatever a client put into its arguments.

    A message names client-supplied strings (a session id, a method name): a MiB-long id
    made a MiB-long line, and a newline in a method name wrote a line of the client's
    choosing (log forging). So control characters in the message are escaped and it is
    cut at :data:`MESSAGE_MAX` characters; a traceback that follows is left as it is.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = record.message.translate(_CONTROL)
        if len(text) > MESSAGE_MAX:
            text = f"{text[:MESSAGE_MAX]}... [{len(record.message)} characters]"
        record.message = text
        return super().formatMessage(record)


class DroppingQueueHandler(QueueHandler):
    """A ``QueueHandler`` whose full queue drops (and counts) records instead of blocking."""

    def __init__(self, q: queue.Queue[object]) -> None:
        super().__init__(q)
        self.dropped = 0
        self._count_lock = threading.Lock()

    def enqueue(self, record: logging.LogRecord) -> None:
        self.put(record)

    def put(self, item: object) -> None:
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            with self._count_lock:
                self.dropped += 1


class QueueStream(io.TextIOBase):
    """A text stream (for ``sys.stderr``) that queues whole lines instead of writing them."""

    def __init__(self, handler: DroppingQueueHandler, real: TextIO) -> None:
        super().__init__()
        self._handler = handler
        self._real = real
        self._partial = ""
        self._lock = threading.Lock()

    def write(self, s: str) -> int:
        with self._lock:
            *lines, self._partial = (self._partial + s).split("\n")
        for line in lines:
            self._handler.put(line)
        return len(s)

    def flush(self) -> None:
        with self._lock:
            partial, self._partial = self._partial, ""
        if partial:
            self._handler.put(partial)

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._real.fileno()  # a write by descriptor goes straight out, as before

    def isatty(self) -> bool:
        return self._real.isatty()

    @property
    def encoding(self) -> str:  # pyright: ignore[reportIncompatibleVariableOverride]
        return self._real.encoding

    @property
    def buffer(self) -> Any:
        return self._real.buffer


def start_logging(level: int, stream: TextIO) -> Callable[[float], None]:
    """Route logging, warnings and ``sys.stderr`` to ``stream`` without blocking; the stop function.

    The stop function waits at most its argument in seconds for the writer to
    finish: a stream nobody reads must not hold the process at exit either.
    """
    items: queue.Queue[object] = queue.Queue(QUEUE_BOUND)
    handler = DroppingQueueHandler(items)
    handler.setFormatter(BoundedFormatter(FORMAT))
    handler.addFilter(RateLimit())
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)
    errors = sys.stderr = QueueStream(handler, stream)

    def write(text: str) -> None:
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError):  # stderr closed: nobody can read the log any more
            pass

    def writer() -> None:
        reported = 0
        while True:
            item = items.get()
            if isinstance(item, logging.LogRecord):
                write(item.getMessage())
            elif isinstance(item, str):
                write(item)
            dropped = handler.dropped
            if dropped != reported and (item is _STOP or items.empty()):
                lost = dropped - reported
                write(f"agent_channel_acp: {lost} log records dropped (stderr was not read)")
                reported = dropped
            if item is _STOP:
                return

    thread = threading.Thread(target=writer, name="acp-log", daemon=True)
    thread.start()

    def stop(timeout: float) -> None:
        errors.flush()
        deadline = time.monotonic() + timeout
        try:
            items.put(_STOP, timeout=timeout)
        except queue.Full:
            return
        thread.join(max(0.0, deadline - time.monotonic()))

    return stop
