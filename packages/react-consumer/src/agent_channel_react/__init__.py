"""agent_channel_react: an interruptible ReAct agent loop on agent-channel-core.

The loop drains its channel at every boundary, runs each turn (model call and
tool calls) in one interruptible scope, and publishes the core's execution
events, so any producer can steer it and render it without knowing it.
"""

from ._agent import Agent
from ._factory import Body, ScriptedAgentFactory, scripted_agent_factory
from ._model import GenerateConfig, Model, ModelOutput, Stream, ToolInfo
from ._nested import as_tool, handoff, run
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

__version__ = "0.1.0"

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
    "ModelOutput",
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
    "call",
    "handoff",
    "react",
    "reply",
    "run",
    "scripted_agent_factory",
    "tool",
    "tool_call",
]
