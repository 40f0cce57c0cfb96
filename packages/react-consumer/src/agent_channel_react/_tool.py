"""Tools: typed async Python functions the model can call.

The signature is the schema (pydantic builds it and validates the model's
arguments against it) and the docstring is the description, so a tool is
written once, as ordinary code.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast, get_type_hints, overload

from agent_channel import ChatMessage, ToolKind
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ._model import ToolInfo


class ToolError(Exception):
    """Raise from a tool to report a failure the model should see and recover from."""


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool result that also adds messages to the conversation (used by handoffs)."""

    content: str
    messages: tuple[ChatMessage, ...] = ()


ToolFunction = Callable[..., Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Tool:
    """A callable tool: its model-facing description and how to run it."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: ToolFunction
    kind: ToolKind = "other"
    title: str | None = None
    """A format string over the arguments, e.g. ``"Searching {query}"``; shown by producers."""
    needs_approval: bool = True
    """Ask the channel's approver first (the submit tool does not: it has no effects)."""
    wants_conversation: bool = False
    """Pass the conversation so far as the ``conversation`` keyword (handoffs need it)."""
    needs_supervisor: bool = False
    """The tool spawns children (:func:`children_tools`): a loop given it opens the
    execution's supervisor for the run."""
    idempotent: bool = False
    """Safe to run twice: running it again gives the same result and does no harm (a
    lookup, a read, a pure computation). In a durable execution (D4) a call of it that a
    crash cut off is run again after the restart; any other tool's call gets the result
    "interrupted by a restart" instead, since it may or may not have taken effect."""
    _validator: type[BaseModel] | None = field(default=None, repr=False, compare=False)

    @property
    def info(self) -> ToolInfo:
        return ToolInfo(name=self.name, description=self.description, parameters=self.parameters)

    def describe(self, arguments: Mapping[str, Any]) -> str | None:
        """The title for one call; the bare template when the arguments do not fit it.

        The arguments come from the model, so anything can go wrong in formatting
        (a missing key, indexing an int, an attribute a str lacks, a bad format
        spec); none of it may fail the call, or an observed run would differ from
        an unobserved one (only observed runs build titles).
        """
        if self.title is None:
            return None
        try:
            return self.title.format_map(dict(arguments))
        except Exception:
            return self.title

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments coerced to the signature's types; :class:`ToolError` if they don't fit."""
        if self._validator is None:
            return dict(arguments)
        try:
            model = self._validator.model_validate(dict(arguments))
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                for err in e.errors()
            )
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from None
        return {name: getattr(model, name) for name in type(model).model_fields}


@overload
def tool(fn: ToolFunction, /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    kind: ToolKind = "other",
    title: str | None = None,
    idempotent: bool = False,
) -> Callable[[ToolFunction], Tool]: ...
def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    kind: ToolKind = "other",
    title: str | None = None,
    idempotent: bool = False,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Turn a typed async function into a :class:`Tool` (usable bare or with options).

    ``idempotent=True`` declares it safe to run twice (see :attr:`Tool.idempotent`): a call
    a crash cut off is run again when the execution is restored.
    """

    def wrap(f: ToolFunction) -> Tool:
        if not inspect.iscoroutinefunction(f):
            raise TypeError(f"tool {f.__name__!r} must be an async function")
        summary, arg_docs = _parse_docstring(inspect.getdoc(f) or "")
        validator = _arguments_model(f, arg_docs)
        return Tool(
            name=name or f.__name__,
            description=description or summary or f.__name__,
            parameters=_schema(validator),
            fn=f,
            kind=kind,
            title=title,
            idempotent=idempotent,
            _validator=validator,
        )

    return wrap(fn) if fn is not None else wrap


def _arguments_model(f: ToolFunction, docs: dict[str, str]) -> type[BaseModel]:
    hints = get_type_hints(f)
    fields: dict[str, Any] = {}
    for p in inspect.signature(f).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {f.__name__!r}: *args/**kwargs cannot be described to a model")
        annotation = hints.get(p.name, Any)
        default = ... if p.default is p.empty else p.default
        fields[p.name] = (annotation, Field(default, description=docs.get(p.name)))
    return cast(
        type[BaseModel],
        create_model(  # pyright: ignore[reportCallIssue, reportUnknownVariableType]
            f"{f.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        ),
    )


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in cast(dict[str, dict[str, Any]], schema.get("properties", {})).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (text before the first section) and Google-style ``Args:`` entries."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current = ""
    for line in doc.splitlines():
        m = _SECTION.match(line)
        if m:
            section, current = m.group(1), ""
            continue
        if section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters"):
            am = _ARG.match(line)
            if am:
                current = am.group(1).lstrip("*")
                args[current] = am.group(2).strip()
            elif current and line.strip():
                args[current] = f"{args[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), args


def render_result(value: object) -> str:
    """A tool's return value as the text the model reads."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if value is None:
        return ""
    try:
        return json.dumps(value)
    except TypeError:
        return str(value)
