"""agent_channel_react: an interruptible ReAct agent loop on agent-channel-core.

The loop drains its channel at every boundary, runs each turn (model call and
tool calls) in one interruptible scope, and publishes the core's execution
events, so any producer can steer it and render it without knowing it.
"""

from typing import TYPE_CHECKING, Any

from ._agent import Agent
from ._children import children_tools
from ._factory import Body, ScriptedAgentFactory, scripted_agent_factory
from ._model import GenerateConfig, Model, ModelOutput, Stream, ToolInfo
from ._nested import as_tool, handoff, run
from ._questions import ask_user
from ._react import (
    CONTINUE_PROMPT,
    DEFAULT_PROMPT,
    AnswerChecker,
    Attempts,
    Limits,
    ReactAgent,
    Submit,
    react,
)
from ._scripted import (
    ModelCall,
    ScriptedModel,
    ScriptExhausted,
    ScriptItem,
    ScriptStep,
    call,
    reply,
    tool_call,
)
from ._state import AgentOutput, AgentState, EndReason
from ._tool import Tool, ToolError, ToolOutput, tool

if TYPE_CHECKING:
    from ._openai import ModelError, OpenAIModel

__version__ = "0.2.0"

_LAZY = {"ModelError", "OpenAIModel"}
"""Names from the OpenAI-compatible adapter: importing it imports ``openai`` (an extra)."""
_OPENAI_HINT = (
    "pip install ./packages/channel-core './packages/react-consumer[openai]' "
    "(from the root of a clone of the repository; not on PyPI yet)"
)
"""How to get the extra today (tests/test_install_hints.py): no index has the packages yet."""


def __getattr__(name: str) -> Any:
    # Only on first use, so the package imports without the ``openai`` extra.
    if name in _LAZY:
        try:
            from . import _openai
        except ModuleNotFoundError as e:
            if e.name != "openai":
                raise
            raise ModuleNotFoundError(
                f"{name} needs the openai extra: {_OPENAI_HINT}",
                name="openai",
            ) from e

        value = getattr(_openai, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CONTINUE_PROMPT",
    "DEFAULT_PROMPT",
    "Agent",
    "AgentOutput",
    "AgentState",
    "AnswerChecker",
    "Attempts",
    "Body",
    "EndReason",
    "GenerateConfig",
    "Limits",
    "Model",
    "ModelCall",
    "ModelError",
    "ModelOutput",
    "OpenAIModel",
    "ReactAgent",
    "ScriptExhausted",
    "ScriptItem",
    "ScriptStep",
    "ScriptedAgentFactory",
    "ScriptedModel",
    "Stream",
    "Submit",
    "Tool",
    "ToolError",
    "ToolInfo",
    "ToolOutput",
    "as_tool",
    "ask_user",
    "call",
    "children_tools",
    "handoff",
    "react",
    "reply",
    "run",
    "scripted_agent_factory",
    "tool",
    "tool_call",
]
