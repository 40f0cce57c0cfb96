"""pydantic-ai agents for the ACP suites: plain ``pydantic_ai.Agent`` objects (no wrapper),
served by ``--agent pai_agents:NAME`` through the adapter the producer finds by entry point.

Their model is pydantic-ai's own ``FunctionModel``, streaming, following the keywords of
``agents.attach_script`` on the last user prompt: ``gate=NAME`` / ``gates=A,B`` (wait at
test gates), ``block`` (a tool that waits until cancelled), ``quick``, ``say=WORD``,
``hang`` (stream a piece, then never finish), ``choose`` / ``free`` (the ``ask_user`` tool,
as ``question_agents``), ``think``, ``inspect``, ``crash``, anything
else ``echo: <text>``. After the tools of a prompt it answers ``results: ...``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator

import agents
import anyio
from agent_channel_pydantic_ai import ask_user
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingCalls,
    DeltaThinkingPart,
    DeltaToolCall,
    DeltaToolCalls,
    FunctionModel,
)

CUT = "Tool call "
"""How the results the adapter writes for stopped calls begin (cancelled, rejected, cut off)."""


def _since_prompt(messages: list[ModelMessage]) -> tuple[str, list[str]]:
    """The last user prompt's text and the tool results after it."""
    text, results = "", []
    for m in messages:
        if not isinstance(m, ModelRequest):
            continue
        for p in m.parts:
            if isinstance(p, UserPromptPart):
                content = p.content
                text = (
                    content
                    if isinstance(content, str)
                    else "".join(c for c in content if isinstance(c, str))
                )
                results = []
            elif isinstance(p, ToolReturnPart) and p.tool_name == "ask_user":
                results.append(f"answer: {p.content}")  # as question_agents.script
            elif isinstance(p, ToolReturnPart):  # as agents.attach_script: "text (error)"
                content = str(p.content)
                results.append(f"{content} ({content if content.startswith(CUT) else None})")
    return text, results


def _calls(*calls: tuple[str, dict[str, object]]) -> DeltaToolCalls:
    return {
        i: DeltaToolCall(
            name=name, json_args=json.dumps(args), tool_call_id=f"{name}-{os.urandom(4).hex()}"
        )
        for i, (name, args) in enumerate(calls)
    }


def summary(messages: list[ModelMessage]) -> list[dict[str, object]]:
    """What the model read, as ``agents.summary`` reports the ReAct model's input: roles,
    texts, tool calls by name, results with their error."""
    out: list[dict[str, object]] = []
    for m in messages:
        if isinstance(m, ModelResponse):
            text = "".join(p.content for p in m.parts if isinstance(p, TextPart))
            entry: dict[str, object] = {"role": "assistant", "text": text}
            calls = [p.tool_name for p in m.parts if isinstance(p, ToolCallPart)]
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
            continue
        for p in m.parts:
            if isinstance(p, SystemPromptPart):
                out.append({"role": "system", "text": p.content})
            elif isinstance(p, UserPromptPart):
                if isinstance(p.content, str):
                    out.append({"role": "user", "text": p.content})
                else:
                    kinds = ["text" if isinstance(c, str) else "image" for c in p.content]
                    text = "".join(c for c in p.content if isinstance(c, str))
                    out.append({"role": "user", "text": text, "parts": kinds})
            elif isinstance(p, ToolReturnPart):
                content = str(p.content)
                error = None
                if content.startswith(CUT):  # as the ReAct loop's repair marks its own
                    error = "cancelled" if "cancelled" in content else content
                out.append({"role": "tool", "text": content, "error": error})
    return out


async def script(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls | DeltaThinkingCalls]:
    text, results = _since_prompt(messages)
    words = text.split()
    if results and results[-1].startswith("answer: "):
        yield results[-1]
        return
    if results:
        yield "results: " + "; ".join(results)
        return
    for w in words:
        if w.startswith("gate="):
            yield _calls(("gate", {"name": w[5:]}))
            return
        if w.startswith("gates="):
            a, b = w[6:].split(",")
            yield _calls(("gate", {"name": a}), ("gate", {"name": b}))
            return
        if w.startswith("say="):
            yield w[4:]
            return
    for name in ("block", "quick"):  # as agents.script: a text, then the call
        if name in words:
            yield f"calling {name}"
            yield _calls((name, {"why": text}))
            return
    if "choose" in words:  # as question_agents.script
        yield _calls(("ask_user", {"question": "Which colour?", "choices": ["red", "blue"]}))
        return
    if "free" in words:
        yield _calls(("ask_user", {"question": "What is the deadline?"}))
        return
    if "hang" in words:
        yield "thinking about it"
        await anyio.sleep_forever()
    if "inspect" in words:
        yield json.dumps(summary(messages))
        return
    if "think" in words:
        yield {0: DeltaThinkingPart(content="pondering")}
        yield "thought about it"
        return
    if "crash" in words:
        raise RuntimeError("scripted crash")
    yield f"echo: {text}"


# The ReAct suite's own tools, as plain functions (pydantic-ai reads their signatures and
# docstrings): the same gate, block and quick behind both consumers.
gate, block, quick = agents.gate.fn, agents.block.fn, agents.quick.fn


agent = Agent(
    FunctionModel(stream_function=script, model_name="function"),
    system_prompt="You are a test agent.",
    tools=[gate, block, quick, ask_user],
    name="pai-test",
)
"""The suites' pydantic-ai agent, as an author would write it."""

plain = Agent(FunctionModel(stream_function=script, model_name="function"), name="plain")
"""No tools: what ``--model test`` (pydantic-ai's TestModel, which calls every tool) runs."""

not_an_agent = object()
"""F8: an object nothing can serve."""
