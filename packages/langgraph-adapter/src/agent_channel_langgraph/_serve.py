"""A compiled LangGraph graph as the consumer of its execution's channel.

The loop mirrors the ReAct loop's discipline with LangGraph's own seams. The graph runs as
a copy with a checkpointer of the adapter's (``InMemorySaver``), its tool nodes wrapped
(``_tools``). Each operator prompt starts a thread seeded with the whole conversation. When
a tool step's results land and operators have queued messages, the run is asked to stop at
the step's end (``RunControl.request_drain()``, checked by LangGraph before its next step);
the messages are written with ``aupdate_state(..., as_node=<the tool node>)`` and the run
resumes: they reach the next model call after the tool results, in post order, once each
(F2). The stream is read by a task of its own: an interrupt cancels that task
(``Task.cancel()``; cancelling a scope around the stream leaves LangGraph's running tool
going to its end), which stops the model stream or the tools in flight; the history is
repaired (each unanswered call gets a ``ToolMessage(status="error")``) and the loop waits
for the redirect, which continues the same conversation (F3). Model text streams as
``ModelDelta``s (``stream_mode="messages"``), each step's messages are shown as they land
(``"updates"``), each tool call is a keyed region with its events (F4). A node's own
``interrupt()`` is a question to the operator, its answer the ``Command(resume=...)`` (F5).
With a journal, the conversation is checkpointed as LangChain's own message dicts (F6).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from typing import Any, cast

import agent_channel
import anyio
from agent_channel import (
    AgentChannel,
    ChatMessageUser,
    ModelCall,
    fold,
)
from agent_channel.lowlevel import AdapterLoop
from anyio.streams.memory import MemoryObjectSendStream
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_messages,
    messages_from_dict,
    messages_to_dict,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphDrained, GraphRecursionError
from langgraph.graph.message import add_messages  # pyright: ignore[reportMissingTypeStubs]
from langgraph.runtime import RunControl
from langgraph.types import Command, Interrupt

from ._convert import (
    answered_by_model,
    assistant,
    human,
    repair_history,
    tool_message,
    unanswered,
)
from ._detect import MESSAGES
from ._tools import channelled, tool_nodes

STATE = "langgraph"
"""The checkpoint state's key for the history (its version: 1)."""
DEFAULT_LIMIT = 10007
"""LangGraph's own default step budget for one run (langgraph 1.2)."""
SETTLE = 10.0
"""How long an interrupt waits for the cancelled reader to end (a tool that ignores
cancellation is left behind after it)."""

Body = Callable[[], Awaitable[object]]
Graph = Any
"""A compiled graph (a ``langgraph.pregel.Pregel`` of any state)."""


class LangGraphBody:
    """One execution of ``graph``: what the producer runs (``name``: the graph's own)."""

    def __init__(self, graph: Graph, model: str | None) -> None:
        self.graph = graph
        self.model = model
        self.name = graph.name

    async def __call__(self) -> object:
        return await _Run(self.graph, self.model, agent_channel.agent_channel()).run()


def factory(graph: Graph) -> Callable[[str | None], Body]:
    """``factory(model) -> body`` for ``graph``: ``model`` (``--model``) is passed as
    ``config["configurable"]["model"]``, for a graph that reads it (a compiled graph's
    model is its nodes' own)."""

    def make(model: str | None = None) -> Body:
        return LangGraphBody(graph, model)

    return make


class _Run(AdapterLoop[BaseMessage]):
    """The loop of one execution: the history, the shown conversation, what is pending."""

    state_key = STATE

    def __init__(self, graph: Graph, model: str | None, ch: AgentChannel) -> None:
        super().__init__(ch)
        self.saver = InMemorySaver()
        self.graph: Graph = channelled(graph, ch, checkpointer=self.saver)
        self.after = tool_nodes(graph)
        self.model = model
        self.live: list[BaseMessage] | None = None  # the history with the running steps'
        self.paused: str | None = None  # the tool node whose step the run stopped after
        self.threads = 0
        configured: Any = _field(graph.config, "recursion_limit")
        self.limit = int(
            configured or os.environ.get("LANGGRAPH_DEFAULT_RECURSION_LIMIT", DEFAULT_LIMIT)
        )

    # -- the loop (AdapterLoop's) ----------------------------------------------------

    async def prompt(self, resume: bool) -> None:
        """One operator prompt: a thread seeded with the conversation, streamed step by
        step until the graph ends, operators' messages fed after each tool step."""
        self.history.extend(human(u) for u in self.users)
        self.users.clear()
        self.checkpoint()
        config = await self.thread()
        for m in self.history:  # ids of the adapter's own, so the graph's copies are known
            m.id = m.id or str(uuid.uuid4())
        inputs: Any = {MESSAGES: list(self.history)}
        while True:
            with contextlib.suppress(GraphDrained):  # stopped after a tool step: see below
                await self.read(inputs, config)
            state = await self.graph.aget_state(config)
            self.history = list(state.values.get(MESSAGES) or [])
            asked = [i for t in state.tasks for i in t.interrupts]
            if asked:  # a node's own interrupt(): the operator answers it
                inputs = Command(resume=await _answers(asked))
                continue
            if not state.next:
                self.output = state.values
                self.checkpoint()
                await self.saver.adelete_thread(str(self.threads))  # the history holds it
                return
            # Drained after a tool step (operators' messages were queued): they go to the
            # next model call, after the step's results, as if the tool node wrote them.
            self.take(fold(self.ch.drain()))  # inside the scope a Cancel stays for the scope
            step: int = state.metadata["step"] if state.metadata else 0
            if self.users:
                step += 1  # the update is a step of its own
                fed = [human(u) for u in self.users]
                self.users.clear()
                await self.graph.aupdate_state(config, {MESSAGES: fed}, as_node=self.paused)
                self.history.extend(fed)
            self.checkpoint()
            inputs = None
            # The graph's step budget counts from the prompt's start, not from each resume:
            # LangGraph's stop (and ``remaining_steps``) stay where one run would put them.
            left = self.limit - step - 1
            if left < 0:
                raise GraphRecursionError(
                    f"Recursion limit of {self.limit} reached without hitting a stop condition."
                )
            config = {**config, "recursion_limit": max(1, left)}

    async def read(self, inputs: Any, config: Any) -> None:
        """Stream the thread until it ends or pauses. A task of its own reads LangGraph's
        stream and hands each chunk over (unbuffered: the graph goes on only once this
        task, the channel's consumer, has taken the chunk, so a model answer is
        checkpointed before its tools start). An interrupt cancels that task
        (``Task.cancel()``), which stops LangGraph's model call or tools in flight, and
        waits for it to end before it is answered (S5)."""
        send, receive = anyio.create_memory_object_stream[tuple[str, Any]](0)
        control = RunControl()
        task = asyncio.ensure_future(self.pump(inputs, config, control, send))
        self.live = list(self.history)
        self.paused = None
        calls: dict[str, ModelCall] = {}  # streaming, by the chunks' message id
        try:
            with ExitStack() as stack, receive:
                async for mode, chunk in receive:
                    if mode == "messages":
                        self.streamed(chunk, calls, stack)
                    elif mode == "updates":
                        for node, update in chunk.items():
                            if node.startswith("__"):
                                continue
                            self.landed(_messages(update), calls)
                            if node in self.after:
                                self.paused = node
                                self.after_tool(control)
                for call in calls.values():  # streamed, never landed (a subgraph's own)
                    call.finish()
        except BaseException:
            task.cancel()
            await _settled(task)
            raise
        await task  # ended: its error, if any

    async def pump(
        self,
        inputs: Any,
        config: Any,
        control: RunControl,
        send: MemoryObjectSendStream[tuple[str, Any]],
    ) -> None:
        graph: Any = self.graph
        async with send:
            async for item in graph.astream(
                inputs, config, stream_mode=["messages", "updates"], control=control
            ):
                await send.send(item)

    def after_tool(self, control: RunControl) -> None:
        """A tool call's result landed: if operators queued messages, the run is asked to
        stop at the step's end (``RunControl.request_drain``: LangGraph checks it before
        the next step), where :meth:`prompt` hands them over. The graph is still waiting
        for this task to take the chunk, so the request is in before the next step."""
        self.take(fold(self.ch.drain()))  # inside the scope a Cancel stays for the scope
        if self.users:
            control.request_drain("operator messages")

    def streamed(self, chunk: Any, calls: dict[str, ModelCall], stack: ExitStack) -> None:
        """A piece of a model's answer, as it streams."""
        message, meta = chunk
        if not isinstance(message, AIMessageChunk):
            return  # a node's whole message: shown with its step's updates
        if meta.get("langgraph_node") in self.after:
            return  # a model a tool calls is the tool's business
        key = message.id or ""
        call = calls.get(key)
        if call is None:
            call = calls[key] = stack.enter_context(self.conv.model_call(self.model))
        for block in message.content_blocks:
            if block["type"] == "text":
                call.text(block["text"])
            elif block["type"] == "reasoning":
                call.reasoning(str(block.get("reasoning") or ""))

    def landed(self, messages: list[BaseMessage], calls: dict[str, ModelCall]) -> None:
        """A step's messages: into the history and the shown conversation."""
        if not messages:
            return
        live = self.live or []
        known = {m.id for m in live}
        merged: Any = add_messages(live, messages)  # pyright: ignore[reportArgumentType]
        self.live = list(merged)
        for m in messages:
            if m.id in known:
                continue  # one the graph had (a subgraph returns its whole state): shown
            if isinstance(m, AIMessage):
                call = calls.pop(m.id or "", None)
                if call is None:  # not streamed: started and finished at once
                    with self.conv.model_call(self.model) as call:
                        call.finish(assistant(m, call.message_id, self.model))
                else:
                    call.finish(assistant(m, call.message_id, self.model))
                if m.tool_calls:  # ahead of its tool calls: a restart knows them
                    self.checkpoint(items=self.live)
            elif isinstance(m, ToolMessage):
                self.conv.append(tool_message(m))
            elif isinstance(m, HumanMessage):  # a node's own
                self.conv.append(ChatMessageUser(content=m.text))

    async def thread(self) -> Any:
        """A fresh thread (the last one's checkpoints dropped: the history holds what a
        prompt needs, and the saver stays the size of one prompt's steps)."""
        if self.threads:  # one an interrupt left
            await self.saver.adelete_thread(str(self.threads))
        self.threads += 1
        configurable: dict[str, Any] = {"thread_id": str(self.threads)}
        if self.model:
            configurable["model"] = self.model
        return {"configurable": configurable}

    # -- pieces ------------------------------------------------------------------------

    def settle(self) -> None:
        """After an interrupt: the history as the stopped steps left it (what landed before
        the stop; a model answer cut off is not in it), its calls repaired in :meth:`stop`."""
        if self.live is not None:
            self.history = list(self.live)
        self.live = None

    def repair_history(self, text: str) -> set[str]:
        return {m.tool_call_id for m in repair_history(self.history, text)}

    # -- durability (F6) ---------------------------------------------------------------

    def has_unanswered(self) -> bool:
        return bool(unanswered(self.history))

    def resumes(self) -> bool:
        return not answered_by_model(self.history)

    def dump(self, history: list[BaseMessage]) -> object:
        return messages_to_dict(history)

    def load(self, data: object) -> list[BaseMessage]:
        return messages_from_dict(cast("Any", data))


def _messages(update: Any) -> list[BaseMessage]:
    """The messages one node's update writes (a dict, or a list of them)."""
    out: list[BaseMessage] = []
    for u in _listed(update):
        written: Any = _field(u, MESSAGES)
        if written is not None:
            out.extend(convert_to_messages(_listed(written)))
    return out


def _field(value: Any, key: str) -> Any:
    """``value[key]`` when ``value`` is a dict that has it, else ``None``."""
    return cast("dict[str, Any]", value).get(key) if isinstance(value, dict) else None


def _listed(value: Any) -> list[Any]:
    return cast("list[Any]", value) if isinstance(value, list) else [value]


async def _answers(asked: list[Interrupt]) -> dict[str, object]:
    """Each interrupt's value asked of the operator: its answer resumes it."""
    answers: dict[str, object] = {}
    for it in asked:
        text, choices = _question(it.value)
        answer = await agent_channel.ask_user(text, choices)
        answers[it.id] = answer.for_model()
    return answers


def _question(value: Any) -> tuple[str, list[str]]:
    """An interrupt's value as a question: a string, or ``{"question": ..., "choices":
    [...]}``; anything else is shown as its JSON."""
    if isinstance(value, str):
        return value, []
    question: Any = _field(value, "question")
    if isinstance(question, str):
        choices: list[Any] = list(_field(value, "choices") or ())
        return question, [str(c) for c in choices]
    return json.dumps(value, default=str), []


async def _settled(task: asyncio.Future[None]) -> None:
    """Wait, shielded, for the cancelled reader: its tools have then ended and published
    their end, before the interrupt is answered (S5)."""
    if task.done():
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(SETTLE):
        await asyncio.wait((task,))
