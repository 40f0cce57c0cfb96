"""``load_spec``: the one way a ``module:attr`` string becomes a callable."""

from __future__ import annotations

import os.path

import pytest
from agent_channel import load_spec


def test_a_spec_names_a_callable_nested_names_included() -> None:
    assert load_spec("os.path:join") is os.path.join
    assert load_spec("agent_channel:AgentRef.post") is load_spec("agent_channel:AgentRef").post


@pytest.mark.parametrize("spec", ["os.path", "os.path:", ":join", ""])
def test_a_spec_of_another_shape_says_the_shape(spec: str) -> None:
    with pytest.raises(ValueError, match="expected 'module:attr'"):
        load_spec(spec)


def test_what_is_wrong_comes_back_as_the_import_said_it() -> None:
    with pytest.raises(ModuleNotFoundError, match="no_such_module_here"):
        load_spec("no_such_module_here:x")
    with pytest.raises(AttributeError, match="no_such_name"):
        load_spec("os.path:no_such_name")
    with pytest.raises(TypeError, match=r"os\.path:sep is not callable"):
        load_spec("os.path:sep")
