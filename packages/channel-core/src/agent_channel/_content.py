"""Content parts shared by channel items and chat messages."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

# Every model of the core builds its validator at first use (``defer_build``), not when
# its class is defined: that is most of what defining it costs. pydantic makes first-use
# builds thread-safe from 2.14 on, hence the core's lower bound.


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ContentText(_Part):
    """Plain text."""

    type: Literal["text"] = "text"
    text: str


class ContentReasoning(_Part):
    """Model reasoning (a thought), kept apart from the answer text."""

    type: Literal["reasoning"] = "reasoning"
    reasoning: str


class ContentImage(_Part):
    """An image: base64 ``data`` with its ``mime_type``, or a ``uri``."""

    type: Literal["image"] = "image"
    mime_type: str
    data: str | None = None
    uri: str | None = None


class ContentResourceLink(_Part):
    """A reference to a resource the agent may read (a file, a URL)."""

    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str
    mime_type: str | None = None
    description: str | None = None


class ContentResource(_Part):
    """An embedded resource: its text travels with the message as context."""

    type: Literal["resource"] = "resource"
    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None


Content = Annotated[
    ContentText | ContentReasoning | ContentImage | ContentResourceLink | ContentResource,
    Field(discriminator="type"),
]
"""Any content part."""


def content_text(content: str | tuple[Content, ...]) -> str:
    """The plain text of ``content``: text parts joined, other parts left out."""
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in content if isinstance(p, ContentText))
