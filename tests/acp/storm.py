"""Interrupt storms (issue 10): seeded random prompt / cancel / withdraw / cancel-tool
sequences from several clients at once, and the end-of-run invariants read back through
the client side.

A storm client only acts; the checks run once the execution ended, on what every client
recorded and on the conversation (``_agent_channel/messages``). Randomness is for *when*
things happen (seeded); nothing waits on a clock to synchronise: a jitter step awaits the
next inbound frame or gives up after a few milliseconds, whichever comes first.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
from attach_harness import Client, Server, card_status, tool_ids
from conftest import GUARD, allow, deny

TOKEN = re.compile(r"\bm(\d+)-(\d+)\b")
"""Each prompt carries ``m<client>-<k>``: its identity in the folded conversation."""

KINDS = ("", "", "hang", "block", "quick", "say=ok")
"""What a prompt asks of the scripted agent (agents.attach_script): an echo, a generation
that never ends until cancelled, a tool that blocks until cancelled, a quick tool, a word."""


@dataclass
class Tally:
    """What one storm did: actions by kind, and by the moment (as the client saw it)."""

    actions: Counter[str] = field(default_factory=Counter[str])
    moments: Counter[str] = field(default_factory=Counter[str])

    @property
    def sequences(self) -> int:
        return sum(n for k, n in self.actions.items() if not k.startswith("("))

    def add(self, other: Tally) -> None:
        self.actions.update(other.actions)
        self.moments.update(other.moments)


@dataclass
class Driver:
    """One storming client bound to the execution."""

    index: int
    steady: bool
    """Stays connected throughout (its stream is the one checked for echoes)."""
    client: Client
    sid: str
    rng: random.Random
    sent: list[str] = field(default_factory=list[str])
    withdrawn: set[str] = field(default_factory=set[str])
    ids: dict[str, str] = field(default_factory=dict[str, str])
    """Message id (from the prompt's answer) -> token, in the order sent."""
    responses: int = 0
    tally: Tally = field(default_factory=Tally)

    def known(self, message_id: str, token: str) -> bool:
        """A queued message of mine carries the id its prompt returned; others' are theirs."""
        if not token.startswith(f"m{self.index}-"):
            return True
        return self.ids.get(message_id) == token

    def moment(self) -> str:
        """Where the agent is, as this client's stream shows it (the stream may lag)."""
        states = self.client.rec.states(self.sid)
        if any(
            card_status(self.client, self.sid, t) not in ("completed", "failed")
            for t in tool_ids(self.client, self.sid)[-3:]
        ):
            return "during a tool"
        if states and states[-1] == "started":
            return "during generation"
        if states and states[-1] == "cancelled":
            return "parked after a cancel"
        return "between turns"

    async def step(self, server: Server) -> None:
        c, sid, rng = self.client, self.sid, self.rng
        roll = rng.random()
        self.tally.moments[self.moment()] += 1
        if not self.steady and roll < 0.02:
            # leave and come back (A15): a new connection, bound with session/load
            await c.close()
            server.clients.remove(c)
            self.client = await server.connect(policy=self.client.rec.policy)
            await self.client.load(sid)
            await self.client.until(lambda: self.client.rec.states(sid))
            self.tally.actions["reconnect"] += 1
        elif roll < 0.5:
            token = f"m{self.index}-{len(self.sent)}"
            self.sent.append(token)
            text = f"{token} {rng.choice(KINDS)}".strip()
            answer = await c.prompt(sid, text)
            assert answer["stopReason"] == "end_turn", answer  # A7: acknowledged at once
            self.ids[answer["_meta"]["agent_channel.messageId"]] = token
            self.responses += 1
            self.tally.actions["prompt"] += 1
        elif roll < 0.7:
            await c.cancel(sid)
            self.tally.actions["cancel"] += 1
        elif roll < 0.85:
            queue = (await c.ext("queue", sessionId=sid))["messages"]
            for q in queue:  # the queue names each message by the id its prompt returned
                found = TOKEN.search(q["text"])
                assert found is not None and self.known(q["id"], found.group(0)), q
            # one of my latest, queued or (a race) already folded: withdrawn only if queued
            recent = list(self.ids)[-3:]
            if recent:
                message_id = rng.choice(recent)
                if (await c.ext("withdraw", sessionId=sid, messageId=message_id))["withdrawn"]:
                    self.withdrawn.add(self.ids[message_id])
            self.tally.actions["withdraw"] += 1
        else:
            ids = tool_ids(c, sid)
            if ids:
                await c.ext("cancel_tool_call", sessionId=sid, toolCallId=rng.choice(ids[-2:]))
            self.tally.actions["cancel-tool"] += 1
        if rng.random() < 0.5:
            await jitter(c)


async def jitter(c: Client) -> None:
    """Let the agent move on a little: until the next inbound frame, or a few ms."""
    seen = len(c.rec.wire)
    with suppress(TimeoutError):
        async with asyncio.timeout(0.005):
            await c.until(lambda: len(c.rec.wire) > seen)


async def settle(c: Client, sid: str) -> None:
    """Cancel until the agent waits for the operator with nothing queued."""
    with anyio.fail_after(GUARD * 3):
        while True:
            listed = next(e for e in (await c.ext("list"))["executions"] if e["id"] == sid)
            if listed["status"] == "waiting for operator" and not listed["queued"]:
                return
            await c.cancel(sid)
            await jitter(c)


def tokens(text: str) -> list[str]:
    return [m.group(0) for m in TOKEN.finditer(text)]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType, reportUnknownArgumentType]


def check_conversation(
    drivers: list[Driver],
    messages: list[dict[str, Any]],
    undelivered: list[dict[str, Any]],
) -> None:
    """Issue 10's invariants on the final conversation (``messages --all --full``)."""
    delivered = [
        t
        for m in messages
        if m["role"] == "user" and m.get("source") == "operator"
        for t in tokens(_text(m))
    ]
    left = [t for u in undelivered for t in tokens(u["text"])]
    counts = Counter(delivered)
    ours = {t for d in drivers for t in d.sent}
    assert set(delivered) | set(left) <= ours, "another execution's message turned up here"
    assert not [t for t, n in counts.items() if n > 1], "an operator message delivered twice"
    for d in drivers:
        mine = [t for t in delivered if t.startswith(f"m{d.index}-")]
        assert mine == sorted(mine, key=lambda t: int(t.split("-")[1])), "out of order"
        for t in d.sent:
            places = (t in counts) + (t in d.withdrawn) + (t in left)
            assert places == 1, (
                f"{t}: delivered={t in counts} withdrawn={t in d.withdrawn} left={t in left}"
            )
        assert d.responses == len(d.sent)  # every prompt answered once (A7)
    # every assistant tool call has exactly one result, also when the end cut a tool off
    results = Counter(m["tool_call_id"] for m in messages if m["role"] == "tool")
    calls = [
        c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []
    ]
    for call_id in calls:
        assert results[call_id] == 1, f"tool call {call_id} has {results[call_id]} results"
    assert set(results) <= set(calls), "a result for no call"


def live_updates(c: Client, sid: str) -> list[dict[str, Any]]:
    """The ``session/update``s a client got live: no replay, no bind preamble."""
    return [
        u
        for u in c.rec.updates_of(sid)
        if not (u.get("_meta") or {}).get("agent_channel.replay")
        and "agent_channel.bound" not in (u.get("_meta") or {})
        and u["sessionUpdate"] != "session_info_update"
    ]


def check_wire(c: Client) -> None:
    """Every request this client sent got exactly one response."""
    asked = [f["id"] for f in c.rec.sent if "method" in f and "id" in f]
    answered = Counter(f["id"] for f in c.rec.wire if "id" in f and "method" not in f)
    assert all(answered[i] == 1 for i in asked), [i for i in asked if answered[i] != 1]


def ended_params(c: Client, sid: str) -> dict[str, Any]:
    frames = c.rec.frames(sid)
    methods = [f["method"] for f in frames]
    assert methods.count("_agent_channel/session_ended") == 1
    assert methods[-2:] == ["_agent_channel/turn_state", "_agent_channel/session_ended"]
    return frames[-1]["params"]


def answering(rng: random.Random) -> Callable[[dict[str, Any]], Awaitable[Any]]:
    """A driver's permission policy under ``--approve``: allow or reject, at random."""

    async def policy(request: dict[str, Any]) -> Any:
        return await (allow if rng.random() < 0.7 else deny)(request)

    return policy


async def storm(
    server: Server,
    *,
    seed: int,
    drivers: int,
    steps: int,
    execution: str | None = None,
    first: int = 0,
) -> Tally:
    """Run one seeded storm on ``execution`` (else the server's only one), end it, check
    everything. Drivers are numbered from ``first`` (storms side by side use distinct
    numbers, so a message of one turning up in the other is caught).

    The first driver stays connected throughout; the others sometimes disconnect and come
    back with ``session/load``."""
    rng = random.Random(seed)
    team: list[Driver] = []
    for i in range(drivers):
        c = await server.connect(policy=answering(random.Random(rng.random())))
        if execution is None:
            sid = await c.new()
        else:
            sid = execution
            await c.load(sid)
        await c.until(lambda c=c, sid=sid: c.rec.states(sid))
        team.append(Driver(first + i, i == 0, c, sid, random.Random(rng.random())))
    watcher = await server.connect()
    sid = team[0].sid
    await watcher.load(sid, observe=True)

    async def run(d: Driver) -> None:
        for _ in range(steps):
            await d.step(server)

    async with anyio.create_task_group() as tg:
        for d in team:
            tg.start_soon(run, d)
    settled = seed % 2 == 0  # odd seeds end the run mid-storm, even ones after a settle
    if settled:
        await settle(team[0].client, sid)
        full = (await team[0].client.ext("messages", sessionId=sid, all=True, full=True))[
            "messages"
        ]
        check_conversation(team, full, [])
    else:  # a last burst, acknowledged but (mostly) not yet read when the end lands
        for d in team:
            token = f"m{d.index}-{len(d.sent)}"
            d.sent.append(token)
            await d.client.prompt(sid, f"{token} hang")
            d.responses += 1
    await team[0].client.ext("end", sessionId=sid, reason="storm over")
    everyone = [*(d.client for d in team), watcher]
    for c in everyone:
        await c.until(lambda c=c: c.rec.has(sid, "_agent_channel/session_ended"))
    ended = ended_params(team[0].client, sid)
    assert ended["stopReason"] == "cancelled", ended
    assert "error" not in ended or not ended["error"], ended  # no AgentInterrupted escaped
    full = (await watcher.ext("messages", sessionId=sid, all=True, full=True))["messages"]
    check_conversation(team, full, ended["undelivered"])
    for c in everyone:
        assert ended_params(c, sid)["undelivered"] == ended["undelivered"]
        check_wire(c)
    # every delivered message was echoed once to a client bound all along (A7)
    echoed = [
        t
        for u in team[0].client.rec.updates_of(sid)
        if u["sessionUpdate"] == "user_message_chunk"
        and u["_meta"].get("agent_channel.source") == "operator"
        for t in tokens(u["content"].get("text", ""))
    ]
    delivered = [
        t
        for m in full
        if m["role"] == "user" and m.get("source") == "operator"
        for t in tokens(_text(m))
    ]
    assert echoed == delivered
    # the observer's live stream is the steady driver's, from the observer's bind on
    mine, theirs = live_updates(team[0].client, sid), live_updates(watcher, sid)
    assert theirs and mine[len(mine) - len(theirs) :] == theirs
    tally = Tally()
    for d in team:
        tally.add(d.tally)
    tally.actions["(delivered)"] += len(delivered)
    tally.actions["(withdrawn)"] += sum(len(d.withdrawn) for d in team)
    tally.actions["(undelivered)"] += len(ended["undelivered"])
    tally.actions["(approvals answered)"] += sum(len(c.rec.permissions) for c in server.clients)
    await anyio.lowlevel.checkpoint()
    return tally
