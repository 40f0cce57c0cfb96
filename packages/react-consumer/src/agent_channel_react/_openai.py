"""An OpenAI-compatible chat-completions adapter (OpenAI, Ollama, vLLM, llama.cpp ...).

Needs the ``openai`` extra. It streams (``stream=True`` with usage in the
last chunk), reports text and reasoning deltas as they arrive, and closes the
HTTP response when the call is cancelled, so an interrupted generation stops
costing tokens on the server at once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import anyio
from agent_channel import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    Content,
    ContentImage,
    ContentReasoning,
    ContentResource,
    ContentResourceLink,
    ContentText,
    StopReason,
    ToolCall,
    Usage,
    thaw,
)
from openai import APIConnectionError, AsyncOpenAI

from ._model import GenerateConfig, ModelOutput, Stream, ToolInfo

_FINISH: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "end_turn",
    "function_call": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class ModelError(RuntimeError):
    """The provider failed: it could not be reached, or the stream broke off."""


class OpenAIModel:
    """A chat-completions model reached with the official ``openai`` SDK.

    ``model``, ``base_url`` and ``api_key`` fall back to AGENT_CHANNEL_MODEL
    (or OPENAI_MODEL), OPENAI_BASE_URL and OPENAI_API_KEY. Local servers
    usually need no key; a placeholder is sent then.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AsyncOpenAI | None = None,
        max_retries: int = 2,
    ) -> None:
        name = model or os.environ.get("AGENT_CHANNEL_MODEL") or os.environ.get("OPENAI_MODEL")
        if not name:
            raise ValueError("no model name: pass model= or set AGENT_CHANNEL_MODEL")
        self.name: str | None = name
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or ("none" if base_url else None)
        self.client = client or AsyncOpenAI(
            base_url=base_url, api_key=api_key, max_retries=max_retries
        )

    @property
    def base_url(self) -> str:
        """Where requests go (the client's base URL, without a trailing slash)."""
        return str(self.client.base_url).rstrip("/")

    async def generate(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolInfo],
        config: GenerateConfig,
        stream: Stream,
    ) -> ModelOutput:
        request: dict[str, Any] = {
            "model": self.name,
            "messages": [to_openai(m) for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
        if config.max_tokens is not None:
            request["max_tokens"] = config.max_tokens
        if config.temperature is not None:
            request["temperature"] = config.temperature
        if config.extra:
            request["extra_body"] = dict(config.extra)

        text: list[str] = []
        thinking: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish: str | None = None
        usage: Usage | None = None
        try:
            response = await self.client.chat.completions.create(**request)
        except APIConnectionError as e:
            raise ModelError(
                f"cannot reach the model server at {self.base_url}: {_reason(e)}"
            ) from e
        try:
            async for chunk in response:
                if chunk.usage is not None:
                    u = chunk.usage
                    details = u.completion_tokens_details
                    usage = Usage(
                        input_tokens=u.prompt_tokens,
                        output_tokens=u.completion_tokens,
                        total_tokens=u.total_tokens,
                        reasoning_tokens=details.reasoning_tokens if details else None,
                    )
                for choice in chunk.choices[:1]:
                    delta = choice.delta
                    extra = delta.model_extra or {}
                    r = extra.get("reasoning_content") or extra.get("reasoning")
                    if isinstance(r, str) and r:
                        thinking.append(r)
                        stream.reasoning(r)
                    if delta.content:
                        text.append(delta.content)
                        stream.text(delta.content)
                    for tc in delta.tool_calls or ():
                        slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function is not None:
                            slot["name"] += tc.function.name or ""
                            slot["arguments"] += tc.function.arguments or ""
                    if choice.finish_reason:
                        finish = choice.finish_reason
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await response.close()
            raise
        except Exception as e:
            with anyio.CancelScope(shield=True):
                await response.close()
            raise ModelError(f"{self.name}: the stream failed: {type(e).__name__}: {e}") from e
        if finish is None:
            raise ModelError(f"{self.name}: the stream ended before the model finished")
        content: str | tuple[Content, ...] = "".join(text)
        if thinking:
            content = (
                ContentReasoning(reasoning="".join(thinking)),
                ContentText(text="".join(text)),
            )
        message = ChatMessageAssistant(
            id=stream.message_id,
            content=content,
            tool_calls=tuple(_tool_call(i, c) for i, c in sorted(calls.items())),
            model=self.name,
        )
        return ModelOutput(
            message=message, stop_reason=_FINISH.get(finish, "end_turn"), usage=usage
        )


def _reason(error: BaseException) -> str:
    """The root cause of a connection failure ("Connection refused", "Name or service not
    known"), not the SDK's generic "Connection error." wrapped around it."""
    reason = error
    while True:
        inner = reason.__cause__ or reason.__context__
        if isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if inner is None or isinstance(inner, BaseExceptionGroup):
            break
        reason = inner
    return str(reason) or type(reason).__name__


def _tool_call(index: int, c: dict[str, str]) -> ToolCall:
    raw = c["arguments"].strip() or "{}"
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError:
        arguments = None
    if not isinstance(arguments, dict):
        # An unknown key fails the tool's validation, so the model learns what went wrong.
        arguments = {"invalid_json_arguments": raw}
    return ToolCall(id=c["id"] or f"call_{index}", name=c["name"], arguments=arguments)


def to_openai(message: ChatMessage) -> dict[str, Any]:
    """One chat message in the chat-completions wire shape."""
    if isinstance(message, ChatMessageSystem):
        return {"role": "system", "content": message.text}
    if isinstance(message, ChatMessageUser):
        if isinstance(message.content, str):
            return {"role": "user", "content": message.content}
        return {"role": "user", "content": [_part(p) for p in message.content if _part(p)]}
    if isinstance(message, ChatMessageTool):
        content = message.text
        if message.error is not None:
            content = f"Error: {content or message.error}"
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    out: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(thaw(c.arguments))},
            }
            for c in message.tool_calls
        ]
    return out


def _part(p: Content) -> dict[str, Any] | None:
    if isinstance(p, ContentText):
        return {"type": "text", "text": p.text}
    if isinstance(p, ContentImage):
        url = p.uri if p.data is None else f"data:{p.mime_type};base64,{p.data}"
        return {"type": "image_url", "image_url": {"url": url}} if url else None
    if isinstance(p, ContentResource):
        if p.text is not None:
            body = p.text
        else:
            body = f"(binary content, {p.mime_type or 'unknown type'}, not shown)"
        return {"type": "text", "text": f'<resource uri="{p.uri}">\n{body}\n</resource>'}
    if isinstance(p, ContentResourceLink):
        return {"type": "text", "text": f"[resource: {p.name} <{p.uri}>]"}
    return None  # reasoning is the model's own; it is not sent back as user content
