"""A pydantic-ai agent as the consumer of its execution's channel.

The loop mirrors the ReAct loop's discipline with pydantic-ai's own seams. Each operator
prompt is one ``agent.iter()`` run inside one ``scope()``; the run is driven node by node
so that, before each model request, what operators queued is drained and handed to
``AgentRun.enqueue`` (it lands after the tool results, at that very request: F2). An
interrupt cancels the scope, which cancels the model stream or the tools in flight
(pydantic-ai tears down on cancellation); the history is repaired (each unanswered call
gets a cancelled result) and the loop waits for the operator's redirect, which continues
the same history (F3). Model text streams as ``ModelDelta``s, each tool call is a keyed
region with its events (a capability's ``wrap_tool_execute``), and the conversation
operators read is kept in step, part by part (F4). With a journal, the history is
checkpointed through pydantic-ai's own serialisation at each request (F6).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

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
from pydantic_ai import Agent
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPartDelta,
)

from ._convert import assistant, repair_history, request_parts, unanswered, with_prompt
from ._tools import Channelled

CANCELLED: dict[CancelReason, str] = {
    "user_cancel": "Tool call cancelled by the operator.",
    "limit": "Tool call cancelled by a limit.",
    "system": "Tool call cancelled by the system.",
}
RESTARTED = "Tool call interrupted by a restart."
"""A call in flight when the process died: not run again (it may or may not have taken
effect; pydantic-ai does not say which tools are idempotent)."""
STATE = "pydantic_ai"
"""The checkpoint state's key for the history (its version: 1)."""

Body = Callable[[], Awaitable[object]]


class PydanticAIBody:
    """One execution of ``agent``: what the producer runs (``name``: the agent's own)."""

    def __init__(self, agent: AbstractAgent[Any, Any], model: str | None) -> None:
        self.agent = agent
        self.model = model
        self.name = agent.name

    async def __call__(self) -> object:
        return await _Run(self.agent, self.model, agent_channel()).run()


def factory(agent: AbstractAgent[Any, Any]) -> Callable[[str | None], Body]:
    """``factory(model) -> body`` for ``agent``: ``model`` (``--model``) overrides its own."""

    def make(model: str | None = None) -> Body:
        return PydanticAIBody(agent, model)

    return make


class _Run:
    """The loop of one execution: the history, the shown conversation, what is pending."""

    def __init__(self, agent: AbstractAgent[Any, Any], model: str | None, ch: AgentChannel):
        self.agent = agent
        self.model = model
        self.ch = ch
        self.conv = Conversation(ch)
        self.history: list[ModelMessage] = []
        self.shown: list[int] = []  # per request of the history: how many parts are shown
        self.users: list[ChatMessageUser] = []  # taken, not yet in a run
        self.ours: list[str] = []  # prompts shown, not yet seen in a request
        self.unsent: list[str] = []  # shown, but their run ended before a request took them
        self.live: Any = None  # the pydantic-ai run in progress (its history, interrupted)
        self.tools = Channelled(ch)
        self.output: object = None

    # -- the loop ----------------------------------------------------------------------

    async def run(self) -> object:
        ch = self.ch
        resume = self.restore() if ch.durable else False
        while True:
            if not resume:
                folded = fold(ch.drain())
                if folded.cancel is not None:  # an interrupt between runs: honoured here
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
                    await self.prompt(resume)
            except AgentInterrupted as e:
                self.settle()
                # Let producers act on the cancel (answer their client) before the repair.
                await anyio.lowlevel.checkpoint()
                await self.stop(fold(ch.drain()), e.cancel.reason)
            resume = False

    async def prompt(self, resume: bool) -> None:
        """One pydantic-ai run: the taken messages (or, restored, the history's own next
        request), driven to its end node by node."""
        history = self.history
        prompt: str | None = None
        texts = [*self.unsent, *(u.text for u in self.users)]
        self.users.clear()
        self.unsent.clear()
        if history:
            if texts:
                with_prompt(history, texts)
                self.ours.extend(texts)
        elif texts:
            prompt = "\n\n".join(texts)  # a first run: the agent's system prompt comes first
            self.ours.append(prompt)
        options: dict[str, Any] = {"model": self.model} if self.model else {}
        async with self.agent.iter(
            prompt, message_history=history or None, capabilities=[self.tools], **options
        ) as run:
            self.live = run
            node = run.next_node
            while not Agent.is_end_node(node):
                if Agent.is_model_request_node(node):
                    self.feed(run)
                    async with node.stream(run.ctx) as stream:
                        self.sync(run.all_messages())
                        self.checkpoint()
                        with self.conv.model_call(self.model_name()) as call:
                            async for event in stream:
                                if isinstance(event, PartStartEvent) and isinstance(
                                    event.part, TextPart
                                ):
                                    call.text(event.part.content)
                                elif isinstance(event, PartDeltaEvent):
                                    delta = event.delta
                                    if isinstance(delta, TextPartDelta):
                                        call.text(delta.content_delta)
                                    elif isinstance(delta, ThinkingPartDelta):
                                        call.reasoning(delta.content_delta or "")
                            response = stream.response
                            call.finish(assistant(response, call.message_id))
                        self.history = run.all_messages()
                        self.checkpoint()  # ahead of its tool calls: a restart knows them
                node = await run.next(node)
            self.live = None
            self.sync(run.all_messages())
            self.output = node.data.output
            self.checkpoint()

    # -- pieces ------------------------------------------------------------------------

    def take(self, folded: Folded) -> None:
        """Messages drained: shown now (as the ReAct loop does), given to the next run."""
        self.users.extend(folded.messages)
        self.conv.extend(folded.messages)

    def feed(self, run: Any) -> None:
        """Before a model request: what operators queued since, shown and handed to
        pydantic-ai's own queue for this very request (after its tool results), in order."""
        folded = fold(self.ch.drain())  # inside the scope a Cancel stays for the scope
        self.conv.extend(folded.messages)
        for m in folded.messages:
            self.ours.append(m.text)
            run.enqueue(m.text)

    def settle(self) -> None:
        """After an interrupt: the history as the cancelled run left it; the operators'
        messages it never sent to the model go with the next run (each exactly once)."""
        run, self.live = self.live, None
        if run is not None:
            self.sync(run.all_messages())
        self.unsent.extend(self.ours)
        self.ours.clear()

    def sync(self, history: list[ModelMessage]) -> None:
        """Show the requests' parts not shown yet (responses are shown as they stream)."""
        self.history = history
        shown = self.shown
        shown.extend([0] * (len(history) - len(shown)))
        for i, message in enumerate(history):
            if isinstance(message, ModelRequest) and len(message.parts) > shown[i]:
                fresh = ModelRequest(parts=list(message.parts[shown[i] :]))
                shown[i] = len(message.parts)
                self.conv.extend(request_parts(fresh, self.ours))

    async def stop(self, folded: Folded, reason: CancelReason) -> None:
        """After an interrupt: repair both conversations, then the redirect or a wait."""
        self.repair(CANCELLED[reason])
        if not folded.messages and not folded.other and self.ch.is_live:
            self.checkpoint("cancelled")  # a restart waits again
            folded = await wait_for_message(self.ch, "cancelled")
        self.take(folded)

    def repair(self, text: str) -> None:
        results = repair_history(self.history, text)
        fixed = {r.tool_call_id for r in results}
        for m in repair(self.conv.messages, "user_cancel"):
            if m.tool_call_id in fixed:
                m = m.model_copy(update={"content": text, "error": text})
            self.conv.append(m)
        self.shown_all()  # the repaired request is shown already

    def shown_all(self) -> None:
        self.shown = [len(m.parts) if isinstance(m, ModelRequest) else 0 for m in self.history]

    def model_name(self) -> str | None:
        if self.model:
            return self.model
        model = getattr(self.agent, "model", None)
        return getattr(model, "model_name", None) if model is not None else None

    # -- durability (F6) ---------------------------------------------------------------

    def checkpoint(self, parked: StopReason | None = None) -> None:
        if not self.ch.durable:
            return
        history = ModelMessagesTypeAdapter.dump_python(self.history, mode="json")
        self.ch.checkpoint({STATE: 1, "history": history, "parked": parked})

    def restore(self) -> bool:
        """Take up what a crash left: the history and the shown conversation. Calls that
        were in flight get "interrupted by a restart". Returns whether a run goes on at
        once (the history ends in a request the model has not answered)."""
        restored = self.ch.restored
        state = restored.state if restored is not None else None
        if restored is None or not state or state.get(STATE) != 1:
            return False
        self.conv.messages[:] = restored.messages
        self.history = ModelMessagesTypeAdapter.validate_python(state.get("history") or [])
        self.shown_all()
        if unanswered(self.history):
            self.repair(RESTARTED)
        parked = state.get("parked")
        if restored.wait or parked is not None:
            return False  # parks at the loop's top (live) until a message comes
        return bool(self.history) and isinstance(self.history[-1], ModelRequest)
