"""What the fuzz runs of both servers share: their sizes, hypothesis settings, figures and
the poll that waits for counts to come back (see ``test_fuzz_stdio``, ``test_fuzz_serve``).

The short forms run in CI (a deterministic seed: ``derandomize``); the long forms (at least
``SOAK_FRAMES`` frames per server) carry the ``soak`` marker.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from conftest import GUARD
from fuzz_checker import Wire
from hypothesis import HealthCheck, Phase, settings

T = TypeVar("T")

CI_EXAMPLES = 120
SOAK_EXAMPLES = 700
SOAK_FRAMES = 10_000
OVERSIZE_EVERY = 100
"""One example in this many also sends a frame over the cap (9 MiB through the pipe)."""


@dataclass
class Figures:
    """What one run sent and got back, printed as one JSON line (SECURITY.md's table)."""

    server: str
    frames: int = 0
    examples: int = 0
    kinds: Counter[str] = field(default_factory=Counter[str])
    answered: int = 0
    null_errors: int = 0
    notifications: int = 0
    before: dict[str, int] = field(default_factory=dict[str, int])
    after: dict[str, int] = field(default_factory=dict[str, int])

    def add(self, wire: Wire) -> None:
        self.frames += wire.frames_sent
        self.answered += sum(wire.got.values())
        self.null_errors += wire.null_errors
        self.notifications += wire.notifications

    def line(self) -> str:
        return json.dumps(
            {
                "server": self.server,
                "frames": self.frames,
                "examples": self.examples,
                "kinds": dict(self.kinds),
                "responses_by_id": self.answered,
                "null_id_errors": self.null_errors,
                "notifications": self.notifications,
                "before": self.before,
                "after": self.after,
            }
        )


def fuzz_settings(examples: int) -> settings:
    """Hypothesis settings for a fuzz run: ``examples`` batches, the same ones every time.

    No shrinking: the batches go to one server whose state the earlier ones built, and the
    wire's debts outlive a batch, so a smaller replay would not isolate anything, and each
    replay after a lost answer waits out the whole guard again (one lost answer once held
    the suite for 17 minutes that way). The first failure is reported as it happened."""
    return settings(
        max_examples=examples,
        derandomize=True,  # a fixed seed: CI runs the same frames every time
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        report_multiple_bugs=False,
    )


async def poll(probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], what: str) -> T:
    """Ask ``probe`` until ``ok`` holds (the guard catches a leak that never goes away)."""
    value = await probe()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GUARD * 3
    while not ok(value) and loop.time() < deadline:
        await asyncio.sleep(0.05)
        value = await probe()
    assert ok(value), f"{what}: {value}"
    return value


def without(counts: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``counts`` less ``keys`` (the counts one check compares, the others may still move)."""
    return {k: v for k, v in counts.items() if k not in keys}
