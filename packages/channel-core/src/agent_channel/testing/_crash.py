"""The crash check: a store keeps every acknowledged post across SIGKILLs (D2).

The conformance suite's checks run in one process; this one kills a process that posts and
checkpoints through the store, again and again, and reads what a restart restores. Every
store runs it against itself with a spec :func:`agent_channel.open_store` opens.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable

from .. import UserMessage, open_store
from ._conformance import ConformanceError
from ._crash_program import EXECUTION


def run_crash_check(
    spec: str,
    *,
    backend: str = "asyncio",
    kills: int = 8,
    seed: int = 19,
    while_held: Callable[[], object] | None = None,
) -> None:
    """Kill a process that posts and checkpoints through the store ``spec`` names ``kills``
    times at random moments, restarting it on the same store each time; then every post
    that returned must be in the restored conversation or its queue exactly once, in order.

    ``while_held`` is called once, while the first process holds the execution (a store
    shared by processes checks there that another cannot take it). Raises
    :class:`ConformanceError` naming what was lost, repeated or out of order.
    """
    rng = random.Random(seed)
    acked: list[int] = []
    for run in range(kills):
        proc = subprocess.Popen(
            [sys.executable, "-m", _crash_program_module(), spec, backend, str(run * 1_000_000)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise ConformanceError("the crash program did not start")
            for _ in range(rng.randrange(1, 300)):  # a random moment, counted in acks
                line = proc.stdout.readline()
                if not line.startswith("ack "):
                    raise ConformanceError(f"the crash program said {line!r}")
                acked.append(int(line.split()[1]))
            if run == 0 and while_held is not None:
                while_held()
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        assert proc.stdout is not None
        # Acks printed before the kill landed are acks too.
        acked += [
            int(x.split()[1]) for x in proc.stdout.read().splitlines() if x.startswith("ack ")
        ]
    _check_restored(spec, acked, kills)


def _check_restored(spec: str, acked: list[int], kills: int) -> None:
    store = open_store(spec)
    try:
        restored = store.journal(EXECUTION).restored()
        if restored is None:
            raise ConformanceError("nothing was restored after the kills")
        delivered = [int(t) for m in restored.messages for t in m.text.split("\n\n")]
        pending = [int(i.text) for i in restored.pending if isinstance(i, UserMessage)]
        seen = delivered + pending
        if len(seen) != len(set(seen)):
            raise ConformanceError("a message was delivered twice")
        if seen != sorted(seen):
            raise ConformanceError("messages were restored out of order")
        missing = set(acked) - set(seen)
        if missing:
            raise ConformanceError(
                f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"
            )
        if len(acked) <= kills:
            raise ConformanceError(f"only {len(acked)} posts were acknowledged: too few to judge")
    finally:
        store.close()


def _crash_program_module() -> str:
    return f"{__package__}._crash_program"
