"""pydantic-ai's messages seen as the core's, for operators, and the history's repair.

The history (pydantic-ai's ``ModelMessage`` list) is what the model reads and what a
restart restores; the core's conversation is what every operator surface shows. Only the
adapter writes either: parts are shown once each, as they appear.
"""

from __future__ import annotations

from base64 import b64decode
from collections.abc import Iterator, Sequence
from dataclasses import replace

from agent_channel import (
    ChatMessage,
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
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
)

Prompt = str | list[UserContent]
"""One user prompt's content: its text, or its parts when it has more than text."""


def user_content(message: ChatMessageUser) -> Prompt:
    """An operator's message as pydantic-ai's user content: text as text, an image as an
    image (inline data or its URL), a resource as the text the model can read of it."""
    if isinstance(message.content, str):
        return message.content
    out: list[UserContent] = []
    for part in message.content:
        if isinstance(part, ContentText):
            out.append(part.text)
        elif isinstance(part, ContentImage):
            if part.data is not None:
                out.append(BinaryContent(data=b64decode(part.data), media_type=part.mime_type))
            elif part.uri is not None:
                out.append(ImageUrl(url=part.uri))
        elif isinstance(part, ContentResourceLink):
            out.append(f"[resource {part.name}: {part.uri}]")
        elif isinstance(part, ContentResource):
            out.append(f"[resource {part.uri}]\n{part.text or ''}")
    texts = [c for c in out if isinstance(c, str)]
    return "".join(texts) if len(texts) == len(out) else out


def text_of(content: str | Sequence[object]) -> str:
    """The texts of a prompt's content, joined: how a prompt is matched to its message."""
    if isinstance(content, str):
        return content
    return "".join(c for c in content if isinstance(c, str))


def calls_of(response: ModelResponse) -> tuple[ToolCall, ...]:
    """The response's tool calls, as the core's (arguments as a dict, however streamed)."""
    return tuple(
        ToolCall(id=p.tool_call_id, name=p.tool_name, arguments=p.args_as_dict())
        for p in response.parts
        if isinstance(p, ToolCallPart)
    )


def assistant(response: ModelResponse, message_id: str) -> ChatMessageAssistant:
    """The response as the core's assistant message (its text and its tool calls)."""
    text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
    thought = "".join(p.content for p in response.parts if isinstance(p, ThinkingPart))
    content: str | tuple[Content, ...] = text
    if thought:  # kept apart from the answer, as every client shows it
        content = (ContentReasoning(reasoning=thought), ContentText(text=text))
    return ChatMessageAssistant(
        id=message_id, content=content, tool_calls=calls_of(response), model=response.model_name
    )


def request_parts(request: ModelRequest, ours: list[tuple[str, Prompt]]) -> Iterator[ChatMessage]:
    """What one request part by part adds to the core's conversation.

    The operators' messages were shown as they were taken: a user prompt whose text is the
    oldest of ``ours`` is that one (taken off the list); any other (an author's own) is
    shown. System prompts are not shown: pydantic-ai builds them at the first request, after
    the operator's first message is shown, and no public name gives them earlier.
    """
    for part in request.parts:
        if isinstance(part, SystemPromptPart):
            continue
        if isinstance(part, UserPromptPart):
            text = text_of(part.content)
            if ours and ours[0][0] == text:
                ours.pop(0)
            else:
                yield ChatMessageUser(content=text)
        elif isinstance(part, ToolReturnPart):
            content = part.model_response_str()
            yield ChatMessageTool(
                tool_call_id=part.tool_call_id,
                function=part.tool_name,
                content=content,
                error=None if part.outcome == "success" else content,  # failed, retried, ...
            )


def unanswered(history: Sequence[ModelMessage]) -> list[ToolCallPart]:
    """The tool calls of the last response that no later request answers."""
    at = next(
        (i for i in range(len(history) - 1, -1, -1) if isinstance(history[i], ModelResponse)),
        None,
    )
    if at is None:
        return []
    response = history[at]
    assert isinstance(response, ModelResponse)
    answered = {
        p.tool_call_id
        for m in history[at + 1 :]
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }
    return [
        p for p in response.parts if isinstance(p, ToolCallPart) and p.tool_call_id not in answered
    ]


def repair_history(history: list[ModelMessage], text: str) -> list[ToolReturnPart]:
    """Give each tool call the last response left unanswered a result reading ``text``, in
    the request that follows it (made if there is none); returns the results added."""
    missing = unanswered(history)
    if not missing:
        return []
    results = [
        ToolReturnPart(tool_name=p.tool_name, content=text, tool_call_id=p.tool_call_id)
        for p in missing
    ]
    last = history[-1] if history else None
    if isinstance(last, ModelRequest):
        history[-1] = replace(last, parts=[*last.parts, *results])
    else:
        history.append(ModelRequest(parts=list(results)))
    return results


def with_prompt(history: list[ModelMessage], prompts: Sequence[Prompt]) -> None:
    """Add the operator's ``prompts`` as user prompts of the request the next model call
    sends: the trailing request (after its tool results) or a new one."""
    parts = [UserPromptPart(p) for p in prompts]
    last = history[-1] if history else None
    if isinstance(last, ModelRequest):
        history[-1] = replace(last, parts=[*last.parts, *parts])
    else:
        history.append(ModelRequest(parts=list(parts)))
