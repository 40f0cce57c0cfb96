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
from dataclasses import replace
from typing import Any

from agent_channel import (
    AgentChannel,
    agent_channel,
    fold,
)
from agent_channel.lowlevel import AdapterLoop
from pydantic_ai import Agent
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    UserPromptPart,
)

from ._convert import (
    Prompt,
    assistant,
    repair_history,
    request_parts,
    text_of,
    unanswered,
    user_content,
    with_prompt,
)
from ._tools import Channelled

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


class _Run(AdapterLoop[ModelMessage]):
    """The loop of one execution: the history, the shown conversation, what is pending."""

    state_key = STATE

    def __init__(self, agent: AbstractAgent[Any, Any], model: str | None, ch: AgentChannel):
        super().__init__(ch)
        self.agent = agent
        self.model = model
        self.shown: set[tuple[object, ...]] = set()  # the request parts shown, by key (_key)
        self.scanned = 0  # where the next sync starts reading: the last response it saw
        self.ours: list[tuple[str, Prompt]] = []  # shown, not yet in a request
        self.unsent: list[Prompt] = []  # shown; their run ended before sending them
        self.later: list[Prompt] = []  # a first run's prompts after its first (shown)
        self.fresh: list[Prompt] = []  # given to pydantic-ai since the last model call began
        self.fed = False  # some of them were fed during the turn (sent after it began)
        self.redirected = False  # a message fed during the stopped turn never reached the model
        self.streaming: int | None = None  # a response streams: the history's length before
        self.live: Any = None  # the pydantic-ai run in progress (its history, interrupted)
        self.tools = Channelled(ch)

    # -- the loop (AdapterLoop's) ----------------------------------------------------

    def waiting(self) -> bool:
        return bool(self.users or self.unsent)

    async def prompt(self, resume: bool) -> None:
        """One pydantic-ai run: the taken messages (or, restored, the history's own next
        request), driven to its end node by node."""
        history = self.history
        prompts = [*self.unsent, *(user_content(u) for u in self.users)]
        self.users.clear()
        self.unsent.clear()
        first: Prompt | None = None
        if history:
            if prompts:
                with_prompt(history, prompts)
                self.ours.extend((text_of(p), p) for p in prompts)
                self.fresh.extend(prompts)
        elif prompts:  # a first run: the agent's system prompt comes first
            first, *self.later = prompts  # each its own prompt, the later ones enqueued
            self.ours.append((text_of(first), first))
            self.fresh.append(first)
        options: dict[str, Any] = {"model": self.model} if self.model else {}
        async with self.agent.iter(
            first, message_history=history or None, capabilities=[self.tools], **options
        ) as run:
            self.live = run
            node = run.next_node
            while not Agent.is_end_node(node):
                if Agent.is_model_request_node(node):
                    self.feed(run)
                    async with node.stream(run.ctx) as stream:
                        sent = run.all_messages()
                        self.sync(sent)
                        self.checkpoint()
                        self.streaming = len(sent)
                        self.fresh.clear()  # sent: the model has read them
                        self.fed = False
                        with self.conv.model_call(self.model_name()) as call:
                            async for event in stream:
                                if isinstance(event, PartStartEvent):
                                    part = event.part
                                    if isinstance(part, TextPart):
                                        call.text(part.content)
                                    elif isinstance(part, ThinkingPart):
                                        call.reasoning(part.content)
                                elif isinstance(event, PartDeltaEvent):
                                    delta = event.delta
                                    if isinstance(delta, TextPartDelta):
                                        call.text(delta.content_delta)
                                    elif isinstance(delta, ThinkingPartDelta):
                                        call.reasoning(delta.content_delta or "")
                            response = stream.response
                            call.finish(assistant(response, call.message_id))
                        self.streaming = None
                        if self.ch.durable:  # ahead of its tool calls: a restart knows them
                            history = list(run.all_messages())
                            if not history or not isinstance(history[-1], ModelResponse):
                                history.append(response)  # recorded as the node ends
                            self.history = history
                            self.checkpoint()
                node = await run.next(node)
            self.live = None
            self.sync(run.all_messages())
            self.output = node.data.output
            self.checkpoint()

    # -- pieces ------------------------------------------------------------------------

    def feed(self, run: Any) -> None:
        """Before a model request: what operators queued since, shown and handed to
        pydantic-ai's own queue for this very request (after its tool results), in order."""
        folded = fold(self.ch.drain())  # inside the scope a Cancel stays for the scope
        self.conv.extend(folded.messages)
        later, self.later = self.later, []
        for content in [*later, *(user_content(m) for m in folded.messages)]:
            self.ours.append((text_of(content), content))
            self.fresh.append(content)
            run.enqueue(*([content] if isinstance(content, str) else content))
        self.fed = self.fed or bool(folded.messages)

    def settle(self) -> None:
        """After an interrupt: the history as the cancelled run left it, less what the model
        was never sent (a response cut off; prompts fed after the last model call began,
        which pydantic-ai may have recorded): those go with the next run, each once, and
        count as the redirect that came with the interrupt."""
        run, self.live = self.live, None
        if run is not None:
            history = list(run.all_messages())
            if self.streaming is not None:  # a response cut off: nothing partial is kept
                history = history[: self.streaming]
            elif self.fresh:
                history = _unsent(history, {text_of(c) for c in self.fresh})
            self.sync([m for m in history if not _empty(m)])
        # A message fed during the turn came with the interrupt (the ReAct loop would have
        # drained it with the Cancel); the run's own prompts wait with the redirect.
        self.redirected = self.streaming is None and self.fed
        self.streaming = None
        self.fresh.clear()
        self.fed = False
        self.unsent.extend(content for _, content in self.ours)
        self.unsent.extend(self.later)
        self.ours.clear()
        self.later.clear()

    def sync(self, history: list[ModelMessage]) -> None:
        """Show the requests' parts not shown yet (responses are shown as they stream).

        Only what follows the last response seen before is read: a request followed by a
        response no longer grows, so a turn costs the same however long the history.
        """
        self.history = history
        shown = self.shown
        start = self.scanned if self.scanned < len(history) else 0
        for i in range(start, len(history)):
            message = history[i]
            if isinstance(message, ModelResponse):
                self.scanned = i
                continue
            fresh = [p for p in message.parts if _key(p) not in shown]
            if fresh:
                shown.update(_key(p) for p in fresh)
                self.conv.extend(request_parts(ModelRequest(parts=fresh), self.ours))

    def came_with_interrupt(self) -> bool:
        redirected, self.redirected = self.redirected, False
        return redirected

    def repair_history(self, text: str) -> set[str]:
        results = repair_history(self.history, text)
        self.shown.update(_key(r) for r in results)  # shown by the conversation's repair
        return {r.tool_call_id for r in results}

    def shown_all(self) -> None:
        self.shown.update(
            _key(p) for m in self.history if isinstance(m, ModelRequest) for p in m.parts
        )

    def model_name(self) -> str | None:
        if self.model:
            return self.model
        model = getattr(self.agent, "model", None)
        return getattr(model, "model_name", None) if model is not None else None

    # -- durability (F6) ---------------------------------------------------------------

    def adopted(self) -> None:
        self.shown_all()

    def has_unanswered(self) -> bool:
        return bool(unanswered(self.history))

    def resumes(self) -> bool:
        return bool(self.history) and isinstance(self.history[-1], ModelRequest)

    def dump(self, history: list[ModelMessage]) -> object:
        return ModelMessagesTypeAdapter.dump_python(history, mode="json")

    def load(self, data: object) -> list[ModelMessage]:
        return ModelMessagesTypeAdapter.validate_python(data)


def _empty(message: ModelMessage) -> bool:
    return isinstance(message, ModelRequest) and not message.parts


def _unsent(history: list[ModelMessage], texts: set[str]) -> list[ModelMessage]:
    """``history`` without the user prompts reading ``texts`` after its last response."""
    last = max((i for i, m in enumerate(history) if isinstance(m, ModelResponse)), default=-1)
    out = history[: last + 1]
    for m in history[last + 1 :]:
        if isinstance(m, ModelRequest):
            parts = [
                p
                for p in m.parts
                if not (isinstance(p, UserPromptPart) and text_of(p.content) in texts)
            ]
            m = replace(m, parts=parts)
        out.append(m)
    return out


def _key(part: object) -> tuple[object, ...]:
    """What tells a request part from any other, whatever message holds it and after a
    round trip through the serialisation (pydantic-ai may regroup requests)."""
    if isinstance(part, UserPromptPart):
        return ("user", part.timestamp, text_of(part.content))
    return (type(part).__name__, getattr(part, "tool_call_id", ""), getattr(part, "timestamp", ""))
