"""Interrupt storms over attach mode (issue 10): several drivers and an observer on one
execution of a real ``agent-channel-acp serve`` (with and without ``--approve``), each
firing seeded random prompt / cancel / withdraw / cancel-tool / reconnect sequences
during generation, during tools, while parked and between turns; then the execution is
ended (after a settle, or mid-storm) and the invariants are read back through the client
side (see ``storm.check_conversation``).

Short form here (seconds); the long form: ``uv run pytest -m soak tests/acp/test_storm_attach.py``
(``AGENT_CHANNEL_STORM_SEEDS`` / ``AGENT_CHANNEL_STORM_STEPS`` scale it).
"""

from __future__ import annotations

import os
from functools import partial

import anyio
import pytest
from faults import real_serve
from storm import Tally, storm

pytestmark = pytest.mark.anyio

SEEDS = int(os.environ.get("AGENT_CHANNEL_STORM_SEEDS", "10"))
STEPS = int(os.environ.get("AGENT_CHANNEL_STORM_STEPS", "500"))


@pytest.mark.parametrize(("seed", "approve"), [(0, False), (1, False), (2, True), (3, True)])
async def test_storm_three_drivers_every_message_once_in_order_or_accounted_for(
    seed: int, approve: bool
) -> None:
    async with real_serve(*(["--approve"] if approve else [])) as server:
        tally = await storm(server, seed=seed, drivers=3, steps=40)
    assert tally.sequences == 120
    print(f"storm seed {seed}: {dict(tally.actions)} at {dict(tally.moments)}")


async def test_storms_on_two_executions_side_by_side_stay_apart() -> None:
    async with real_serve("--count", "2") as server:
        a, b = server.ids
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(storm, server, seed=4, drivers=2, steps=40, execution=a))
            tg.start_soon(partial(storm, server, seed=5, drivers=2, steps=40, execution=b, first=2))


@pytest.mark.soak
async def test_soak_storm_many_seeds() -> None:
    total = Tally()
    for seed in range(SEEDS):
        async with real_serve(*(["--approve"] if seed % 4 >= 2 else [])) as server:
            total.add(await storm(server, seed=seed, drivers=3, steps=STEPS))
    print(f"storm soak: {total.sequences} sequences {dict(total.actions)} at {dict(total.moments)}")
