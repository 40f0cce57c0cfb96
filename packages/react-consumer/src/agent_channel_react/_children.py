"""The model's child tools (K10): spawn, steer, kill, list and wait, over the supervisor.

An author offers agents by name (:func:`children_tools`); the model starts them in the
background, redirects or stops them, and reads each one's result when it ends (an
announcement folded into its conversation at the next boundary, or a wait). The loop
opens the execution's supervisor when its tools need one, so an agent without these
tools pays nothing. Unlike :func:`as_tool`, a spawned child outlives the turn that
started it: interrupting the parent does not stop it.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Callable, Mapping
from typing import Any, get_type_hints

from agent_channel import (
    Announce,
    ChildBody,
    ChildInfo,
    ChildLimits,
    ChildStatus,
    SpawnRefused,
    Supervisor,
    UnknownChild,
    agent_supervisor,
)

from ._agent import Agent
from ._nested import answer_of, state_of
from ._react import ReactAgent
from ._state import AgentState
from ._tool import Tool, ToolError, tool

TAIL = 6
"""Messages of a child's conversation ``list_agents`` shows for one child."""
LINE = 300
"""Characters of each of those messages shown."""

_STATUS: dict[ChildStatus, str] = {
    "running": "running",
    "waiting": "waiting for input",
    "ended": "ended",
}


def children_tools(
    agents: Mapping[str, Agent | ChildBody],
    *,
    limits: ChildLimits | None = None,
) -> tuple[Tool, ...]:
    """Tools that let the model run ``agents`` as children: give them to ``react(tools=...)``.

    ``agents`` maps a name the model uses to an agent (a :class:`ReactAgent`, or any
    ``async (AgentState) -> AgentState``: it gets the task as its user message and its
    answer is the result) or to a core child body (``async (str) -> str | None``).
    ``limits`` caps every child; the model may ask for tighter ones, never looser.
    Returns ``spawn_agent``, ``steer_agent``, ``kill_agent``, ``list_agents`` and
    ``wait_for_agent``.
    """
    if not agents:
        raise ValueError("children_tools() needs at least one agent to offer")
    bodies = {name: _body(value) for name, value in agents.items()}
    ceiling = limits or ChildLimits()
    menu = "\n".join(f"- {name}: {_describe(name, value)}" for name, value in agents.items())

    async def spawn_agent(
        agent: str,
        task: str,
        name: str | None = None,
        max_turns: int | None = None,
        max_tokens: int | None = None,
        max_seconds: float | None = None,
    ) -> str:
        """Start an agent on a task in the background and return its id at once.

        It works while you go on; when it ends, a message tells you how and gives its
        result. Use steer_agent to redirect it, kill_agent to stop it, list_agents to see
        how it is doing, wait_for_agent to block until it ends.

        Args:
            agent: Which agent to start (one of the names listed).
            task: What it should do, with everything it needs to know (it cannot see your
                conversation).
            name: A short label for it (default: the agent's name and a number).
            max_turns: At most this many model calls before it is stopped.
            max_tokens: At most this many tokens before it is stopped.
            max_seconds: At most this many seconds before it is stopped.
        """
        sup = _supervisor()
        body = bodies.get(agent)
        if body is None:
            raise ToolError(f"no agent named {agent!r}; the agents are: {', '.join(bodies)}")
        try:
            asked = ChildLimits(max_turns, max_tokens, max_seconds)
        except ValueError as e:
            raise ToolError(str(e)) from None
        same = sum(1 for c in sup.children() if c.name.startswith(f"{agent}-"))
        label = name or f"{agent}-{same + 1}"
        try:
            child_id = sup.spawn(body, task, name=label, limits=_tighter(ceiling, asked))
        except SpawnRefused as e:
            raise ToolError(f"not started: {e}") from None
        return (
            f"Started {label} (id {child_id}). It runs in the background; a message will tell "
            "you when it ends, with its result."
        )

    async def steer_agent(id: str, message: str) -> str:
        """Tell a running agent something: it reads it before its next step.

        Returns whether it was delivered (the agent read it) or not (it ended first).

        Args:
            id: The agent's id (from spawn_agent or list_agents).
            message: What to tell it.
        """
        sup = _supervisor()
        try:
            receipt = sup.steer(id, message)
            name = sup.info(id).name
        except UnknownChild as e:
            raise ToolError(str(e)) from None
        await receipt.wait()
        if receipt.outcome == "delivered":
            return f"Delivered: {name} (id {id}) read it before its next step."
        return f"Not delivered to {name} (id {id}): {receipt.reason}."

    async def kill_agent(id: str, reason: str = "no longer needed") -> str:
        """Stop a running agent, wait for it to end, and read what it leaves.

        Args:
            id: The agent's id.
            reason: Why, in a few words.
        """
        sup = _supervisor()
        try:
            sup.kill(id, reason)
            info = await sup.wait(id)  # at its next await: a moment, not its whole step
        except UnknownChild as e:
            raise ToolError(str(e)) from None
        return _ended(sup, info)

    async def list_agents(id: str | None = None) -> str:
        """List the agents you started, or look at one of them closely.

        Args:
            id: An agent's id to see its status, its last messages and its result; leave it
                out to list them all.
        """
        sup = _supervisor()
        if id is None:
            rows = sup.children()
            if not rows:
                return "You have not started any agent."
            now = time.time()
            return "\n".join(_row(c, now) for c in rows)
        try:
            info = sup.info(id)
            tail = sup.messages(id, TAIL)
            result = sup.result(id)
        except UnknownChild as e:
            raise ToolError(str(e)) from None
        lines = [_row(info, time.time())]
        if tail:
            lines.append(f"Its last {len(tail)} message(s):")
            lines += [f"  [{m.role}] {_cut(m.text or _calls(m))}" for m in tail]
        if info.end is not None:
            lines.append(f"Result:\n{result}" if result else "It gave no result.")
        return "\n".join(lines)

    async def wait_for_agent(ids: list[str] | None = None) -> str:
        """Wait until one of the agents ends, and read its whole result.

        Args:
            ids: The agents to wait for (default: any running one). One that has ended
                already is answered at once.
        """
        sup = _supervisor()
        try:
            info = await sup.wait(*(ids or ()))
        except UnknownChild as e:
            raise ToolError(str(e)) from None
        return _ended(sup, info)

    spawn = tool(kind="other", title="Starting {agent}: {task}")(spawn_agent)
    properties = spawn.parameters["properties"]
    properties["agent"] = {**properties["agent"], "enum": list(bodies)}
    spawn = dataclasses.replace(
        spawn, description=f"{spawn.description}\n\nThe agents:\n{menu}", needs_supervisor=True
    )
    others = (
        tool(kind="other", title="Steering {id}")(steer_agent),
        tool(kind="other", title="Stopping {id}")(kill_agent),
        tool(kind="read", title="Listing agents")(list_agents),
        tool(kind="other", title="Waiting for an agent")(wait_for_agent),
    )
    return (spawn, *(dataclasses.replace(t, needs_supervisor=True) for t in others))


def _ended(sup: Supervisor, info: ChildInfo) -> str:
    """An ended child as its announcement words it, with its whole result, the first time the
    model is told (its announcement is then taken back); once the model has read its end (the
    announcement folded at a boundary, or an earlier wait or kill), only a line saying so: the
    model reads each end once (K5)."""
    assert info.end is not None
    if not sup.withdraw_announce(info.id):
        how = info.end if not info.reason else f"{info.end}: {info.reason}"
        again = " list_agents with its id shows its result again." if info.result else ""
        return f"{info.name} (id {info.id}) had already ended ({how}); you were told so.{again}"
    return Announce(
        child_id=info.id,
        name=info.name,
        status=info.end,
        result=sup.result(info.id),
        reason=info.reason,
        limit=info.limit,
    ).text


def _supervisor() -> Supervisor:
    sup = agent_supervisor()
    if sup is None:  # a tool called outside a react loop that opened one
        raise ToolError("children need a supervisor: run these tools in a react agent")
    return sup


def _body(value: Agent | ChildBody) -> ChildBody:
    """A core child body for a registry entry: an agent runs on its task as a user message."""
    if not callable(value):
        raise TypeError(f"children_tools() takes agents or async bodies, not {value!r:.60}")
    if not _takes_state(value):
        return value  # pyright: ignore[reportReturnType] (a body: (str) -> str | None)
    agent: Agent = value  # pyright: ignore[reportAssignmentType]

    async def body(task: str) -> str:
        return answer_of(await agent(state_of(task)))

    return body


def _takes_state(value: Callable[..., Any]) -> bool:
    if isinstance(value, ReactAgent):
        return True
    fn = value if inspect.isfunction(value) or inspect.ismethod(value) else type(value).__call__
    try:
        hints = get_type_hints(fn)
    except Exception:  # unresolvable annotations: a body by default
        return False
    params = [p for p in inspect.signature(fn).parameters if p not in ("self", "return")]
    return bool(params) and hints.get(params[0]) is AgentState


def _describe(name: str, value: object) -> str:
    text = getattr(value, "description", None) if isinstance(value, ReactAgent) else None
    doc = inspect.getdoc(value) if inspect.isfunction(value) else None
    return text or (doc.splitlines()[0] if doc else f"the {name} agent")


def _tighter(ceiling: ChildLimits, asked: ChildLimits) -> ChildLimits:
    """Each limit the lower of the author's and the model's (``None`` is no limit)."""

    def low(a: Any, b: Any) -> Any:
        return b if a is None else a if b is None else min(a, b)

    return ChildLimits(
        low(ceiling.turns, asked.turns),
        low(ceiling.tokens, asked.tokens),
        low(ceiling.seconds, asked.seconds),
    )


def _row(c: ChildInfo, now: float) -> str:
    status = _STATUS[c.status] if c.end is None else f"ended: {c.end}"
    if c.reason:
        status += f" ({c.reason})"
    tokens = f", {c.usage.total_tokens} tokens" if c.usage.total_tokens else ""
    idle = max(0, round(now - c.last_activity))
    return f"{c.name} (id {c.id}): {status}; {c.turns} turn(s){tokens}; last active {idle}s ago"


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LINE else f"{text[: LINE - 1]}…"


def _calls(message: object) -> str:
    calls = getattr(message, "tool_calls", ()) or ()
    return "called " + ", ".join(c.name for c in calls) if calls else "(no text)"
