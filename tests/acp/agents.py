"""A tiny scripted agent that honours the consumer contract, written against the core only.

It stands in for a react agent where the suite needs behaviour the react
package's demo does not script (a model call that never ends, a refusal, a
crash). The "model" reads the last user message and follows these words:

- ``block``: call the ``block`` tool, which waits forever (until cancelled).
- ``quick``: call the ``quick`` tool (returns "done"), then answer.
- ``think``: stream a reasoning delta and a text delta of one message.
- ``hang``: the model call itself never returns (until cancelled).
- ``refuse`` / ``long``: answer with stop reason ``refusal`` / ``max_tokens``.
- ``inspect``: answer with a JSON summary of the model's input (what it sees).
- ``crash``: raise; ``finish``: answer, then the execution ends.
- anything else: answer ``echo: <text>`` in two text deltas.

Usable as ``--agent tests.acp.agents:scripted`` (run from the repository root).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from agent_channel import (
    AgentChannel,
    AgentInterrupted,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ContentText,
    MessageAppended,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    StopReason,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    TurnCancelled,
    Usage,
    agent_channel,
    fold,
    new_id,
    repair,
    wait_for_message,
)


def scripted(model: str | None = None) -> Callable[[], Awaitable[object]]:
    """The agent factory: ``factory(model) -> body``."""
    return _Agent().run


def _summary(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        entry: dict[str, Any] = {"role": m.role, "text": m.text}
        if not isinstance(m.content, str):
            entry["parts"] = [p.type for p in m.content]
        if isinstance(m, ChatMessageAssistant) and m.tool_calls:
            entry["tool_calls"] = [c.id for c in m.tool_calls]
        if isinstance(m, ChatMessageTool):
            entry["tool_call_id"] = m.tool_call_id
            entry["error"] = m.error
        out.append(entry)
    return out


class _Agent:
    def __init__(self) -> None:
        self.conversation: list[ChatMessage] = []
        self.ch: AgentChannel = agent_channel()

    def append(self, message: ChatMessage) -> None:
        self.conversation.append(message)
        if self.ch.observed:
            self.ch.publish(MessageAppended(message=message, index=len(self.conversation) - 1))

    async def run(self) -> None:
        ch = self.ch = agent_channel()
        self.append(ChatMessageSystem(content="You are a scripted test agent."))
        for message in (await wait_for_message(ch, "end_turn")).messages:
            self.append(message)
        while True:
            folded = fold(ch.drain())
            if folded.cancel is not None:  # rule 3: a cancel reached us between scopes
                for r in repair(self.conversation, folded.cancel.reason):
                    self.append(r)
                if ch.observed:
                    ch.publish(TurnCancelled(cancel=folded.cancel))
                if not folded.messages:
                    folded = await wait_for_message(ch, "cancelled")
            for message in folded.messages:
                self.append(message)
            try:
                with ch.scope():
                    stop = await self.step()
            except AgentInterrupted as e:
                for r in repair(self.conversation, e.cancel.reason):
                    self.append(r)
                folded = fold(ch.drain())
                if not folded.messages:
                    folded = await wait_for_message(ch, "cancelled")
                for message in folded.messages:
                    self.append(message)
                continue
            if stop is None:
                continue
            if stop == "finish":
                ch.stop_reason = "end_turn"
                return
            for message in (await wait_for_message(ch, stop)).messages:
                self.append(message)

    def last_user_text(self) -> str:
        for m in reversed(self.conversation):
            if isinstance(m, ChatMessageUser):
                return m.text
            if isinstance(m, ChatMessageTool):
                return ""  # after a tool result: time to answer
        return ""

    async def step(self) -> StopReason | str | None:
        """One model call and its tools; the stop reason when the turn is over."""
        message, stop = await self.generate()
        self.append(message)
        for call in message.tool_calls:
            await self.call_tool(call)
        return None if message.tool_calls else stop

    async def generate(self) -> tuple[ChatMessageAssistant, StopReason | str]:
        ch = self.ch
        call_id, mid = new_id(), new_id()
        text = self.last_user_text()
        words = text.split()
        if ch.observed:
            ch.publish(ModelCallStarted(call_id=call_id, model="scripted"))
        finished = False
        try:
            stop: StopReason | str = "end_turn"
            calls: tuple[ToolCall, ...] = ()
            content: Any = ""
            if "hang" in words:
                await anyio.sleep_forever()
            if "crash" in words:
                raise RuntimeError("scripted crash")
            if "block" in words or "quick" in words:
                name = "block" if "block" in words else "quick"
                calls = (ToolCall(id=new_id(), name=name, arguments={"why": text}),)
                content = f"calling {name}"
                await self.delta(call_id, mid, "text", content)
            elif "think" in words:
                await self.delta(call_id, mid, "reasoning", "pondering")
                await self.delta(call_id, mid, "text", "thought about it")
                content = (ContentText(text="thought about it"),)
            elif "inspect" in words:
                content = json.dumps(_summary(self.conversation))
                await self.delta(call_id, mid, "text", content)
            else:
                if "refuse" in words:
                    stop = "refusal"
                elif "long" in words:
                    stop = "max_tokens"
                elif "finish" in words:
                    stop = "finish"
                answer = f"echo: {text}" if text else "done"
                half = len(answer) // 2
                await self.delta(call_id, mid, "text", answer[:half])
                await self.delta(call_id, mid, "text", answer[half:])
                content = answer
            message = ChatMessageAssistant(
                id=mid, content=content, tool_calls=calls, model="scripted"
            )
            finished = True
            if ch.observed:
                ch.publish(
                    ModelCallFinished(
                        call_id=call_id,
                        message=message,
                        stop_reason="end_turn" if stop == "finish" else stop,  # type: ignore[arg-type]
                        usage=Usage(input_tokens=10, output_tokens=5, total_tokens=15),
                    )
                )
            return message, stop
        finally:
            if not finished and ch.observed:
                ch.publish(ModelCallFinished(call_id=call_id, cancelled=True))

    async def delta(self, call_id: str, mid: str, kind: Any, text: str) -> None:
        if self.ch.observed:
            self.ch.publish(ModelDelta(call_id=call_id, message_id=mid, kind=kind, text=text))
        await anyio.lowlevel.checkpoint()

    async def call_tool(self, call: ToolCall) -> None:
        ch = self.ch
        if ch.approver is not None and not await ch.approver(call):
            self.append(
                ChatMessageTool(
                    tool_call_id=call.id,
                    function=call.name,
                    content="",
                    error="rejected by the operator",
                )
            )
            if ch.observed:
                ch.publish(
                    ToolCallFinished(
                        tool_call_id=call.id,
                        name=call.name,
                        status="failed",
                        error="rejected by the operator",
                    )
                )
            return
        if ch.observed:
            ch.publish(
                ToolCallStarted(
                    tool_call_id=call.id,
                    name=call.name,
                    arguments=dict(call.arguments),
                    title=f"Run {call.name}",
                    kind="execute",
                )
            )
        done = False
        try:
            if call.name == "block":
                await anyio.sleep_forever()
            await anyio.lowlevel.checkpoint()
            done = True
        finally:
            if ch.observed:
                ch.publish(
                    ToolCallFinished(
                        tool_call_id=call.id,
                        name=call.name,
                        status="completed" if done else "cancelled",
                        content="done" if done else "",
                    )
                )
        self.append(ChatMessageTool(tool_call_id=call.id, function=call.name, content="done"))
