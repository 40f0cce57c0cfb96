"""The ReAct loop, as a consumer of the execution's channel.

One iteration ("turn") is: drain and fold what producers queued, then one
``scope()`` around the model call *and* the tool calls it asks for. An
interrupt anywhere in that region surfaces as ``AgentInterrupted``; the loop
repairs the conversation and waits for the operator (stop-and-wait), unless a
message came with the interrupt, in which case it carries on at once (as it
does when no live producer is attached: nobody could answer the wait).

In a durable execution (``open_channel(journal=...)``) the loop checkpoints at
each boundary (D3): after a drain is folded, after each assistant message (before
its tool calls run, so a restart knows which were in flight), before each park,
and at the end. Restored after a crash (D4), it adopts the stored conversation and
progress, settles the calls that were in flight (an idempotent tool's call runs
again, any other's gets "interrupted by a restart") and goes on where it was.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
from agent_channel import (
    AgentChannel,
    AgentInterrupted,
    Cancel,
    CancelReason,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    Conversation,
    Folded,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    StopReason,
    Supervisor,
    agent_channel,
    agent_supervisor,
    fold,
    new_id,
    open_channel,
    open_supervisor,
    repair,
    wait_for_message,
)

from ._execute import execute_tools, interrupted_result
from ._model import GenerateConfig, Model, ModelOutput, Stream
from ._state import AgentState, EndReason, RunProgress
from ._tool import Tool, tool

if TYPE_CHECKING:
    from agent_channel import Restored

_RESUMED: weakref.WeakSet[AgentChannel] = weakref.WeakSet()
"""Channels whose restored run a loop has taken up: a later run on one starts afresh."""
_NO_IDS: frozenset[str] = frozenset()

DEFAULT_PROMPT = (
    "You are a capable assistant. Work step by step: say briefly what you are about to do, "
    "use the tools available to you, and check their results before relying on them."
)
SUBMIT_PROMPT = (
    "When you have the final answer, call the {submit}() tool with it; that ends the run."
)
CONTINUE_PROMPT = (
    "Go on with the next step. If you already have the final answer, call {submit}() with it."
)
INCORRECT_MESSAGE = (
    "That answer was not accepted. Look at the problem again and submit a better one."
)

AnswerChecker = Callable[[str, AgentState], Awaitable[bool]]
"""Decides whether a submitted answer is correct (``True`` ends the run)."""


@dataclass(frozen=True, slots=True)
class Submit:
    """The submit tool's name and description."""

    name: str = "submit"
    description: str = "Submit your final answer; the run ends with it."


@dataclass(frozen=True, slots=True)
class Attempts:
    """How many answers the model may submit, and how they are judged."""

    attempts: int = 1
    checker: AnswerChecker | None = None
    """Without a checker every answer is accepted."""
    incorrect_message: str = INCORRECT_MESSAGE


@dataclass(frozen=True, slots=True)
class Limits:
    """Ceilings that end a run (or, interactively, a prompt) with a clear reason."""

    max_turns: int | None = None
    """Model calls in the whole run."""
    max_turn_requests: int | None = None
    """Model calls since the last user message; interactively the agent parks instead."""
    message_limit: int | None = None
    """Messages in the conversation."""
    token_limit: int | None = None
    """Total tokens used by the run."""


class ReactAgent:
    """A configured ReAct agent: call it with an :class:`AgentState`."""

    def __init__(
        self,
        *,
        model: Model,
        tools: Sequence[Tool],
        system: str | None,
        submit: Submit | None,
        attempts: Attempts,
        continue_prompt: str,
        limits: Limits,
        config: GenerateConfig,
        name: str | None,
        description: str | None,
    ) -> None:
        self.model = model
        self.submit = submit
        self.attempts = attempts
        self.continue_prompt = continue_prompt
        self.limits = limits
        self.config = config
        self.name = name
        self.description = description
        tools = list(tools)
        if submit is not None:
            tools.append(_submit_tool(submit))
        self.tools = {t.name: t for t in tools}
        if len(self.tools) != len(tools):
            raise ValueError("tool names must be unique")
        self.tool_infos = tuple(t.info for t in tools)
        self.system = system
        self.supervises = any(t.needs_supervisor for t in tools)
        """Its tools spawn children: each run opens the execution's supervisor if it has none."""

    async def __call__(self, state: AgentState, /) -> AgentState:
        if not self.supervises:
            return await _Run(self, state, agent_channel(), None).run()
        async with AsyncExitStack() as stack:
            ch = agent_channel()
            if type(ch) is not AgentChannel:  # outside any execution: it becomes one
                ch = await stack.enter_async_context(open_channel())
            sup = agent_supervisor()  # a child's own, or one its runtime opened
            if sup is None:
                sup = await stack.enter_async_context(open_supervisor())
            return await _Run(self, state, ch, sup).run()


def react(
    *,
    model: Model,
    tools: Sequence[Tool] = (),
    prompt: str | None = DEFAULT_PROMPT,
    submit: bool | Submit = True,
    attempts: int | Attempts = 1,
    on_continue: str | None = None,
    max_turns: int | None = None,
    max_turn_requests: int | None = None,
    message_limit: int | None = None,
    token_limit: int | None = None,
    config: GenerateConfig | None = None,
    name: str | None = None,
    description: str | None = None,
) -> ReactAgent:
    """A ReAct agent: the model reasons and calls tools until it is done.

    With ``submit`` (the default) the run ends when the model calls the submit
    tool; when it stops calling tools it is urged on with ``on_continue``.
    With ``submit=False`` the agent is interactive: an answer without tool
    calls ends the prompt, and the agent parks for the next operator message
    when a live producer is attached (``ref.mark_live()``), or ends otherwise.
    """
    sub = Submit() if submit is True else (submit or None)
    if sub is None and on_continue is not None:
        raise ValueError("on_continue needs the submit tool: without it an answer ends the prompt")
    system = prompt
    if prompt is not None and sub is not None:
        system = f"{prompt}\n\n{SUBMIT_PROMPT.format(submit=sub.name)}"
    return ReactAgent(
        model=model,
        tools=tools,
        system=system,
        submit=sub,
        attempts=Attempts(attempts) if isinstance(attempts, int) else attempts,
        continue_prompt=(on_continue or CONTINUE_PROMPT).replace(
            "{submit}", sub.name if sub else ""
        ),
        limits=Limits(max_turns, max_turn_requests, message_limit, token_limit),
        config=config or GenerateConfig(),
        name=name,
        description=description,
    )


def _submit_tool(submit: Submit) -> Tool:
    async def answer(answer: str) -> str:
        """Submit an answer.

        Args:
            answer: The final answer.
        """
        return answer

    t = tool(name=submit.name, description=submit.description, kind="other", idempotent=True)(
        answer
    )
    return dataclasses.replace(t, needs_approval=False)


class _Run:
    """One call of a :class:`ReactAgent`: the loop and its bookkeeping."""

    def __init__(
        self, agent: ReactAgent, state: AgentState, ch: AgentChannel, sup: Supervisor | None
    ) -> None:
        self.agent = agent
        self.state = state
        self.ch = ch
        self.sup = sup
        self.turns = 0
        self.requests = 0  # model calls since the last user message
        self.submitted = 0  # answers submitted
        self.durable = False  # checkpoints are written (the channel has a journal, D3)
        self.parked: StopReason | None = None  # restored: why the run was waiting
        self.restarted = _NO_IDS  # restored: in-flight calls answered "interrupted" (D4)
        self.held: list[ChatMessage] = []  # tool-added messages waiting for their batch's results
        self.late: list[ChatMessageTool] = []  # results that finished after an unfinished call
        self.call_ids = f"{new_id()}-"  # model call ids: this prefix and the call's number

    # -- the loop ------------------------------------------------------------------

    async def run(self) -> AgentState:
        try:
            return await self.loop()
        except anyio.get_cancelled_exc_class():
            # Outer cancellation (a time limit, a task group shutting down) ends the run
            # where it stands, but the calls it cut off still get one result each, so the
            # caller's state and the published conversation stay well-formed (issue 10).
            self.repair("system")
            raise

    async def loop(self) -> AgentState:
        agent, state, ch = self.agent, self.state, self.ch
        messages = state.messages
        restored = self.restore(messages) if ch.durable else None
        if (
            restored is None
            and agent.system is not None
            and not (messages and isinstance(messages[0], ChatMessageSystem))
        ):
            messages.insert(0, ChatMessageSystem(content=agent.system))
        # The run's one list, shared with the channel (unless the channel already shares
        # one) and announced, system prompt and task included: a client attaching before
        # the first model call sees them. Every later change is an append through it.
        self.conversation = Conversation(ch, messages)
        interactive = agent.submit is None
        resumed: ChatMessageAssistant | None = None  # a restored turn the loop goes on with
        if restored is not None:
            out = state.output
            if out.end is not None:  # it had ended; only the end went unrecorded
                ch.stop_reason = out.stop_reason
                return state
            resumed = await self.resume(restored)
        if (
            resumed is None
            and interactive
            and ch.is_live
            and not any(isinstance(m, ChatMessageUser) for m in messages)
        ):
            self.checkpoint("end_turn")
            self.take(await wait_for_message(ch, "end_turn"))
        while True:
            if resumed is None:
                items = ch.drain()
                if items:
                    await self.absorb(fold(items))
                self.checkpoint()  # what the drain folded in, with its items taken
                hit = self.limit_hit()
                if hit is not None:
                    end, detail = hit
                    if end == "max_turn_requests" and interactive and ch.is_live:
                        self.checkpoint("max_turn_requests")
                        self.take(await wait_for_message(ch, "max_turn_requests"))
                        continue
                    return self.finish_at_limit(end, detail)
            answer: str | None = None
            accepted = False
            try:
                with ch.scope():
                    if resumed is None:
                        output = await self.generate()
                        message, stop_reason = output.message, output.stop_reason
                        self.append(message)
                        # Written ahead of its calls (a restart knows which were in flight)
                        # and of a park (a restart parks again rather than ask the model).
                        self.checkpoint()
                        results: list[ChatMessageTool] = []
                        if message.tool_calls:
                            results = await execute_tools(
                                ch,
                                message,
                                agent.tools,
                                messages,
                                self.append,
                                self.held,
                                self.late,
                            )
                            self.release_held()
                    else:
                        message, resumed = resumed, None
                        stop_reason = state.output.stop_reason or "end_turn"
                        results = await self.rerun(message)
                    if message.tool_calls:
                        answer = self.submission(results)
                        if answer is not None:
                            self.submitted += 1
                            accepted = await self.judge(answer)
            except AgentInterrupted as e:
                # Let producers act on the cancel (answer their client) before the repair.
                await anyio.lowlevel.checkpoint()
                hit = self.ceiling_hit()
                if hit is not None:  # the stopped turn was the last one allowed
                    self.repair(e.cancel.reason)
                    return self.finish_at_limit(*hit)
                await self.stop(fold(ch.drain()), e.cancel)
                continue
            if answer is not None:
                if accepted:
                    return self.finish(
                        "submitted", "the model submitted an answer", "end_turn", answer
                    )
                if self.submitted >= agent.attempts.attempts:
                    detail = f"no accepted answer in {self.submitted} attempt(s)"
                    return self.finish("attempts", detail, "end_turn", answer)
            # A ceiling reached by this turn ends the run here, before a park or a
            # drain could take in (or a prompt add) what the run would never answer.
            hit = self.ceiling_hit()
            if hit is not None:
                return self.finish_at_limit(*hit)
            if answer is not None:
                self.append(ChatMessageUser(content=agent.attempts.incorrect_message))
                continue
            if message.tool_calls:
                continue
            if self.sup is not None:
                # Children's announcements are the next input: one that came while the
                # model spoke is read now, and while children work the run waits for one
                # rather than ending (which would end them) or urging the model on.
                late = ch.drain()
                if late or self.sup.running:
                    await self.absorb(
                        fold(late) if late else await wait_for_message(ch, stop_reason)
                    )
                    continue
            if not interactive:
                self.append(ChatMessageUser(content=agent.continue_prompt))
                continue
            if ch.is_live:
                self.take(await wait_for_message(ch, stop_reason))
                continue
            return self.finish("answered", "the model answered", stop_reason)

    # -- durability (D3, D4) -------------------------------------------------------

    def checkpoint(self, parked: StopReason | None = None) -> None:
        """A boundary (D3): the conversation's new messages, the items drained since the
        last one, and the run's progress, in one transaction. Nothing is built (and
        nothing written) when the channel has no journal. ``parked``: the run is about to
        wait for an operator message (a restart waits again)."""
        if not self.durable:
            return
        out = self.state.output
        progress: dict[str, object] = {
            "react": 1,
            "turns": self.turns,
            "requests": self.requests,
            "submitted": self.submitted,
            "parked": parked,
            "message": None if out.message is None else out.message.id,
            "output": out.model_dump(mode="json", exclude={"message"}),
        }
        self.ch.checkpoint(progress)

    def restore(self, messages: list[ChatMessage]) -> Restored | None:
        """Take up the run a crash left (D4): its conversation and progress, if the channel
        was restored and this run keeps the execution's conversation; else ``None``."""
        ch = self.ch
        try:
            ch.share(messages)  # this run's list is the execution's conversation, or
        except RuntimeError:  # another run's is: that one checkpoints, not this one
            return None
        self.durable = True
        restored = ch.restored
        if restored is None or ch in _RESUMED or not (restored.messages or restored.state):
            return None  # new, taken up already, or cut off before its first boundary
        _RESUMED.add(ch)
        messages[:] = restored.messages  # the system prompt and the task are among them
        try:
            progress = RunProgress.model_validate(restored.state or {})
        except ValueError:  # another consumer's state: the counts start again
            progress = RunProgress()
        self.turns, self.requests = progress.turns, progress.requests
        self.submitted, self.parked = progress.submitted, progress.parked
        out = progress.output
        if progress.message is not None:
            out.message = next(
                (
                    m
                    for m in reversed(messages)
                    if isinstance(m, ChatMessageAssistant) and m.id == progress.message
                ),
                None,
            )
        self.state.output = out
        resume = getattr(self.agent.model, "resume", None)
        if callable(resume):  # a model with a position of its own (a scripted one)
            resume(self.turns, messages)
        return restored

    async def resume(self, restored: Restored) -> ChatMessageAssistant | None:
        """Go on where the restored run was. Returns the last assistant message when the
        loop goes on inside its turn (its calls that were in flight, or what follows an
        answer: a park, the continue prompt); ``None`` to go on at a boundary.

        A run that was parked parks again (when live, as it would); with ``restored.wait``
        it parks until an operator message whatever it was doing, and then no call in
        flight runs again: each gets "interrupted by a restart".
        """
        messages = self.state.messages
        at = next(
            (
                i
                for i in range(len(messages) - 1, -1, -1)
                if isinstance(messages[i], ChatMessageAssistant)
            ),
            None,
        )
        cut: list[str] = []
        if at is not None:
            message = messages[at]
            assert isinstance(message, ChatMessageAssistant)
            answered = {
                m.tool_call_id for m in messages[at + 1 :] if isinstance(m, ChatMessageTool)
            }
            cut = [c.id for c in message.tool_calls if c.id not in answered]
            if not restored.wait and self.parked is None and (cut or at == len(messages) - 1):
                return message
        parked = "end_turn" if restored.wait else self.parked
        if parked is None:
            return None
        if cut:
            self.restarted = frozenset(cut)
            self.repair("system")
        if restored.wait or self.ch.is_live:
            self.checkpoint(parked)
            self.take(await wait_for_message(self.ch, parked))
        return None

    async def rerun(self, message: ChatMessageAssistant) -> list[ChatMessageTool]:
        """Settle the calls of restored ``message`` that have no result (D4): an idempotent
        tool's call runs again (events and approval as ever), any other's gets "interrupted
        by a restart"; results in call order. Returns the message's results."""
        messages = self.state.messages
        at = len(messages) - 1
        while messages[at] is not message:
            at -= 1
        answered = {m.tool_call_id for m in messages[at + 1 :] if isinstance(m, ChatMessageTool)}
        cut = [c for c in message.tool_calls if c.id not in answered]
        if cut:
            tools = self.agent.tools
            again = tuple(c for c in cut if (t := tools.get(c.name)) is not None and t.idempotent)
            self.restarted = frozenset(c.id for c in cut if c not in again)
            if again:
                # Every result goes to ``late``: the repair puts them in call order among
                # the interrupted ones (or, interrupted again, among the cancelled ones).
                late = self.late
                rerun = message.model_copy(update={"tool_calls": again})
                await execute_tools(self.ch, rerun, tools, messages, late.append, self.held, late)
            self.repair("system")
        return [m for m in messages[at + 1 :] if isinstance(m, ChatMessageTool)]

    # -- pieces --------------------------------------------------------------------

    def append(self, message: ChatMessage) -> None:
        """The one way a message enters the conversation (so it is always published)."""
        self.conversation.append(message)

    def repair(self, reason: CancelReason) -> None:
        """Answer every call the interrupt left unanswered, in call order, then add what
        tools held back. A call that finished after one that did not keeps its real result."""
        late, self.late = self.late, []
        restarted, self.restarted = self.restarted, _NO_IDS
        for m in repair(self.state.messages, reason):
            real = next((r for r in late if r.tool_call_id == m.tool_call_id), None)
            if real is not None:
                late.remove(real)
            elif m.tool_call_id in restarted:  # cut off by a crash, not run again (D4)
                real = interrupted_result(m.tool_call_id, m.function)
            self.append(real or m)
        self.release_held()

    def release_held(self) -> None:
        """Append what tools added besides their results, now that every call has one."""
        held, self.held = self.held, []
        for m in held:
            self.append(m)

    async def absorb(self, folded: Folded) -> None:
        """Take what a boundary drained; a Cancel in it stops the run as a scope would."""
        if folded.cancel is not None:
            # The interrupt landed between scopes; taking it here is the boundary
            # honouring it (the core published TurnCancelled): stop as if a scope had.
            await self.stop(folded, folded.cancel)
        else:
            self.take(folded)

    def take(self, folded: Folded) -> None:
        for m in folded.messages:
            self.append(m)
        if folded.messages:
            self.requests = 0

    async def stop(self, folded: Folded, cancel: Cancel) -> None:
        """After an interrupt: repair, then carry on with the redirect or wait for one.

        Only a live producer can send the redirect; without one the loop carries
        on with the repaired conversation (parking would never end).
        """
        self.repair((folded.cancel or cancel).reason)
        if not folded.messages and not folded.other and self.ch.is_live:
            self.checkpoint("cancelled")  # a restart waits again
            folded = await wait_for_message(self.ch, "cancelled")
        self.take(folded)

    async def generate(self) -> ModelOutput:
        agent, ch, state = self.agent, self.ch, self.state
        self.turns += 1
        self.requests += 1
        message_id = new_id()
        observed = ch.observed  # one call's events are all published, or none
        if observed:
            call_id = f"{self.call_ids}{self.turns}"  # unique in the execution, and cheap
            ch.publish(ModelCallStarted(call_id=call_id, model=agent.model.name))

            def text(d: str) -> None:
                ch.publish(ModelDelta(call_id=call_id, message_id=message_id, kind="text", text=d))

            def reasoning(d: str) -> None:
                ch.publish(
                    ModelDelta(call_id=call_id, message_id=message_id, kind="reasoning", text=d)
                )

            stream = Stream(message_id, text, reasoning)
        else:
            call_id = ""
            stream = Stream(message_id)
        try:
            output = await agent.model.generate(
                state.messages, agent.tool_infos, agent.config, stream
            )
        except anyio.get_cancelled_exc_class():
            if observed:
                ch.publish(ModelCallFinished(call_id=call_id, cancelled=True))
            raise
        except Exception as e:
            if observed:
                ch.publish(ModelCallFinished(call_id=call_id, error=f"{type(e).__name__}: {e}"))
            raise
        if output.message.id != message_id:
            message = output.message.model_copy(update={"id": message_id})
            output = output.model_copy(update={"message": message})
        if observed:
            ch.publish(
                ModelCallFinished(
                    call_id=call_id,
                    message=output.message,
                    stop_reason=output.stop_reason,
                    usage=output.usage,
                )
            )
        out = state.output
        out.message = output.message
        out.stop_reason = output.stop_reason
        if output.usage is not None:
            out.usage = out.usage + output.usage
        return output

    def submission(self, results: list[ChatMessageTool]) -> str | None:
        submit = self.agent.submit
        if submit is None:
            return None
        for r in results:
            if r.function == submit.name and r.error is None:
                return r.text
        return None

    async def judge(self, answer: str) -> bool:
        checker = self.agent.attempts.checker
        if checker is None:
            return True
        return await checker(answer, self.state)

    def limit_hit(self) -> tuple[EndReason, str] | None:
        hit = self.ceiling_hit()
        most = self.agent.limits.max_turn_requests
        if hit is None and most is not None and self.requests >= most:
            return "max_turn_requests", (
                f"reached max_turn_requests ({most} model calls for one prompt)"
            )
        return hit

    def ceiling_hit(self) -> tuple[EndReason, str] | None:
        """The limits that end the run outright (``max_turn_requests`` may park instead)."""
        lim, state = self.agent.limits, self.state
        if lim.max_turns is not None and self.turns >= lim.max_turns:
            return "max_turns", f"reached max_turns ({lim.max_turns} model calls)"
        if lim.message_limit is not None and len(state.messages) >= lim.message_limit:
            return "message_limit", f"reached message_limit ({lim.message_limit} messages)"
        if lim.token_limit is not None and state.output.usage.total_tokens >= lim.token_limit:
            return "token_limit", f"reached token_limit ({lim.token_limit} tokens)"
        return None

    def finish_at_limit(self, end: EndReason, detail: str) -> AgentState:
        return self.finish(
            end, detail, "max_tokens" if end == "token_limit" else "max_turn_requests"
        )

    def finish(
        self, end: EndReason, detail: str, stop_reason: StopReason, answer: str | None = None
    ) -> AgentState:
        out = self.state.output
        out.end = end
        out.detail = detail
        out.stop_reason = stop_reason
        out.completion = answer if answer is not None else (out.message.text if out.message else "")
        self.ch.stop_reason = stop_reason
        self.checkpoint()  # the whole conversation is kept with the ended execution
        return self.state
