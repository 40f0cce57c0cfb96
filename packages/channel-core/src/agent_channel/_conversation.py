"""The publishing facade: a conversation that tells producers what the loop does.

A loop written against the channel alone is invisible to an operator unless it
publishes the right events. :class:`Conversation` makes the usual ones a single
call each: appending a message, a model call with its streamed deltas, a tool
call from start to finish. Nothing is built when nobody is subscribed, so an
unobserved loop pays one attribute test per call.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Iterator, Sequence
from typing import Literal

import anyio

from ._channel import AgentChannel
from ._errors import describe
from ._events import (
    MessageAppended,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    StopReason,
    ToolCallFinished,
    ToolCallStarted,
    ToolKind,
    Usage,
)
from ._messages import ChatMessage, ChatMessageAssistant, ChatMessageTool, ToolCall, new_id


class Conversation(Sequence[ChatMessage]):
    """The loop's conversation, published as it grows.

    Wraps the loop's own list (``messages``; pass one to adopt it, and its current
    messages are announced). The loop stays the only writer: append through this
    object and every producer sees the message, the model call or the tool call.
    The first conversation made on a channel is the one it shares
    (:meth:`AgentChannel.share`); later ones (a fork, a scratch copy) are not.
    """

    __slots__ = ("channel", "messages")

    def __init__(self, channel: AgentChannel, messages: list[ChatMessage] | None = None) -> None:
        self.channel = channel
        """The execution's channel the events go to."""
        self.messages: list[ChatMessage] = messages if messages is not None else []
        """The messages, oldest first: what the loop hands its model."""
        if channel._shared is None:  # pyright: ignore[reportPrivateUsage]
            channel.share(self.messages)  # the first one is the execution's conversation
        if channel.observed:
            for i, m in enumerate(self.messages):
                channel.publish(MessageAppended(message=m, index=i))

    def append(self, message: ChatMessage) -> None:
        """Add ``message`` to the end and announce it."""
        self.messages.append(message)
        if self.channel.observed:
            index = len(self.messages) - 1
            self.channel.publish(MessageAppended(message=message, index=index))

    def extend(self, messages: Iterable[ChatMessage]) -> None:
        """Append each of ``messages`` in turn."""
        for m in messages:
            self.append(m)

    def model_call(self, model: str | None = None) -> ModelCall:
        """``with conversation.model_call() as call:`` around one model call.

        Stream with ``call.text()`` / ``call.reasoning()``, end with ``call.finish()``.
        Leaving the block by an exception reports the call cancelled or failed.
        """
        return ModelCall(self, model)

    def tool_call(
        self, call: ToolCall, *, title: str | None = None, kind: ToolKind = "other"
    ) -> ToolRun:
        """``with conversation.tool_call(call) as tool:`` around running one tool call.

        End with ``tool.finish(result)`` or ``tool.fail(error)``; each appends the
        tool message. Leaving the block by an exception reports the call cancelled
        (outer cancellation or an interrupt) or failed, and appends nothing: after an
        interrupt :func:`repair` supplies the result.
        """
        return ToolRun(self, call, title, kind)

    def __len__(self) -> int:
        return len(self.messages)

    def __getitem__(self, index: int) -> ChatMessage:  # type: ignore[override]
        return self.messages[index]

    def __iter__(self) -> Iterator[ChatMessage]:
        return iter(self.messages)


class ModelCall:
    """One model call in progress (see :meth:`Conversation.model_call`)."""

    __slots__ = ("_conv", "_done", "_model", "_observed", "_text", "call_id", "message_id")

    def __init__(self, conv: Conversation, model: str | None) -> None:
        self._conv = conv
        self._model = model
        self._observed = conv.channel.observed  # one call's events are all published, or none
        self._text: list[str] = []
        self._done = False
        self.call_id = new_id()
        self.message_id = new_id()
        """The id of the reply: the deltas and the finished message share it."""

    def __enter__(self) -> ModelCall:
        if self._observed:
            self._conv.channel.publish(ModelCallStarted(call_id=self.call_id, model=self._model))
        return self

    def text(self, delta: str) -> None:
        """A streamed piece of the answer."""
        self._text.append(delta)
        if self._observed:
            self._delta("text", delta)

    def reasoning(self, delta: str) -> None:
        """A streamed piece of the model's reasoning (shown apart from the answer)."""
        if self._observed:
            self._delta("reasoning", delta)

    def finish(
        self,
        message: ChatMessageAssistant | None = None,
        *,
        tool_calls: Sequence[ToolCall] = (),
        stop_reason: StopReason = "end_turn",
        usage: Usage | None = None,
    ) -> ChatMessageAssistant:
        """End the call with its reply, append the reply and return it.

        Without ``message`` the reply is the streamed text with ``tool_calls``.
        """
        if self._done:
            raise RuntimeError("this model call has already finished")
        self._done = True
        if message is None:
            message = ChatMessageAssistant(
                id=self.message_id,
                content="".join(self._text),
                tool_calls=tuple(tool_calls),
                model=self._model,
            )
        elif message.id != self.message_id:
            message = message.model_copy(update={"id": self.message_id})
        if self._observed:
            self._conv.channel.publish(
                ModelCallFinished(
                    call_id=self.call_id, message=message, stop_reason=stop_reason, usage=usage
                )
            )
        self._conv.append(message)
        return message

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        if self._done:
            return
        self._done = True
        if exc is None:
            raise RuntimeError("a model call must end with call.finish(...)")
        if self._observed:
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                event = ModelCallFinished(call_id=self.call_id, cancelled=True)
            else:
                event = ModelCallFinished(call_id=self.call_id, error=describe(exc))
            self._conv.channel.publish(event)

    def _delta(self, kind: str, text: str) -> None:
        self._conv.channel.publish(
            ModelDelta(
                call_id=self.call_id,
                message_id=self.message_id,
                kind="text" if kind == "text" else "reasoning",
                text=text,
            )
        )


class ToolRun:
    """One tool call being run (see :meth:`Conversation.tool_call`)."""

    __slots__ = ("_call", "_conv", "_done", "_kind", "_title")

    def __init__(
        self, conv: Conversation, call: ToolCall, title: str | None, kind: ToolKind
    ) -> None:
        self._conv = conv
        self._call = call
        self._title = title
        self._kind: ToolKind = kind
        self._done = False

    def __enter__(self) -> ToolRun:
        ch = self._conv.channel
        if ch.observed:
            c = self._call
            ch.publish(
                ToolCallStarted(
                    tool_call_id=c.id,
                    name=c.name,
                    arguments=c.arguments,
                    title=self._title,
                    kind=self._kind,
                )
            )
        return self

    def finish(self, result: str) -> ChatMessageTool:
        """The tool succeeded with ``result``: append it for the model and report it."""
        return self._end(result, None)

    def fail(self, error: str) -> ChatMessageTool:
        """The tool failed: the model reads ``error`` as the call's result."""
        return self._end(error, error)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        if self._done:
            return
        if exc is None:
            self._end("", None)
            return
        self._done = True
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            self._report("cancelled", "", None)
        else:
            self._report("failed", "", describe(exc))

    def _end(self, content: str, error: str | None) -> ChatMessageTool:
        if self._done:
            raise RuntimeError("this tool call has already finished")
        self._done = True
        c = self._call
        message = ChatMessageTool(tool_call_id=c.id, function=c.name, content=content, error=error)
        self._report("failed" if error is not None else "completed", content, error)
        self._conv.append(message)
        return message

    def _report(
        self, status: Literal["completed", "failed", "cancelled"], content: str, error: str | None
    ) -> None:
        ch = self._conv.channel
        if ch.observed:
            ch.publish(
                ToolCallFinished(
                    tool_call_id=self._call.id,
                    name=self._call.name,
                    status=status,
                    content=content,
                    error=error,
                )
            )
