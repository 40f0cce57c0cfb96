"""Questions (Q1, Q3; docs/questions.md): the resolver registry and the wait, on asyncio and trio.

The ACP resolver (Q2, Q4) is tested over real transports in tests/acp/stream/test_questions.py.
"""

from __future__ import annotations

import gc
import random
import weakref
from collections.abc import Callable

import anyio
import anyio.lowlevel
import pytest
from agent_channel import (
    AgentInterrupted,
    Answer,
    Question,
    QuestionField,
    agent_channel,
    ask_user,
    open_channel,
    open_supervisor,
)
from agent_channel.questions import NO_ONE

pytestmark = pytest.mark.anyio


async def until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` at every loop step, with a deadline (no sleeps as synchronisation)."""
    with anyio.fail_after(10):
        while not condition():
            await anyio.lowlevel.checkpoint()


async def test_q1_no_resolver_answers_at_once_no_one_can_answer() -> None:
    async with open_channel():
        with anyio.fail_after(5):  # never hangs unattended
            answer = await ask_user("Which colour?", choices=["red", "blue"])
    assert not answer.answered
    assert answer.reason == NO_ONE
    assert answer.for_model() == f"No answer: {NO_ONE}."


async def test_q1_outside_any_execution_no_one_can_answer() -> None:
    answer = await ask_user("Anyone?")
    assert answer.reason == NO_ONE


async def test_q1_the_routed_resolver_answers_and_release_restores_the_one_before() -> None:
    asked: list[Question] = []

    async def first(q: Question) -> Answer:
        asked.append(q)
        return Answer("first")

    async def second(q: Question) -> Answer:
        asked.append(q)
        return Answer("", values={"name": "Ada", "age": 36})

    async with open_channel() as ch:
        ref = ch.ref()
        release_first = ref.route_questions(first)
        release = ref.route_questions(second)
        form = (QuestionField("name"), QuestionField("age", kind="integer"))
        answer = await ask_user("Who?", fields=form)
        assert answer.values == {"name": "Ada", "age": 36}
        assert answer.for_model() == "name: Ada\nage: 36"
        assert asked[-1].fields == form and asked[-1].child_id is None
        release()
        release()  # twice is harmless
        assert (await ask_user("Again?", choices=("a", "b"))).text == "first"
        assert asked[-1].choices == ("a", "b")
        release_first()
        assert (await ask_user("Still?")).reason == NO_ONE


async def test_q1_route_questions_takes_a_callable() -> None:
    async with open_channel() as ch:
        with pytest.raises(TypeError, match="async callable"):
            ch.ref().route_questions("nope")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="text"):
            await ask_user("  ")


async def test_q3_a_childs_question_reaches_the_top_level_resolver_naming_the_child() -> None:
    asked: list[Question] = []

    async def resolver(q: Question) -> Answer:
        asked.append(q)
        return Answer(f"answer to {q.asker}")

    async def grandchild(_: str) -> str:
        return (await ask_user("deep?")).text or ""

    async def child(_: str) -> str:
        from agent_channel import agent_supervisor

        sup = agent_supervisor()
        assert sup is not None
        mine = (await ask_user("Which source?", choices=["a", "b"])).text or ""
        inner = sup.spawn(grandchild, name="digger")
        await sup.wait(inner)
        return mine + " | " + sup.result(inner)

    async with open_channel() as ch, open_supervisor(max_depth=2) as sup:
        ch.ref().route_questions(resolver)
        cid = sup.spawn(child, name="researcher")
        await sup.wait(cid)
        result = sup.result(cid)
    assert asked[0].child_id == cid and asked[0].child_name == "researcher"
    assert asked[0].asker == f"child researcher ({cid})"
    assert asked[1].child_name == "digger"  # the asking child, however deep
    assert result.startswith(f"answer to child researcher ({cid}) | answer to child digger")


async def test_q3_an_interrupt_of_the_asking_turn_cancels_the_pending_question() -> None:
    pending = anyio.Event()
    voided: list[str] = []

    async def resolver(q: Question) -> Answer:
        try:
            pending.set()
            await anyio.sleep_forever()
        finally:
            voided.append(q.id)  # a producer tells its client the question is void here
        raise AssertionError("unreachable")

    async with open_channel() as ch:
        ref = ch.ref()
        ref.route_questions(resolver)

        async def operator() -> None:
            await pending.wait()
            ref.interrupt()

        async with anyio.create_task_group() as tg:
            tg.start_soon(operator)
            with pytest.raises(AgentInterrupted), agent_channel().scope():
                await ask_user("Proceed?", choices=["yes", "no"])
        assert len(voided) == 1
        await until(lambda: ch.turn_state != "started")


async def _race(answer_after: int, interrupt_after: int) -> tuple[str, weakref.ref[object]]:
    """One question raced by an interrupt; how it ended, and a weak ref to its channel."""
    started = finished = 0

    async def resolver(q: Question) -> Answer:
        nonlocal started, finished
        started += 1
        try:
            for _ in range(answer_after):
                await anyio.lowlevel.checkpoint()
            return Answer("yes")
        finally:
            finished += 1

    async with open_channel() as ch:
        ref = ch.ref()
        ref.route_questions(resolver)  # never released: the channel's end must free it

        async def operator() -> None:
            for _ in range(interrupt_after):
                await anyio.lowlevel.checkpoint()
            ref.interrupt()

        result: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(operator)
            try:
                with ch.scope():
                    answer = await ask_user("Go?")
                    result.append(answer.text or "")
                    await anyio.sleep_forever()  # the turn goes on until stopped
            except AgentInterrupted:
                result.append("interrupted")
        ch.drain()
    assert result in (["yes", "interrupted"], ["interrupted"])
    assert started == finished <= 1  # a resolver that started finished, once
    return ("answered" if result[0] == "yes" else "cancelled"), weakref.ref(ch)


async def test_q3_interrupts_racing_questions_leave_each_answered_or_cancelled_once() -> None:
    """500 questions, each raced by an interrupt a random number of loop steps in, against a
    resolver that answers a random number of steps in: every ask ends exactly one way, each
    resolver that started finishes exactly once, and no routing keeps its channel alive."""
    rng = random.Random(18)
    ends: list[str] = []
    channels: list[weakref.ref[object]] = []
    for _ in range(500):
        end, channel = await _race(rng.randrange(6), rng.randrange(6))
        ends.append(end)
        channels.append(channel)
    gc.collect()
    assert "answered" in ends and "cancelled" in ends  # both ways were exercised
    assert all(c() is None for c in channels)
