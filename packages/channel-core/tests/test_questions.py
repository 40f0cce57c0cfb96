"""Questions (Q1, Q3; docs/questions.md): the resolver registry and the wait, on asyncio and trio.

The ACP resolver (Q2, Q4) is tested over real transports in tests/acp/stream/test_questions.py.
"""

from __future__ import annotations

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
from agent_channel._questions import NO_ONE

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
