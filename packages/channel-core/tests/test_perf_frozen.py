"""Frozen tool arguments: what the cheaper freezing keeps and what it may skip.

Arguments a ToolCall already froze are handed on into an event as they are; anything
else (a plain dict, a read-only view someone else can still change) is copied.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import pytest
from agent_channel import ChatMessageAssistant, MessageAppended, ToolCall, ToolCallStarted, thaw
from agent_channel._frozen import freeze
from hypothesis import given
from hypothesis import strategies as st

ARGS: dict[str, Any] = {"path": "a.py", "lines": [1, [2, 3]], "opts": {"deep": {"x": [True]}}}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


def test_a_tool_calls_frozen_arguments_pass_into_its_event_unchanged() -> None:
    call = ToolCall(id="c1", name="edit", arguments=ARGS)
    started = ToolCallStarted(tool_call_id=call.id, name=call.name, arguments=call.arguments)
    assert started.arguments is call.arguments
    assert freeze(call.arguments) is call.arguments
    assert freeze(call.arguments["opts"]) is call.arguments["opts"]


def test_a_read_only_view_of_someone_elses_dict_is_still_copied() -> None:
    theirs: dict[str, Any] = {"path": "a.py", "lines": [1]}
    view = MappingProxyType(theirs)
    started = ToolCallStarted(tool_call_id="c1", name="edit", arguments=view)  # pyright: ignore[reportArgumentType]
    theirs["path"] = "b.py"
    theirs["lines"].append(2)
    assert started.arguments is not view
    assert thaw(started.arguments) == {"path": "a.py", "lines": [1]}


def test_an_already_frozen_mapping_nested_in_new_arguments_stays_read_only() -> None:
    call = ToolCall(id="c1", name="edit", arguments=ARGS)
    again = ToolCall(id="c2", name="edit", arguments={"previous": call.arguments, "more": [{}]})
    assert again.arguments["previous"] is call.arguments
    with pytest.raises(TypeError):
        again.arguments["more"][0]["x"] = 1  # type: ignore[index]


@pytest.mark.parametrize(
    "value",
    [OrderedDict(a=[1]), MappingProxyType({"a": [1]}), ("a", ["b"]), [("a",)], "text", 3, None],
    ids=["ordered-dict", "foreign-proxy", "tuple", "list-of-tuple", "str", "int", "none"],
)
def test_any_mapping_or_sequence_freezes_as_before(value: object) -> None:
    frozen = freeze(value)
    if isinstance(value, str | int) or value is None:
        assert frozen is value
    elif isinstance(value, list | tuple):
        assert isinstance(frozen, tuple)
    else:
        assert type(frozen) is MappingProxyType
        assert frozen is not value
        assert type(frozen["a"]) is tuple


@given(json_values)
def test_freezing_is_deep_idempotent_and_thaws_back(value: Any) -> None:
    frozen = freeze(value)
    assert freeze(frozen) == frozen
    assert json.loads(json.dumps(thaw(frozen))) == json.loads(json.dumps(value))
    stack = [frozen]
    while stack:
        v = stack.pop()
        assert not isinstance(v, dict | list)
        if isinstance(v, MappingProxyType):
            stack.extend(v.values())  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
        elif isinstance(v, tuple):
            stack.extend(v)  # pyright: ignore[reportUnknownArgumentType]


def test_frozen_arguments_read_and_serialise_like_plain_ones() -> None:
    call = ToolCall(id="c1", name="edit", arguments=ARGS)
    args = call.arguments
    assert args == {"path": "a.py", "lines": (1, (2, 3)), "opts": {"deep": {"x": (True,)}}}
    assert "path" in args and args.get("nope") is None and list(args) == ["path", "lines", "opts"]
    assert type(args.copy()) is dict and type(args | {}) is dict
    assert repr(args).startswith("mappingproxy({'path': 'a.py'")
    message = MessageAppended(message=ChatMessageAssistant(tool_calls=(call,)), index=0)
    assert json.loads(message.model_dump_json())["message"]["tool_calls"][0]["arguments"] == ARGS
    assert ToolCall.model_validate_json(call.model_dump_json()) == call


def test_a_tool_call_with_default_arguments_is_frozen_too() -> None:
    call = ToolCall(id="c1", name="noop")
    assert type(call.arguments) is MappingProxyType
    with pytest.raises(TypeError):
        call.arguments["x"] = 1  # type: ignore[index]
    assert freeze(call.arguments) is call.arguments
    assert call.model_dump()["arguments"] == {}
