"""An Agents SDK agent as the consumer of its execution's channel.

The loop mirrors the ReAct loop's discipline with the SDK's own seams. Each operator prompt
runs inside one ``scope()`` as a series of streamed runs (``Runner.run_streamed``), one per
turn: once a turn's tool calls are known the run is told ``cancel(mode="after_turn")``, so
it runs those tools and stops before its next model call; the adapter then drains what
operators queued and starts the next run on ``to_input_list()`` plus their messages, which
so reach the next model request after the tool results, in post order, once each (F2). An
interrupt cancels the scope; the adapter then ``cancel()``s the run, which stops the model
stream or the tool in flight, and repairs the history itself (each call keeps its call and
gets a ``function_call_output`` saying it was cancelled), then waits for the redirect (F3).
Model text streams as ``ModelDelta``s, each tool call is a keyed region with its events
(``_tools``), and the conversation operators read is kept in step (F4). With a journal, the
history is checkpointed as the SDK's own input items (F6).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from typing import Any, cast

import anyio
from agent_channel import (
    AgentChannel,
    agent_channel,
    fold,
)
from agent_channel.lowlevel import AdapterLoop
from agents import (
    Agent,
    RawResponsesStreamEvent,
    RunConfig,
    RunItemStreamEvent,
    Runner,
    TResponseInputItem,
)

from ._convert import (
    Item,
    answered_by_model,
    as_json,
    assistant,
    repair_history,
    tool_message,
    unanswered,
    user_item,
)
from ._tools import channelled

STATE = "openai_agents"
"""The checkpoint state's key for the history (its version: 1)."""

Body = Callable[[], Awaitable[object]]


class OpenAIAgentsBody:
    """One execution of ``agent``: what the producer runs (``name``: the agent's own)."""

    def __init__(self, agent: Agent[Any], model: str | None) -> None:
        self.agent = agent
        self.model = model
        self.name = agent.name

    async def __call__(self) -> object:
        return await _Run(self.agent, self.model, agent_channel()).run()


def factory(agent: Agent[Any]) -> Callable[[str | None], Body]:
    """``factory(model) -> body`` for ``agent``: ``model`` (``--model``) overrides its own
    (``RunConfig(model=...)``)."""

    def make(model: str | None = None) -> Body:
        return OpenAIAgentsBody(agent, model)

    return make


class _Run(AdapterLoop[Item]):
    """The loop of one execution: the history, the shown conversation, what is pending."""

    state_key = STATE

    def __init__(self, agent: Agent[Any], model: str | None, ch: AgentChannel) -> None:
        super().__init__(ch)
        self.agent = channelled(agent, ch)  # the agent whose turn is next (handoffs move it)
        self.clones: dict[int, Agent[Any]] = {id(agent): self.agent, id(self.agent): self.agent}
        self.model = model
        self.config = RunConfig(model=model) if model else None
        self.streamed: list[Item] = []  # the items the run in progress has streamed so far
        self.names: dict[str, str] = {}  # call id -> tool name, for results
        self.live: Any = None  # the streamed run in progress

    # -- the loop (AdapterLoop's) ----------------------------------------------------

    async def prompt(self, resume: bool) -> None:
        """One operator prompt: a run per turn until the model answers without tools."""
        while True:
            self.history.extend(user_item(u) for u in self.users)
            self.users.clear()
            self.checkpoint()
            if await self.turn():
                return
            folded = fold(self.ch.drain())  # inside the scope a Cancel stays for the scope
            self.take(folded)

    async def turn(self) -> bool:
        """One streamed run stopped after its first turn; returns whether the model
        answered (no tool calls, or the SDK ended the run on a tool's output)."""
        self.streamed = []
        items = cast("list[TResponseInputItem]", list(self.history))  # JSON the SDK reads
        result = Runner.run_streamed(self.agent, items, run_config=self.config)
        self.live = result
        called = False
        with ExitStack() as stack:
            call: Any = None
            try:
                async for event in result.stream_events():
                    if isinstance(event, RawResponsesStreamEvent):
                        data: Any = event.data
                        kind = getattr(data, "type", "")
                        if call is None:
                            call = stack.enter_context(self.conv.model_call(self.model_name()))
                        if kind == "response.output_text.delta":
                            call.text(data.delta)
                        elif kind in (
                            "response.reasoning_summary_text.delta",
                            "response.reasoning_text.delta",
                        ):
                            call.reasoning(data.delta)
                        elif kind == "response.completed":
                            output = data.response.output
                            call.finish(assistant(output, call.message_id, self.model_name()))
                            stack.close()
                            call = None
                    elif isinstance(event, RunItemStreamEvent):
                        item: Any = event.item
                        self.streamed.append(as_json([item.to_input_item()])[0])
                        if event.name == "tool_called":
                            raw = item.raw_item
                            name = getattr(raw, "name", None)
                            call_id = getattr(raw, "call_id", None)
                            if name is not None and call_id is not None:
                                self.names[call_id] = name
                            if not called:  # this turn's tools run, then the run stops
                                called = True
                                result.cancel(mode="after_turn")
                            # ahead of its tools: a restart knows the call
                            self.checkpoint(items=[*self.history, *self.streamed])
                        elif event.name == "tool_output":
                            raw = item.raw_item
                            call_id = str(_get(raw, "call_id") or "")
                            self.conv.append(
                                tool_message(call_id, self.names.get(call_id, ""), item.output)
                            )
            except BaseException:
                result.cancel()  # stops the model stream or the tools in flight
                await _settled(result.run_loop_task)
                raise
        self.live = None
        self.agent = self.clone(result.last_agent)  # after a handoff, the agent handed to
        self.history = as_json(result.to_input_list())
        self.streamed = []
        self.checkpoint()
        if not called or result.final_output is not None:
            self.output = result.final_output
            return True
        return False

    # -- pieces ------------------------------------------------------------------------

    def settle(self) -> None:
        """After an interrupt: the history as the stopped run left it, its unanswered calls
        kept (``to_input_list()`` would drop them; they are repaired in :meth:`stop`)."""
        if self.live is not None:
            self.history = [*self.history, *self.streamed]
        self.live = None
        self.streamed = []

    def repair_history(self, text: str) -> set[str]:
        return {str(i["call_id"]) for i in repair_history(self.history, text)}

    def clone(self, agent: Agent[Any]) -> Agent[Any]:
        """``agent`` with its function tools seen (:func:`channelled`), made once each."""
        made = self.clones.get(id(agent))
        if made is None:
            made = self.clones[id(agent)] = channelled(agent, self.ch)
            self.clones[id(made)] = made
        return made

    def model_name(self) -> str | None:
        if self.model:
            return self.model
        model: Any = self.agent.model
        if model is None or isinstance(model, str):
            return model
        return getattr(model, "model", None) or type(model).__name__

    # -- durability (F6) ---------------------------------------------------------------

    def has_unanswered(self) -> bool:
        return bool(unanswered(self.history))

    def resumes(self) -> bool:
        return not answered_by_model(self.history)

    def dump(self, history: list[Item]) -> object:
        return history  # the SDK's input items are JSON already

    def load(self, data: object) -> list[Item]:
        return cast("list[Item]", list(cast("list[object]", data)))


SETTLE = 10.0
"""How long an interrupt waits for the SDK's run to end after ``cancel()`` (a tool that
ignores cancellation is left behind after it)."""


async def _settled(task: asyncio.Task[Any] | None) -> None:
    """Wait, shielded, for the run's task that ``cancel()`` cancelled: its tools have then
    ended and published their end, before the interrupt is answered (S5)."""
    if task is None or task.done():
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(SETTLE):
        await asyncio.wait((task,))


def _get(raw: object, key: str) -> object:
    if isinstance(raw, dict):
        return raw.get(key)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return getattr(raw, key, None)
