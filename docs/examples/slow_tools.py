"""slow_tools.py: a loop on agent-channel-core whose tool calls an operator can stop one by one."""

import anyio
from agent_channel import (
    AgentInterrupted,
    ChatMessageSystem,
    ChatMessageTool,
    Conversation,
    ToolCall,
    agent_channel,
    cancelled_result,
    fold,
    new_id,
    repair,
    wait_for_message,
)

SECONDS = 2.0  # how long one look-up takes: long enough to stop it


async def look_up(word: str) -> str:  # a slow tool
    await anyio.sleep(SECONDS)
    return f"{word!r} is a word"


async def turn(conv: Conversation) -> None:
    """The model asks for one look-up per word, then answers from the results."""
    ch = conv.channel
    words = conv[-1].text.split() or ["nothing"]
    with conv.model_call(model="stand-in") as call:
        call.text(f"Looking up {len(words)} word(s).")
        calls = [ToolCall(id=new_id(), name="look_up", arguments={"word": w}) for w in words]
        reply = call.finish(tool_calls=calls)
    for tool_call in reply.tool_calls:
        title = f"Looking up {tool_call.arguments['word']!r}"
        # The region keyed by the call's id is what lets an operator stop this call alone.
        with ch.region(tool_call.id) as region, conv.tool_call(tool_call, title=title) as tool:
            tool.finish(await look_up(**tool_call.arguments))
        if region.cancelled:  # stopped alone: no result yet, and the turn goes on
            conv.append(cancelled_result(tool_call))
    # Messages the operator sent while the tools ran, read before the model's next call.
    # Inside the scope no Cancel comes out of a drain: a stop arrives as AgentInterrupted.
    conv.extend(fold(ch.drain()).messages)
    results = [m for m in conv if isinstance(m, ChatMessageTool)][-len(calls) :]
    stopped = sum(m.error == "cancelled" for m in results)
    with conv.model_call(model="stand-in") as call:
        call.text(f"Done: {len(results) - stopped} found, {stopped} stopped.")
        call.finish()


async def agent() -> None:
    ch = agent_channel()
    conv = Conversation(ch, [ChatMessageSystem(content="You look words up.")])
    while True:
        news = fold(ch.drain())  # between turns; news.cancel: a stop with no turn running
        if not news.messages:  # nothing new to act on, a stop included: park
            news = await wait_for_message(ch)
        conv.extend(news.messages)
        try:
            with ch.scope():
                await turn(conv)
        except AgentInterrupted as stop:  # the operator stopped the whole turn
            conv.extend(repair(conv.messages, stop.cancel.reason))  # answer open tool calls


def factory(model: str | None = None):
    """What `agent-channel-acp stdio --agent slow_tools:factory` calls for each session."""
    return agent
