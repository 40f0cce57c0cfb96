"""LangChain's messages seen as the core's, for operators, and the history's repair.

The history (the graph's ``messages``: LangChain ``BaseMessage``s) is what the model reads
and what a restart restores; the core's conversation is what every operator surface shows.
Only the adapter writes either.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agent_channel import (
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    Content,
    ContentImage,
    ContentReasoning,
    ContentResource,
    ContentResourceLink,
    ContentText,
    ToolCall,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage


def human(message: ChatMessageUser) -> HumanMessage:
    """An operator's message as LangChain's user message: text as text, an image as an
    image block (inline data or its URL), a resource as the text the model can read of it."""
    if isinstance(message.content, str):
        return HumanMessage(content=message.content)
    parts: list[str | dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, ContentText):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ContentImage):
            url = f"data:{part.mime_type};base64,{part.data}" if part.data is not None else part.uri
            if url is not None:
                parts.append({"type": "image_url", "image_url": {"url": url}})
        elif isinstance(part, ContentResourceLink):
            parts.append({"type": "text", "text": f"[resource {part.name}: {part.uri}]"})
        elif isinstance(part, ContentResource):
            parts.append({"type": "text", "text": f"[resource {part.uri}]\n{part.text or ''}"})
    return HumanMessage(content=parts)


def text_of(message: BaseMessage) -> str:
    """A message's text (its text blocks joined)."""
    return message.text


def reasoning_of(message: BaseMessage) -> str:
    """A message's reasoning, from LangChain's standard content blocks."""
    blocks: Any = getattr(message, "content_blocks", None) or []
    return "".join(str(b.get("reasoning") or "") for b in blocks if b.get("type") == "reasoning")


def calls_of(message: AIMessage) -> tuple[ToolCall, ...]:
    """The message's tool calls, as the core's."""
    return tuple(
        ToolCall(id=str(c.get("id") or ""), name=c["name"], arguments=dict(c["args"]))
        for c in message.tool_calls
    )


def assistant(message: AIMessage, message_id: str, model: str | None) -> ChatMessageAssistant:
    """A model's answer as the core's assistant message (its text and its tool calls)."""
    text, thought = text_of(message), reasoning_of(message)
    content: str | tuple[Content, ...] = text
    if thought:  # kept apart from the answer, as every client shows it
        content = (ContentReasoning(reasoning=thought), ContentText(text=text))
    return ChatMessageAssistant(
        id=message_id, content=content, tool_calls=calls_of(message), model=model
    )


def tool_message(message: ToolMessage) -> ChatMessageTool:
    """A tool's result as the core's tool message (an error when its status says so)."""
    content = message.content if isinstance(message.content, str) else message.text
    if not content and not isinstance(message.content, str):
        content = json.dumps(message.content, default=str)
    return ChatMessageTool(
        tool_call_id=message.tool_call_id,
        function=message.name,
        content=content,
        error=content if message.status == "error" else None,
    )


def unanswered(history: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The tool calls of the last model answer that no later tool message answers."""
    at = next(
        (i for i in range(len(history) - 1, -1, -1) if isinstance(history[i], AIMessage)), None
    )
    if at is None:
        return []
    answer = history[at]
    assert isinstance(answer, AIMessage)
    answered = {m.tool_call_id for m in history[at + 1 :] if isinstance(m, ToolMessage)}
    return [dict(c) for c in answer.tool_calls if c.get("id") not in answered]


def repair_history(history: list[BaseMessage], text: str) -> list[ToolMessage]:
    """Give each unanswered call of the last answer a ``ToolMessage(status="error")``
    reading ``text``, after the messages that follow it; returns those added."""
    added = [
        ToolMessage(content=text, tool_call_id=str(c.get("id")), name=c["name"], status="error")
        for c in unanswered(history)
    ]
    history.extend(added)
    return added


def answered_by_model(history: Sequence[BaseMessage]) -> bool:
    """Whether the history ends with the model's answer (nothing for it to read after)."""
    return not history or isinstance(history[-1], AIMessage)
