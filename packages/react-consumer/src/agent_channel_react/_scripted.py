"""A deterministic model for tests and demos, behind the same interface as real ones.

A script is a list of outputs, used in order, or a function of the
conversation and tools that returns the next one. A step can take time
(``delay``) or wait for an ``anyio.Event`` so a test can hold a model call
open while it interrupts it. Every call's input is recorded in ``calls``.

A durable run restored after a crash (D4) tells its model where it stands
(:meth:`ScriptedModel.resume`): a list script goes on at the step of the run's next
model call, and tool call ids go on after the conversation's, so a restarted process
plays the same script as one that never stopped.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from agent_channel import (
    ChatMessage,
    ChatMessageAssistant,
    Content,
    ContentReasoning,
    ContentText,
    StopReason,
    ToolCall,
    Usage,
)

from ._model import GenerateConfig, ModelOutput, Stream, ToolInfo


@dataclass(frozen=True, slots=True)
class ScriptStep:
    """One scripted model output, and how long producing it takes."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    stop_reason: StopReason = "end_turn"
    delay: float = 0.0
    """Seconds the call takes, spread after its streamed pieces (the first one goes out at once)."""
    wait: anyio.Event | None = None
    """The call blocks until this event is set (before streaming anything)."""
    error: Exception | None = None
    """Raise this instead of answering (a failing provider)."""


def reply(
    content: str,
    *,
    reasoning: str | None = None,
    stop_reason: StopReason = "end_turn",
    delay: float = 0.0,
    wait: anyio.Event | None = None,
) -> ScriptStep:
    """A plain answer."""
    return ScriptStep(content, (), reasoning, stop_reason, delay, wait)


def tool_call(name: str, /, **arguments: Any) -> ToolCall:
    """A tool call for a script; the model gives it an id (``call_1``, ``call_2`` ...)."""
    return ToolCall(id="", name=name, arguments=arguments)


def call(
    *calls: ToolCall,
    content: str = "",
    delay: float = 0.0,
    wait: anyio.Event | None = None,
) -> ScriptStep:
    """An assistant message asking for one or more tool calls."""
    return ScriptStep(content, tuple(calls), None, "end_turn", delay, wait)


ScriptItem = str | ScriptStep | ModelOutput
ScriptFunction = Callable[
    [Sequence[ChatMessage], Sequence[ToolInfo]], ScriptItem | Awaitable[ScriptItem]
]


class ScriptExhausted(RuntimeError):
    """A list script was asked for more outputs than it has."""


@dataclass(frozen=True, slots=True)
class ModelCall:
    """What the model was given in one call."""

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolInfo, ...]
    config: GenerateConfig = field(default_factory=GenerateConfig)


class ScriptedModel:
    """A :class:`~agent_channel_react.Model` that plays a script."""

    def __init__(
        self, script: Sequence[ScriptItem] | ScriptFunction, *, name: str = "scripted"
    ) -> None:
        self.name: str | None = name
        self.calls: list[ModelCall] = []
        self._script = script
        self._next = 0
        self._ids = 0
        self._counted: list[tuple[ChatMessage, int]] = []
        """Word counts of the last input, reused while its messages come back unchanged."""

    async def generate(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolInfo],
        config: GenerateConfig,
        stream: Stream,
    ) -> ModelOutput:
        self.calls.append(ModelCall(tuple(messages), tuple(tools), config))
        item = await self._step(messages, tools)
        if isinstance(item, ModelOutput):
            return item
        step = ScriptStep(item) if isinstance(item, str) else item
        if step.wait is not None:
            await step.wait.wait()
        if step.error is not None:
            raise step.error
        pieces = [("reasoning", p) for p in _pieces(step.reasoning or "")]
        pieces += [("text", p) for p in _pieces(step.content)]
        # The first piece goes out at once, then the delay is spread after each piece:
        # a long step shows some output and then keeps the call open.
        pause = step.delay / max(1, len(pieces)) if step.delay > 0 else 0.0
        for kind, piece in pieces:
            (stream.reasoning if kind == "reasoning" else stream.text)(piece)
            if pause:
                await anyio.sleep(pause)
        if pause and not pieces:
            await anyio.sleep(step.delay)
        calls = tuple(self._with_id(c) for c in step.tool_calls)
        content: str | tuple[Content, ...] = step.content
        if step.reasoning:
            content = (ContentReasoning(reasoning=step.reasoning), ContentText(text=step.content))
        message = ChatMessageAssistant(
            id=stream.message_id, content=content, tool_calls=calls, model=self.name
        )
        words_in = self._words(messages)
        words_out = len(step.content.split()) + len((step.reasoning or "").split()) + len(calls)
        usage = Usage(
            input_tokens=words_in, output_tokens=words_out, total_tokens=words_in + words_out
        )
        return ModelOutput(message=message, stop_reason=step.stop_reason, usage=usage)

    async def _step(self, messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
        script = self._script
        if callable(script):
            item = script(messages, tools)
            if inspect.isawaitable(item):
                item = await item
            return item
        if self._next >= len(script):
            raise ScriptExhausted(f"the script has {len(script)} outputs; call {self._next + 1}")
        item = script[self._next]
        self._next += 1
        return item

    def resume(self, calls: int, messages: Sequence[ChatMessage]) -> None:
        """Go on as a model that already made ``calls`` calls of this run, whose
        conversation is ``messages``: the react loop calls it once when it restores a run
        (a list script goes on at step ``calls``: a call the crash cut off is played again;
        ids ``call_N`` go on after the highest in ``messages``).

        The position is the restored run's count of model calls, not one read from the
        conversation: a conversation can hold assistant messages this model never wrote
        (a handoff's child sees its parent's; a handoff adds its child's replies), and a
        call cut off by an interrupt used a step yet left no message.
        """
        self._next = calls
        for m in messages:
            if isinstance(m, ChatMessageAssistant):
                for c in m.tool_calls:
                    n = _CALL_ID.fullmatch(c.id)
                    if n is not None:
                        self._ids = max(self._ids, int(n.group(1)))

    def _words(self, messages: Sequence[ChatMessage]) -> int:
        """Input "tokens": words of every message. A run sends the same messages again plus a
        few new ones, so the counts of the unchanged prefix are reused (messages are frozen):
        a long conversation does not make each call cost its whole length in splitting."""
        counted = self._counted  # never mutated: a model shared across threads stays right
        same = 0
        for (old, _), new in zip(counted, messages, strict=False):
            if old is not new:
                break
            same += 1
        counted = counted[:same] + [(m, len(m.text.split())) for m in messages[same:]]
        self._counted = counted
        return sum(n for _, n in counted)

    def _with_id(self, c: ToolCall) -> ToolCall:
        if c.id:
            return c
        self._ids += 1
        return c.model_copy(update={"id": f"call_{self._ids}"})


_PIECE = re.compile(r"\S+\s*|\s+")
_CALL_ID = re.compile(r"call_(\d+)")


def _pieces(text: str, words: int = 3) -> list[str]:
    """``text`` in streamable pieces of a few words each (joined they give it back)."""
    tokens = _PIECE.findall(text)
    return ["".join(tokens[i : i + words]) for i in range(0, len(tokens), words)]
