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
import anyio.lowlevel
from agent_channel import (
    AgentChannel,
    AgentInterrupted,
    CancelReason,
    ChatMessageUser,
    Conversation,
    Folded,
    StopReason,
    agent_channel,
    fold,
    repair,
    wait_for_message,
)
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

CANCELLED: dict[CancelReason, str] = {
    "user_cancel": "Tool call cancelled by the operator.",
    "limit": "Tool call cancelled by a limit.",
    "system": "Tool call cancelled by the system.",
}
RESTARTED = "Tool call interrupted by a restart."
"""A call in flight when the process died: not run again (it may or may not have taken
effect; the SDK does not say which tools are idempotent)."""
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


class _Run:
    """The loop of one execution: the history, the shown conversation, what is pending."""

    def __init__(self, agent: Agent[Any], model: str | None, ch: AgentChannel) -> None:
        self.agent = channelled(agent, ch)  # the agent whose turn is next (handoffs move it)
        self.clones: dict[int, Agent[Any]] = {id(agent): self.agent, id(self.agent): self.agent}
        self.model = model
        self.config = RunConfig(model=model) if model else None
        self.ch = ch
        self.conv = Conversation(ch)
        self.history: list[Item] = []  # what the next run reads
        self.streamed: list[Item] = []  # the items the run in progress has streamed so far
        self.names: dict[str, str] = {}  # call id -> tool name, for results
        self.users: list[ChatMessageUser] = []  # taken, not yet in the history
        self.live: Any = None  # the streamed run in progress
        self.output: object = None

    # -- the loop ----------------------------------------------------------------------

    async def run(self) -> object:
        ch = self.ch
        resume = self.restore() if ch.durable else False
        while True:
            if not resume:
                folded = fold(ch.drain())
                if folded.cancel is not None:  # an interrupt between prompts: honoured here
                    await self.stop(folded, folded.cancel.reason)
                    continue
                self.take(folded)
                if not self.users:
                    if not ch.is_live:
                        ch.stop_reason = "end_turn"
                        self.checkpoint()
                        return self.output
                    self.checkpoint("end_turn")
                    self.take(await wait_for_message(ch, "end_turn"))
                    continue
            try:
                with ch.scope():
                    await self.prompt()
            except AgentInterrupted as e:
                self.settle()
                # Let producers act on the cancel (answer their client) before the repair.
                await anyio.lowlevel.checkpoint()
                await self.stop(fold(ch.drain()), e.cancel.reason)
            resume = False

    async def prompt(self) -> None:
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

    def take(self, folded: Folded) -> None:
        """Messages drained: shown now (as the ReAct loop does), given to the next run."""
        self.users.extend(folded.messages)
        self.conv.extend(folded.messages)

    def settle(self) -> None:
        """After an interrupt: the history as the stopped run left it, its unanswered calls
        kept (``to_input_list()`` would drop them; they are repaired in :meth:`stop`)."""
        if self.live is not None:
            self.history = [*self.history, *self.streamed]
        self.live = None
        self.streamed = []

    async def stop(self, folded: Folded, reason: CancelReason) -> None:
        """After an interrupt: repair both conversations, then the redirect or a wait."""
        self.repair(CANCELLED[reason])
        if not (folded.messages or folded.other) and self.ch.is_live:
            self.checkpoint("cancelled")  # a restart waits again
            folded = await wait_for_message(self.ch, "cancelled")
        self.take(folded)

    def repair(self, text: str) -> None:
        added = repair_history(self.history, text)
        fixed = {str(i["call_id"]) for i in added}
        for m in repair(self.conv.messages, "user_cancel"):
            if m.tool_call_id in fixed:
                m = m.model_copy(update={"content": text, "error": text})
            self.conv.append(m)

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

    def checkpoint(self, parked: StopReason | None = None, items: list[Item] | None = None) -> None:
        if not self.ch.durable:
            return
        history = self.history if items is None else items
        self.ch.checkpoint({STATE: 1, "history": history, "parked": parked})

    def restore(self) -> bool:
        """Take up what a crash left: the history and the shown conversation. Calls that
        were in flight get "interrupted by a restart". Returns whether a run goes on at
        once (the history ends with something the model has not answered)."""
        restored = self.ch.restored
        state = restored.state if restored is not None else None
        if restored is None or not state or state.get(STATE) != 1:
            return False
        self.conv.messages[:] = restored.messages
        history: Any = state.get("history") or []
        self.history = cast("list[Item]", list(history))
        if unanswered(self.history):
            self.repair(RESTARTED)
        if restored.wait or state.get("parked") is not None:
            return False  # parks at the loop's top (live) until a message comes
        return not answered_by_model(self.history)


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
