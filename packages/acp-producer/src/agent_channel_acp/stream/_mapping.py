"""Pure translations between ACP shapes and the core's: prompt blocks in, updates out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    AudioContentBlock,
    BlobResourceContents,
    ContentToolCallContent,
    EmbeddedResourceContentBlock,
    FileEditToolCallContent,
    ImageContentBlock,
    ResourceContentBlock,
    TerminalToolCallContent,
    TextContentBlock,
    TextResourceContents,
    ToolCallProgress,
    ToolCallStart,
    ToolCallStatus,
    UserMessageChunk,
)
from acp.utils import serialize_params
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
    ToolCallFinished,
    ToolCallStarted,
    ToolKind,
    Usage,
    thaw,
)

from ..wire._errors import WireError
from ..wire._frames import ChunkUpdate, ToolCallEnd, UsageUpdate

_CANCELLED = {"cancelled": "cancelled"}
_CHUNK_KIND: dict[str, Literal["agent_message_chunk", "agent_thought_chunk"]] = {
    "text": "agent_message_chunk",
    "reasoning": "agent_thought_chunk",
}

PromptBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)
ChunkBlock = PromptBlock


def prompt_content(blocks: Sequence[PromptBlock]) -> str | tuple[Content, ...]:
    """ACP prompt blocks as a user message's content; a lone text block stays a plain string.

    Images and resources are passed through (the reference drops them); audio is
    refused because the producer does not advertise it.
    """
    if len(blocks) == 1 and isinstance(blocks[0], TextContentBlock):
        return blocks[0].text
    parts: list[Content] = []
    for b in blocks:
        if isinstance(b, TextContentBlock):
            parts.append(ContentText(text=b.text))
        elif isinstance(b, ImageContentBlock):
            parts.append(ContentImage(mime_type=b.mime_type, data=b.data or None, uri=b.uri))
        elif isinstance(b, ResourceContentBlock):
            parts.append(
                ContentResourceLink(
                    uri=b.uri, name=b.name, mime_type=b.mime_type, description=b.description
                )
            )
        elif isinstance(b, EmbeddedResourceContentBlock):
            r = b.resource
            if isinstance(r, TextResourceContents):
                parts.append(ContentResource(uri=r.uri, text=r.text, mime_type=r.mime_type))
            else:
                parts.append(ContentResource(uri=r.uri, blob=r.blob, mime_type=r.mime_type))
        else:
            raise WireError.invalid_params("audio prompt content is not supported (not advertised)")
    return tuple(parts)


def content_blocks(content: str | tuple[Content, ...]) -> list[ChunkBlock]:
    """The inverse of :func:`prompt_content`, for replaying user messages."""
    if isinstance(content, str):
        return [TextContentBlock(type="text", text=content)] if content else []
    out: list[ChunkBlock] = []
    for p in content:
        if isinstance(p, ContentText):
            out.append(TextContentBlock(type="text", text=p.text))
        elif isinstance(p, ContentImage):
            out.append(
                ImageContentBlock(type="image", mime_type=p.mime_type, data=p.data or "", uri=p.uri)
            )
        elif isinstance(p, ContentResourceLink):
            out.append(
                ResourceContentBlock(
                    type="resource_link",
                    uri=p.uri,
                    name=p.name,
                    mime_type=p.mime_type,
                    description=p.description,
                )
            )
        elif isinstance(p, ContentResource):
            res: TextResourceContents | BlobResourceContents
            if p.text is not None or p.blob is None:
                res = TextResourceContents(uri=p.uri, text=p.text or "", mime_type=p.mime_type)
            else:
                res = BlobResourceContents(uri=p.uri, blob=p.blob, mime_type=p.mime_type)
            out.append(EmbeddedResourceContentBlock(type="resource", resource=res))
    return out


def text_chunk(text: str, message_id: str) -> AgentMessageChunk:
    return AgentMessageChunk(
        session_update="agent_message_chunk",
        content=TextContentBlock(type="text", text=text),
        message_id=message_id,
    )


def thought_chunk(text: str, message_id: str) -> AgentThoughtChunk:
    return AgentThoughtChunk(
        session_update="agent_thought_chunk",
        content=TextContentBlock(type="text", text=text),
        message_id=message_id,
    )


def user_chunks(message: ChatMessageUser) -> list[UserMessageChunk]:
    return [
        UserMessageChunk(session_update="user_message_chunk", content=b, message_id=message.id)
        for b in content_blocks(message.content)
    ]


def assistant_chunks(message: ChatMessageAssistant) -> list[AgentMessageChunk | AgentThoughtChunk]:
    """A whole assistant message as chunks (for non-streamed calls and replay)."""
    content = message.content
    if isinstance(content, str):
        return [text_chunk(content, message.id)] if content else []
    out: list[AgentMessageChunk | AgentThoughtChunk] = []
    for p in content:
        if isinstance(p, ContentReasoning):
            out.append(thought_chunk(p.reasoning, message.id))
        elif isinstance(p, ContentText) and p.text:
            out.append(text_chunk(p.text, message.id))
    return out


def tool_start(
    tool_call_id: str,
    *,
    title: str,
    kind: ToolKind,
    raw_input: object,
    status: ToolCallStatus = "in_progress",
    content: str | None = None,
) -> ToolCallStart:
    return ToolCallStart(
        session_update="tool_call",
        tool_call_id=tool_call_id,
        title=title,
        kind=kind,
        status=status,
        raw_input=raw_input,
        content=_tool_content(content),
    )


def tool_started_update(ev: ToolCallStarted) -> ToolCallProgress:
    """A card already announced (at approval) moves to in_progress."""
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=ev.tool_call_id,
        title=ev.title or ev.name,
        kind=ev.kind,
        status="in_progress",
        raw_input=thaw(ev.arguments),
    )


def tool_end_json(
    tool_call_id: str, status: Literal["completed", "failed"], text: str | None
) -> ToolCallEnd:
    """A final ``tool_call_update`` (``completed`` / ``failed``, ``text`` as its content), as the
    JSON the SDK's schema serialises to. Built directly: it sits on the cancel path."""
    update: ToolCallEnd = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": tool_call_id,
        "status": status,
    }
    if text:
        update["content"] = [{"type": "content", "content": {"type": "text", "text": text}}]
    return update


def tool_finished_json(ev: ToolCallFinished) -> ToolCallEnd:
    """ACP has no ``cancelled`` tool status: a cancelled call ends ``failed``."""
    status = "completed" if ev.status == "completed" else "failed"
    text = ev.content or ev.error or _CANCELLED.get(ev.status)
    return tool_end_json(ev.tool_call_id, status, text)


def chunk_json(kind: str, text: str, message_id: str) -> ChunkUpdate:
    """An ``agent_message_chunk`` (``kind`` "text") or ``agent_thought_chunk`` ("reasoning"), as
    the JSON the SDK's schema serialises to. Built directly: it is by far the most frequent."""
    return {
        "sessionUpdate": _CHUNK_KIND[kind],
        "content": {"type": "text", "text": text},
        "messageId": message_id,
    }


def tool_status_update(tool_call_id: str, status: ToolCallStatus) -> ToolCallProgress:
    return ToolCallProgress(
        session_update="tool_call_update", tool_call_id=tool_call_id, status=status
    )


Card = tuple[str, ToolKind]
"""A tool call's title and kind, as its live card showed them."""

ReplayUpdate = (
    UserMessageChunk | AgentMessageChunk | AgentThoughtChunk | ToolCallStart | ToolCallProgress
)


def message_updates(
    message: ChatMessage,
    results: Mapping[str, ChatMessageTool],
    cards: Mapping[str, Card],
) -> list[ReplayUpdate]:
    """One message of the conversation as the updates a client would have seen (for replay).

    System and tool messages give none (a tool result shows in its call's card); a call's
    card has the title and kind of its live card (``cards``), else its name and ``other``.
    """
    if isinstance(message, ChatMessageUser):
        return list(user_chunks(message))
    if not isinstance(message, ChatMessageAssistant):
        return []
    out: list[ReplayUpdate] = list(assistant_chunks(message))
    for call in message.tool_calls:
        result = results.get(call.id)
        status = "in_progress"
        if result is not None:
            status = "failed" if result.error else "completed"
        title, kind = cards.get(call.id, (call.name, "other"))
        out.append(
            tool_start(
                call.id,
                title=title,
                kind=kind,
                raw_input=thaw(call.arguments),
                status=status,
                content=None if result is None else (result.text or result.error or ""),
            )
        )
    return out


def _tool_content(
    text: str | None,
) -> list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent] | None:
    if not text:
        return None
    block = TextContentBlock(type="text", text=text)
    return [ContentToolCallContent(type="content", content=block)]


def as_json(update: ReplayUpdate) -> dict[str, object]:
    """An update in its wire JSON form."""
    return serialize_params(update)


def usage_update(usage: Usage, window: int) -> UsageUpdate:
    """How full the context window is after a model call (tokens in and out, capped)."""
    used = min(usage.input_tokens + usage.output_tokens, window)
    return {"sessionUpdate": "usage_update", "used": used, "size": window}
