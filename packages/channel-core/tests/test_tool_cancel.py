"""What an agent author's own loop needs around a tool: a stop of one call, and of the turn.

- A tool call run inside ``ch.region(call.id)`` can be stopped alone by a producer
  (``ref.cancel_region``): the turn goes on, and the call is left without a result,
  which :func:`cancelled_result` supplies (the same words the ReAct loop gives its model).
- Inside a bound ``scope()``, an interrupt always ends the turn as ``AgentInterrupted``:
  a ``drain()`` there takes the messages and leaves the Cancel to the scope, so the
  Cancel is delivered once and the turn is reported cancelled once.
"""

from __future__ import annotations

import threading
import warnings

import anyio
import anyio.lowlevel
import pytest
from agent_channel import (
    AgentChannel,
    AgentInterrupted,
    Cancel,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    Conversation,
    ExecutionEvent,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    UserMessage,
    cancelled_result,
    open_channel,
    repair,
)

pytestmark = pytest.mark.anyio


def test_the_cancelled_result_answers_the_call_and_says_why() -> None:
    call = ToolCall(id="c1", name="search", arguments={"q": "otters"})
    result = cancelled_result(call)
    assert isinstance(result, ChatMessageTool)
    assert (result.tool_call_id, result.function, result.error) == ("c1", "search", "cancelled")
    assert result.content == "Tool call cancelled by the operator."


async def test_a_tool_in_its_region_is_stopped_alone_and_the_turn_goes_on() -> None:
    events: list[ExecutionEvent] = []
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(events.append)
        conv = Conversation(ch, [ChatMessageUser(content="look up two things")])
        calls = [ToolCall(id=f"c{i}", name="search", arguments={"q": str(i)}) for i in (1, 2)]
        conv.append(ChatMessageAssistant(content="", tool_calls=tuple(calls)))
        with ch.scope():
            for call in calls:
                with ch.region(call.id) as region, conv.tool_call(call) as tool:
                    if call.id == "c1":
                        assert ref.cancel_region("c1") is True  # the operator's ctrl+t
                        await anyio.sleep_forever()
                    tool.finish("found it")
                if region.cancelled:
                    conv.append(cancelled_result(call))
        assert ch.turn_state == "ended"  # not cancelled: only the one call was stopped
    results = [m for m in conv if isinstance(m, ChatMessageTool)]
    assert [(m.tool_call_id, m.content) for m in results] == [
        ("c1", "Tool call cancelled by the operator."),
        ("c2", "found it"),
    ]
    finished = [(e.tool_call_id, e.status) for e in events if isinstance(e, ToolCallFinished)]
    assert finished == [("c1", "cancelled"), ("c2", "completed")]
    assert len([e for e in events if isinstance(e, ToolCallStarted)]) == 2


async def test_a_drain_in_a_scope_leaves_a_same_thread_interrupt_to_the_scope() -> None:
    events: list[str] = []
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(lambda e: events.append(type(e).__name__))
        cancel = Cancel("user_cancel")
        with pytest.raises(AgentInterrupted) as caught, ch.scope():
            ref.interrupt(cancel)
            ref.post(UserMessage("and then this"))
            drained = ch.drain()
            await anyio.lowlevel.checkpoint()
            pytest.fail("the interrupted turn must not go on")
        assert caught.value.cancel is cancel
        assert [type(i).__name__ for i in drained] == ["UserMessage"]  # the Cancel stays
        assert ch.drain() == []  # delivered once: by the exception
    assert events.count("TurnCancelled") == 1


async def test_a_drain_in_a_scope_stops_the_scope_for_an_interrupt_from_another_thread() -> None:
    events: list[str] = []
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(lambda e: events.append(type(e).__name__))
        cancel = Cancel("user_cancel")
        with pytest.raises(AgentInterrupted) as caught, ch.scope():
            # Queued from another thread: the drain runs before the loop hands the stop over.
            thread = threading.Thread(target=ref.interrupt, args=(cancel,))
            thread.start()
            thread.join()
            drained = ch.drain()
            await anyio.lowlevel.checkpoint()
            pytest.fail("the interrupted turn must not go on")
        assert caught.value.cancel is cancel
        assert drained == []
        assert ch.drain() == []
    assert events.count("TurnCancelled") == 1
    assert "TurnEnded" not in events


async def _forgetful_turn(ch: AgentChannel, conv: Conversation, turn: int) -> None:
    """A hand-written turn that forgets ``cancelled_result``: its first call is stopped
    alone and left open, its second model step's call runs until the turn is interrupted."""
    ref = ch.ref()
    first = ToolCall(id=f"t{turn}-a", name="search", arguments={"q": "first"})
    second = ToolCall(id=f"t{turn}-b", name="fetch", arguments={"url": "x"})
    with pytest.raises(AgentInterrupted), ch.scope():
        conv.append(ChatMessageAssistant(content="", tool_calls=(first,)))  # model step 1
        with ch.region(first.id), conv.tool_call(first):
            assert ref.cancel_region(first.id) is True  # the operator stops this call alone
            await anyio.sleep_forever()
        # (no cancelled_result: the author forgot it, and the loop goes on)
        conv.append(ChatMessageAssistant(content="", tool_calls=(second,)))  # model step 2
        with ch.region(second.id), conv.tool_call(second):
            ref.interrupt(Cancel("user_cancel"))  # the operator stops the turn
            await anyio.sleep_forever()
    conv.extend(repair(list(conv)))


async def test_repair_answers_every_open_call_and_warns_a_forgetful_body_once() -> None:
    """Issue 29, item 16: after an interrupt, ``repair`` gives every call of the
    conversation left without a result one (the one-result rule), an earlier model step's
    included; a call left open before the last model step is the body's doing (it forgot
    ``cancelled_result``) and is warned of once, as a ``RuntimeWarning`` at the body's call
    of ``repair``."""
    async with open_channel() as ch:
        conv = Conversation(ch, [ChatMessageUser(content="look things up")])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            for turn in (1, 2):  # the same body, the same mistake, twice
                await _forgetful_turn(ch, conv, turn)
                conv.append(ChatMessageUser(content="go on"))
    calls = [c.id for m in conv if isinstance(m, ChatMessageAssistant) for c in m.tool_calls]
    results = [m.tool_call_id for m in conv if isinstance(m, ChatMessageTool)]
    assert sorted(results) == sorted(calls) == ["t1-a", "t1-b", "t2-a", "t2-b"]
    assert repair(list(conv)) == []
    found = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(found) == 1, [str(w.message) for w in found]
    assert "cancelled_result" in str(found[0].message)
    assert found[0].filename == __file__
