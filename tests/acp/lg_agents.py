"""LangGraph graphs for the ACP suites: a plain compiled graph (LangGraph's prebuilt ReAct
agent, no wrapper), served by ``--agent lg_agents:NAME`` through the adapter the producer
finds by entry point.

Their model is a small LangChain chat model (``Scripted``: a ``BaseChatModel`` that
streams), following the keywords of ``agents.attach_script`` on the last user message:
``gate=NAME`` / ``gates=A,B`` (wait at test gates), ``block`` (a tool that waits until
cancelled), ``quick``, ``say=WORD``, ``hang`` (stream a piece, then never finish),
``choose`` / ``free`` (the ``ask_user`` tool, as ``question_agents``), ``think``,
``inspect``, ``crash``, anything else ``echo: <text>``. After the tools of a prompt it
answers ``results: ...``. A gate stopped by an interrupt leaves ``NAME.cancelled`` in the
gates folder, a gate that ran to its end ``NAME.done`` (the F3 trap test reads them).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

import anyio
from agent_channel_langgraph import ask_user
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import ToolCallChunk, tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import create_react_agent
from langgraph.types import interrupt

GATES_ENV = "AGENT_CHANNEL_TEST_GATES"
CUT = "Tool call "
"""How the results the adapter writes for stopped calls begin (cancelled, rejected, cut off)."""


@tool
async def gate(name: str) -> str:
    """Wait until the test opens the gate (creates a file named ``name``).

    Args:
        name: The gate's name.
    """
    folder = Path(os.environ[GATES_ENV])
    try:
        while not (folder / name).exists():  # noqa: ASYNC110 (the test is another process)
            await anyio.sleep(0.01)
    except anyio.get_cancelled_exc_class():
        (folder / f"{name}.cancelled").touch()
        raise
    (folder / f"{name}.done").touch()
    return f"gate {name} opened"


@tool
async def block(why: str) -> str:
    """Wait until cancelled.

    Args:
        why: The prompt that asked for it.
    """
    await anyio.sleep_forever()
    return "unreachable"


@tool
async def quick(why: str) -> str:
    """Answer at once.

    Args:
        why: The prompt that asked for it.
    """
    return "done"


def _text(message: BaseMessage) -> str:
    return message.text


def _since_prompt(messages: Sequence[BaseMessage]) -> tuple[str, list[str]]:
    """The last user message's text and the tool results after it."""
    text, results = "", []
    for m in messages:
        if isinstance(m, HumanMessage):
            text, results = _text(m), []
        elif isinstance(m, ToolMessage) and m.name == "ask_user":
            results.append(f"answer: {m.text}")
        elif isinstance(m, ToolMessage):  # as agents.attach_script: "text (error)"
            out = m.text
            results.append(f"{out} ({out if out.startswith(CUT) else None})")
    return text, results


def summary(messages: Sequence[BaseMessage]) -> list[dict[str, object]]:
    """What the model read, as ``agents.summary`` reports the ReAct model's input: roles,
    texts, tool calls by name, results with their error."""
    out: list[dict[str, object]] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "text": _text(m)})
        elif isinstance(m, HumanMessage):
            entry: dict[str, object] = {"role": "user", "text": _text(m)}
            if not isinstance(m.content, str):
                entry["parts"] = [
                    "image" if isinstance(p, dict) and p.get("type") == "image_url" else "text"
                    for p in m.content
                ]
            out.append(entry)
        elif isinstance(m, AIMessage):
            entry = {"role": "assistant", "text": _text(m)}
            if m.tool_calls:
                entry["tool_calls"] = [c["name"] for c in m.tool_calls]
            out.append(entry)
        elif isinstance(m, ToolMessage):
            text = _text(m)
            error = None
            if text.startswith(CUT):  # as the ReAct loop's repair marks its own
                error = "cancelled" if "cancelled" in text else text
            out.append({"role": "tool", "text": text, "error": error})
    return out


def _call(name: str, args: Mapping[str, object], index: int = 0) -> ToolCallChunk:
    return tool_call_chunk(
        name=name, args=json.dumps(args), id=f"{name}-{os.urandom(4).hex()}", index=index
    )


def script(messages: Sequence[BaseMessage]) -> Iterator[AIMessageChunk | str]:
    """The scripted answer, piece by piece (``"hang"`` and ``"crash"`` are the stream's)."""
    text, results = _since_prompt(messages)
    words = text.split()
    if results and results[-1].startswith("answer: "):
        yield AIMessageChunk(content=results[-1])
        return
    if results:
        yield AIMessageChunk(content="results: " + "; ".join(results))
        return
    for w in words:
        if w.startswith("gate="):
            yield AIMessageChunk(content="", tool_call_chunks=[_call("gate", {"name": w[5:]})])
            return
        if w.startswith("gates="):
            a, b = w[6:].split(",")
            calls = [_call("gate", {"name": a}), _call("gate", {"name": b}, 1)]
            yield AIMessageChunk(content="", tool_call_chunks=calls)
            return
        if w.startswith("say="):
            yield AIMessageChunk(content=w[4:])
            return
    for name in ("block", "quick"):  # as agents.script: a text, then the call
        if name in words:
            yield AIMessageChunk(content=f"calling {name}")
            yield AIMessageChunk(content="", tool_call_chunks=[_call(name, {"why": text})])
            return
    if "choose" in words:  # as question_agents.script
        args = {"question": "Which colour?", "choices": ["red", "blue"]}
        yield AIMessageChunk(content="", tool_call_chunks=[_call("ask_user", args)])
        return
    if "free" in words:
        args = {"question": "What is the deadline?"}
        yield AIMessageChunk(content="", tool_call_chunks=[_call("ask_user", args)])
        return
    if "hang" in words:
        yield AIMessageChunk(content="thinking about it")
        yield "hang"
        return
    if "inspect" in words:
        yield AIMessageChunk(content=json.dumps(summary(messages)))
        return
    if "think" in words:
        yield AIMessageChunk(content=[{"type": "reasoning", "reasoning": "pondering", "index": 0}])
        yield AIMessageChunk(content=[{"type": "text", "text": "thought about it", "index": 1}])
        return
    if "crash" in words:
        yield "crash"
        return
    yield AIMessageChunk(content=f"echo: {text}")


class Scripted(BaseChatModel):
    """A LangChain chat model that streams :func:`script`'s answer (tools: the graph's)."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Scripted:  # type: ignore[override]
        return self

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for piece in script(messages):
            if piece == "hang":
                await anyio.sleep_forever()
            if piece == "crash":
                raise RuntimeError("scripted crash")
            assert isinstance(piece, AIMessageChunk)
            yield ChatGenerationChunk(message=piece)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError("the graph streams")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        merged: AIMessageChunk | None = None
        async for chunk in self._astream(messages):
            piece = chunk.message
            assert isinstance(piece, AIMessageChunk)
            merged = piece if merged is None else merged + piece
        assert merged is not None
        answer = AIMessage(content=merged.content, tool_calls=merged.tool_calls)
        return ChatResult(generations=[ChatGeneration(message=answer)])


with warnings.catch_warnings():  # moved to langchain.agents in LangGraph 1.0, still served
    warnings.simplefilter("ignore")
    graph = create_react_agent(
        Scripted(),
        [gate, block, quick, ask_user],
        prompt="You are a test agent.",
        name="lg-test",
    )
"""The suites' LangGraph agent, as an author would write it."""


class _Counter(TypedDict):
    count: int


def _noop(state: _Counter) -> dict[str, Any]:
    return {}


_builder: StateGraph[Any, Any, Any, Any] = StateGraph(_Counter)
_builder.add_node("count", _noop)
_builder.add_edge(START, "count")
_builder.add_edge("count", END)

no_messages = _builder.compile()
"""F8: a compiled graph whose state holds no ``messages``."""

not_compiled = _builder
"""F8: a graph builder never compiled."""

not_an_agent = object()
"""F8: an object nothing can serve."""


def _pick(state: MessagesState) -> dict[str, Any]:
    """A node of the author's that asks with LangGraph's own ``interrupt()``."""
    answer = interrupt({"question": "Which colour?", "choices": ["red", "blue"]})
    return {"messages": [AIMessage(content=f"picked {answer}")]}


_asking: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
_asking.add_node("pick", _pick)
_asking.add_edge(START, "pick")
_asking.add_edge("pick", END)

asking = _asking.compile()
"""F5: a graph whose node asks the operator through ``interrupt()``."""

_outer: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
_outer.add_node("inner", graph)  # the prebuilt agent as a subgraph node
_outer.add_edge(START, "inner")
_outer.add_edge("inner", END)

nested = _outer.compile()
"""F7: a graph whose one node is a subgraph (the suites' prebuilt agent)."""
