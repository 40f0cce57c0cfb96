"""Interrupt storms over the stdio agent (issue 10, S3-S7): seeded random prompts (left
running, so they queue and fold) and cancels at random moments of a real
``agent-channel-acp stdio`` subprocess; then the model's own input is read back with an
``inspect`` prompt.

Invariants: every prompt gets exactly one response, with a stop reason S3 allows (never
an error); a prompt answered ``end_turn`` / ``max_turn_requests`` reached the model exactly
once; no prompt reached it twice, and one client's prompts reach it in the order sent; the
agent still answers afterwards.

Long form: ``uv run pytest -m soak tests/acp/test_storm_stdio.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from collections import Counter
from contextlib import suppress
from typing import Any

import anyio
import pytest
from conftest import GUARD, Agent, allow, deny, spawn

pytestmark = pytest.mark.anyio

TOKEN = re.compile(r"\bs(\d+)\b")
KINDS = ("", "", "hang", "block", "quick", "think")
STEPS = int(os.environ.get("AGENT_CHANNEL_STORM_STEPS", "500"))
SEEDS = int(os.environ.get("AGENT_CHANNEL_STORM_SEEDS", "10"))


async def _prompt(agent: Agent, sid: str, text: str) -> Any:
    return await agent.request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    )


async def _jitter(agent: Agent) -> None:
    seen = len(agent.rec.wire)
    with suppress(TimeoutError):
        async with asyncio.timeout(0.005):
            await agent.rec.wait_until(lambda: len(agent.rec.wire) > seen)


async def _stdio_storm(agent: Agent, *, seed: int, steps: int) -> Counter[str]:
    rng = random.Random(seed)
    sid = await agent.session()
    answers: dict[int, Any] = {}
    tally: Counter[str] = Counter()

    async def prompt(k: int, text: str) -> None:
        answers[k] = await _prompt(agent, sid, text)

    sent = 0
    async with anyio.create_task_group() as tg:
        for _ in range(steps):
            if rng.random() < 0.55:
                tg.start_soon(prompt, sent, f"s{sent} {rng.choice(KINDS)}".strip())
                sent += 1
                tally["prompt"] += 1
            else:
                await agent.notify("session/cancel", {"sessionId": sid})
                tally["cancel"] += 1
            if rng.random() < 0.6:
                await _jitter(agent)
        # the last prompts may hang (a generation or a tool that waits for a cancel)
        with anyio.fail_after(GUARD * 3):
            while len(answers) < sent:
                await agent.notify("session/cancel", {"sessionId": sid})
                await _jitter(agent)
    reasons = Counter(a["stopReason"] for a in answers.values())
    assert set(reasons) <= {"end_turn", "cancelled", "max_turn_requests"}, reasons
    tally.update({f"({r})": n for r, n in reasons.items()})
    # what the model saw: an inspect prompt answers with a summary of its own input
    before = len(agent.rec.updates[sid])
    assert (await _prompt(agent, sid, "inspect"))["stopReason"] == "end_turn"
    said = "".join(
        u["content"]["text"]
        for u in agent.rec.updates[sid][before:]
        if u["sessionUpdate"] == "agent_message_chunk"
    )
    seen = [
        int(m.group(1))
        for entry in json.loads(said)
        if entry["role"] == "user"
        for m in TOKEN.finditer(entry["text"])
    ]
    assert len(seen) == len(set(seen)), "a prompt reached the model twice"
    assert seen == sorted(seen), "prompts reached the model out of order"
    for k, a in answers.items():
        if a["stopReason"] != "cancelled":
            assert k in seen, f"s{k} was answered {a['stopReason']} but never reached the model"
    tally["(reached the model)"] += len(seen)
    asked = [f["id"] for f in agent.rec.sent if "method" in f and "id" in f]
    answered = Counter(f["id"] for f in agent.rec.wire if "id" in f and "method" not in f)
    assert all(answered[i] == 1 for i in asked)  # one response per request, on the wire
    return tally


def _answering(rng: random.Random) -> Any:
    """Under ``--approve``: allow, reject, or never answer (only a cancel ends that, S10)."""

    async def policy(request: dict[str, Any]) -> Any:
        roll = rng.random()
        if roll < 0.2:
            await anyio.sleep_forever()
        return await (allow if roll < 0.7 else deny)(request)

    return policy


@pytest.mark.parametrize(("seed", "approve"), [(0, False), (1, False), (2, True)])
async def test_stdio_storm_one_answer_per_prompt_each_delivered_once_in_order(
    seed: int, approve: bool
) -> None:
    async with spawn("--agent", "agents:react_agent", *(["--approve"] if approve else [])) as agent:
        agent.rec.policy = _answering(random.Random(seed))
        tally = await _stdio_storm(agent, seed=seed, steps=150)
    tally["(approvals asked)"] = len(agent.rec.permissions)
    print(f"stdio storm seed {seed}: {dict(tally)}")


@pytest.mark.soak
async def test_soak_stdio_storm_many_seeds() -> None:
    total: Counter[str] = Counter()
    for approve in ([], ["--approve"]):
        async with spawn("--agent", "agents:react_agent", *approve) as agent:
            agent.rec.policy = _answering(random.Random(len(approve)))
            for seed in range(SEEDS):
                total.update(await _stdio_storm(agent, seed=seed, steps=STEPS))
            total["(approvals asked)"] += len(agent.rec.permissions)
    print(f"stdio storm soak: {dict(total)}")
