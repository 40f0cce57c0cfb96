"""The SDK's input items seen as the core's messages, and the history's repair.

The history (the SDK's input-item list, what ``to_input_list()`` gives) is what the model
reads and what a restart restores; the core's conversation is what every operator surface
shows. Only the adapter writes either.
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

from ._tools import CANCELLED_ALONE, REJECTED, arguments

Item = dict[str, Any]
"""One input item of the SDK's history, as JSON (``{"role": "user", ...}``, a
``function_call``, a ``function_call_output``, ...)."""


def user_item(message: ChatMessageUser) -> Item:
    """An operator's message as the SDK's user input item: text as text, an image as an
    image (inline data or its URL), a resource as the text the model can read of it."""
    if isinstance(message.content, str):
        return {"role": "user", "content": message.content}
    parts: list[Item] = []
    for part in message.content:
        if isinstance(part, ContentText):
            parts.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ContentImage):
            url = f"data:{part.mime_type};base64,{part.data}" if part.data is not None else part.uri
            if url is not None:
                parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif isinstance(part, ContentResourceLink):
            parts.append({"type": "input_text", "text": f"[resource {part.name}: {part.uri}]"})
        elif isinstance(part, ContentResource):
            text = f"[resource {part.uri}]\n{part.text or ''}"
            parts.append({"type": "input_text", "text": text})
    return {"role": "user", "content": parts}


def assistant(output: Sequence[Any], message_id: str, model: str | None) -> ChatMessageAssistant:
    """A model response's output items as the core's assistant message."""
    text, thought, calls = "", "", list[ToolCall]()
    for item in output:
        kind = getattr(item, "type", None)
        if kind == "message":
            text += "".join(getattr(c, "text", "") or "" for c in item.content)
        elif kind == "reasoning":
            thought += "".join(s.text for s in item.summary)
        elif kind == "function_call":
            calls.append(
                ToolCall(id=item.call_id, name=item.name, arguments=arguments(item.arguments))
            )
    content: str | tuple[Content, ...] = text
    if thought:  # kept apart from the answer, as every client shows it
        content = (ContentReasoning(reasoning=thought), ContentText(text=text))
    return ChatMessageAssistant(
        id=message_id, content=content, tool_calls=tuple(calls), model=model
    )


def tool_message(call_id: str, name: str, output: object) -> ChatMessageTool:
    """A tool's result as the core's tool message (the adapter's own cuts as errors)."""
    content = output if isinstance(output, str) else json.dumps(output, default=str)
    error = content if content in (REJECTED, CANCELLED_ALONE) else None
    return ChatMessageTool(tool_call_id=call_id, function=name, content=content, error=error)


def as_json(items: Sequence[object]) -> list[Item]:
    """Items as plain JSON (the SDK may hold some as its pydantic models)."""

    def dump(value: object) -> object:
        model_dump = getattr(value, "model_dump", None)
        if callable(model_dump):
            return model_dump(mode="json", exclude_unset=True)
        raise TypeError(f"not JSON: {type(value).__name__}")

    return json.loads(json.dumps(list(items), default=dump))


def unanswered(history: Sequence[Item]) -> list[Item]:
    """The function calls no ``function_call_output`` answers."""
    answered = {i.get("call_id") for i in history if i.get("type") == "function_call_output"}
    return [
        i for i in history if i.get("type") == "function_call" and i.get("call_id") not in answered
    ]


def repair_history(history: list[Item], text: str) -> list[Item]:
    """Keep each unanswered call and give it a ``function_call_output`` reading ``text``
    (the SDK's own ``to_input_list()`` would drop the call instead); returns those added."""
    added = [
        {"type": "function_call_output", "call_id": i["call_id"], "output": text}
        for i in unanswered(history)
    ]
    history.extend(added)
    return added


def answered_by_model(history: Sequence[Item]) -> bool:
    """Whether the history ends with the model's answer (nothing for it to read after)."""
    if not history:
        return True
    last = history[-1]
    return last.get("role") == "assistant" or last.get("type") in ("message", "reasoning")
