"""The model's child tools (K10) and approvals that bind children (K9), on asyncio and trio."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import anyio
import pytest
from agent_channel import (
    AgentRef,
    ChatMessage,
    ChatMessageTool,
    ChatMessageUser,
    ChildEnded,
    ChildLimits,
    ChildToolCall,
    ExecutionEvent,
    ToolCall,
    ToolCallStarted,
    agent_supervisor,
    open_channel,
    open_supervisor,
)
from agent_channel_react import (
    AgentState,
    ReactAgent,
    ScriptedModel,
    ScriptItem,
    ToolInfo,
    as_tool,
    call,
    children_tools,
    react,
    reply,
    tool,
    tool_call,
)

from .helpers import Recorder

pytestmark = pytest.mark.anyio

_ID = re.compile(r"\(id ([0-9a-f]{16})\)")


def _input(text: str = "Go.") -> AgentState:
    return AgentState(messages=[ChatMessageUser(content=text)])


def _results(state: AgentState, function: str) -> list[str]:
    return [
        m.text for m in state.messages if isinstance(m, ChatMessageTool) and m.function == function
    ]


def _ids(messages: Sequence[ChatMessage]) -> list[str]:
    """Child ids, in the order spawn_agent reported them."""
    return [
        i
        for m in messages
        if isinstance(m, ChatMessageTool) and m.function == "spawn_agent"
        for i in _ID.findall(m.text)
    ]


def _rounds(messages: Sequence[ChatMessage]) -> int:
    return sum(1 for m in messages if m.role == "assistant" and getattr(m, "tool_calls", ()))


def _plan(*steps: Callable[[list[str]], ScriptItem], idle: Callable[[], None] = lambda: None):
    """An orchestrator script: step ``n`` (a function of the child ids so far) at round ``n``;
    then "Waiting." (after calling ``idle``) while no child's message has come since, and
    then a reply quoting every message from a child."""

    def script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
        n = _rounds(messages)
        if n < len(steps):
            return steps[n](_ids(messages))
        if messages[-1].role != "user":  # the last step's results: a child may still run
            idle()
            return reply("Waiting.")
        heard = [m.text for m in messages if getattr(m, "source", None) == "child"]
        return reply("Done. " + " | ".join(heard))

    return script


def _researcher(gates: Mapping[str, anyio.Event] | None = None) -> ReactAgent:
    """A child agent: one search for its task (held at ``gates[task]`` if there is one), then
    a report of what it was told and what the search gave (held at ``gates[task + " reply"]``)."""

    @tool
    async def search(query: str) -> str:
        """Search."""
        gate = (gates or {}).get(query)
        if gate is not None:
            await gate.wait()
        return f"found {query}"

    def script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
        told = [m.text for m in messages if isinstance(m, ChatMessageUser)]
        if _rounds(messages) == 0:
            return call(tool_call("search", query=told[0]))
        result = next(m for m in messages if isinstance(m, ChatMessageTool))
        text = f"Report: {' / '.join(told)} [{result.error or result.text}]"
        return reply(text, wait=(gates or {}).get(f"{told[0]} reply"))

    return react(model=ScriptedModel(script), tools=[search], submit=False, description="digs")


async def _run_setting_on_child_end(
    script: Callable[[Sequence[ChatMessage], Sequence[ToolInfo]], ScriptItem],
    agents: Mapping[str, ReactAgent],
    ended: anyio.Event,
) -> AgentState:
    """Run an orchestrator on ``script`` offering ``agents``; ``ended`` is set when a child
    ends (a script holds a model call on it to force an order)."""
    agent = react(model=ScriptedModel(script), tools=children_tools(agents), submit=False)

    def on_event(event: ExecutionEvent) -> None:
        if isinstance(event, ChildEnded):
            ended.set()

    async with open_channel() as ch:
        ch.ref().subscribe(on_event)
        return await agent(_input())


# -- K10 the model's tools ----------------------------------------------------------------


async def test_k10_the_model_spawns_steers_lists_waits_and_reads_the_announcements() -> None:
    gate_a, gate_b, a_replies = anyio.Event(), anyio.Event(), anyio.Event()
    plan = _plan(
        lambda ids: call(
            tool_call("spawn_agent", agent="researcher", task="Look at A.", name="a"),
            tool_call("spawn_agent", agent="researcher", task="Look at B.", name="b"),
        ),
        lambda ids: call(tool_call("list_agents")),
        lambda ids: call(tool_call("steer_agent", id=ids[0], message="Only the tests.")),
        lambda ids: call(tool_call("wait_for_agent", ids=[ids[0]])),
        idle=gate_b.set,
    )
    gates = {"Look at A.": gate_a, "Look at A. reply": a_replies, "Look at B.": gate_b}
    tools = children_tools({"researcher": _researcher(gates)})
    agent = react(model=ScriptedModel(plan), tools=tools, submit=False)

    def on_event(event: ExecutionEvent) -> None:
        # a's search ends once the steer is queued: a reads it at the boundary after it.
        if isinstance(event, ToolCallStarted) and event.name == "steer_agent":
            gate_a.set()
        if isinstance(event, ToolCallStarted) and event.name == "wait_for_agent":
            a_replies.set()  # a ends while the parent waits for it

    async with open_channel() as ch:
        ch.ref().subscribe(on_event)
        state = await agent(_input())
    a, b = _ids(state.messages)
    assert _results(state, "spawn_agent") == [
        f"Started a (id {a}). It runs in the background; a message will tell you when it "
        "ends, with its result.",
        f"Started b (id {b}). It runs in the background; a message will tell you when it "
        "ends, with its result.",
    ]
    assert _results(state, "steer_agent") == [
        f"Delivered: a (id {a}) read it before its next step."
    ]
    listing = _results(state, "list_agents")[0].splitlines()
    assert sorted(line.split(";")[0] for line in listing) == [  # spawned concurrently
        f"a (id {a}): running",
        f"b (id {b}): running",
    ]
    # The wait reads a's whole result; its announcement is not read a second time.
    assert _results(state, "wait_for_agent") == [
        f"Child a (id {a}) completed.\n\nResult:\nReport: Look at A. / Only the tests. "
        "[found Look at A.]"
    ]
    # The model answered while b ran: the run waited for b's announcement, then went on.
    announced = f"Child b (id {b}) completed.\n\nResult:\nReport: Look at B. [found Look at B.]"
    assert [(m.role, getattr(m, "source", None), m.text) for m in state.messages[-3:]] == [
        ("assistant", None, "Waiting."),
        ("user", "child", announced),
        ("assistant", None, f"Done. {announced}"),
    ]
    assert state.output.end == "answered"


async def test_k10_kill_ends_a_child_and_reads_what_it_leaves() -> None:
    plan = _plan(
        lambda ids: call(tool_call("spawn_agent", agent="slow", task="Forever.")),
        lambda ids: call(tool_call("kill_agent", id=ids[0], reason="not needed")),
        lambda ids: call(tool_call("kill_agent", id=ids[0])),
        lambda ids: reply("Done."),
    )
    slow = _researcher({"Forever.": anyio.Event()})
    agent = react(model=ScriptedModel(plan), tools=children_tools({"slow": slow}), submit=False)
    async with open_channel():
        state = await agent(_input())
    (c,) = _ids(state.messages)
    # The first reads the end; the second (at once) that it had ended; no announcement.
    assert _results(state, "kill_agent") == [
        f"Child slow-1 (id {c}) was killed: not needed.",
        f"slow-1 (id {c}) had already ended (killed: not needed); you were told so.",
    ]
    assert [m.text for m in state.messages if getattr(m, "source", None) == "child"] == []
    assert state.messages[-1].text == "Done."


async def test_k10_refusals_and_unknown_ids_are_tool_errors_the_model_can_act_on() -> None:
    plan = _plan(
        lambda ids: call(
            tool_call("spawn_agent", agent="nobody", task="x"),
            tool_call("spawn_agent", agent="slow", task="one"),
            tool_call("spawn_agent", agent="slow", task="two", max_turns=0),
        ),
        lambda ids: call(
            tool_call("spawn_agent", agent="slow", task="three"),
            tool_call("steer_agent", id="feedface", message="hi"),
            tool_call("wait_for_agent", ids=["feedface"]),
        ),
        lambda ids: call(tool_call("kill_agent", id=ids[0])),
    )
    slow = _researcher({"one": anyio.Event()})
    agent = react(model=ScriptedModel(plan), tools=children_tools({"slow": slow}), submit=False)
    async with open_channel(), open_supervisor(max_running=1):  # the runtime's own is used
        state = await agent(_input())
    errors = [m.error for m in state.messages if isinstance(m, ChatMessageTool) and m.error]
    assert errors[:3] == [
        "no agent named 'nobody'; the agents are: slow",
        "turns must be an int of at least 1 (or None), not 0",
        "not started: 1 children are already running, the limit at once; wait for one to "
        "end (or kill one), then spawn again",
    ]
    assert errors[3].startswith("no child with id 'feedface' here; the latest are: ")
    assert errors[4] == errors[3]
    assert len(errors) == 5


async def test_k10_the_models_limits_are_tightened_by_the_authors_never_loosened() -> None:
    plan = _plan(
        lambda ids: call(
            tool_call("spawn_agent", agent="r", task="a", name="loose", max_turns=50),
            tool_call("spawn_agent", agent="r", task="b", name="tight", max_seconds=3600),
        ),
    )
    tools = children_tools({"r": _researcher()}, limits=ChildLimits(turns=1))
    agent = react(model=ScriptedModel(plan), tools=tools, submit=False)
    async with open_channel():
        state = await agent(_input())
    loose, tight = _ids(state.messages)
    # The author's one-turn limit holds whatever the model asked for.
    heard = "\n\n".join(m.text for m in state.messages if getattr(m, "source", None) == "child")
    assert sorted(re.findall(r"Child (\w+) \(id (\w+)\) (.*)\.\n", heard)) == [
        ("loose", loose, "was stopped by its turns limit: 1 turn(s)"),
        ("tight", tight, "was stopped by its turns limit: 1 turn(s)"),
    ]


async def test_k10_an_agent_without_child_tools_opens_no_supervisor_and_as_tool_is_unchanged() -> (
    None
):
    seen: list[object] = []

    @tool
    async def probe() -> str:
        """Report whether a supervisor is open."""
        seen.append(agent_supervisor())
        return "ok"

    child = react(model=ScriptedModel(["Child answer."]), submit=False)
    model = ScriptedModel(
        [call(tool_call("probe"), tool_call("helper", input="do it")), "Parent answer."]
    )
    agent = react(
        model=model,
        tools=[probe, as_tool(child, name="helper", description="a helper")],
        submit=False,
    )
    async with open_channel():
        state = await agent(_input())
    assert seen == [None]
    assert _results(state, "helper") == ["Child answer."]
    assert agent.supervises is False


async def test_k10_an_orchestrator_outside_any_execution_opens_its_own() -> None:
    plan = _plan(lambda ids: call(tool_call("spawn_agent", agent="r", task="x")))
    agent = react(
        model=ScriptedModel(plan), tools=children_tools({"r": _researcher()}), submit=False
    )
    state = await agent(_input())  # no open_channel(): the run becomes an execution
    (c,) = _ids(state.messages)
    assert state.messages[-1].text == (
        f"Done. Child r-1 (id {c}) completed.\n\nResult:\nReport: x [found x]"
    )


async def test_k10_interrupting_the_parent_does_not_stop_its_children() -> None:
    gate, hold = anyio.Event(), anyio.Event()
    plan = _plan(
        lambda ids: call(tool_call("spawn_agent", agent="r", task="x")),
        lambda ids: call(tool_call("list_agents"), wait=hold),  # interrupted here, once
    )
    agent = react(
        model=ScriptedModel(plan),
        tools=children_tools({"r": _researcher({"x": gate})}),
        submit=False,
    )
    rec = Recorder()
    async with open_channel() as ch:
        ref: AgentRef = ch.ref()
        ref.subscribe(rec)

        async def operator() -> None:
            await rec.seen("model_call_started", 2)
            ref.interrupt()
            await rec.seen("turn_cancelled")
            hold.set()
            gate.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(operator)
            state = await agent(_input())
    (c,) = _ids(state.messages)
    assert state.messages[-1].text == (
        f"Done. Child r-1 (id {c}) completed.\n\nResult:\nReport: x [found x]"
    )


# -- K9 approvals bind children -------------------------------------------------------------


async def test_k9_a_childs_tool_call_reaches_the_top_levels_approver_naming_the_child() -> None:
    asked: list[ToolCall] = []

    async def operator(call: ToolCall) -> bool:
        asked.append(call)
        return call.name != "search"  # spawning is allowed; the child's search is not

    plan = _plan(lambda ids: call(tool_call("spawn_agent", agent="r", task="x", name="scout")))
    agent = react(
        model=ScriptedModel(plan), tools=children_tools({"r": _researcher()}), submit=False
    )
    async with open_channel(approver=operator):
        state = await agent(_input())
    (c,) = _ids(state.messages)
    assert [(type(a).__name__, a.name) for a in asked] == [
        ("ToolCall", "spawn_agent"),
        ("ChildToolCall", "search"),
    ]
    child_call = asked[1]
    assert isinstance(child_call, ChildToolCall)
    assert (child_call.child_id, child_call.child_name) == (c, "scout")
    assert child_call.id == f"{c}/{child_call.call_id}"
    # No wider permission than its parent's: the child's search was rejected.
    assert state.messages[-1].text == (
        f"Done. Child scout (id {c}) completed.\n\nResult:\nReport: x [rejected by the operator]"
    )


async def test_k10_an_announcement_made_while_the_model_speaks_is_read_before_the_run_ends() -> (
    None
):
    ended = anyio.Event()

    def script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
        if _rounds(messages) == 0:
            return call(tool_call("spawn_agent", agent="r", task="x"))
        if messages[-1].role == "tool":
            return reply("Waiting.", wait=ended)  # the child ends during this model call
        return reply("Done. " + messages[-1].text)

    state = await _run_setting_on_child_end(script, {"r": _researcher()}, ended)
    (c,) = _ids(state.messages)
    assert [m.text for m in state.messages[-3:]] == [
        "Waiting.",
        f"Child r-1 (id {c}) completed.\n\nResult:\nReport: x [found x]",
        f"Done. Child r-1 (id {c}) completed.\n\nResult:\nReport: x [found x]",
    ]


async def test_k10_a_child_agent_with_child_tools_nests_to_the_depth_limit() -> None:
    def script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
        last = messages[-1]
        if _rounds(messages) == 0:
            return call(tool_call("spawn_agent", agent="nest", task="Go deeper."))
        if isinstance(last, ChatMessageTool):
            return reply(f"Bottom: {last.error}" if last.error else "Waiting.")
        return reply(f"Up: {last.text.splitlines()[0]}")

    async def nest(task: str) -> str:
        """Itself, one level deeper."""
        state = await agent(_input(task))
        return state.output.completion

    agent = react(model=ScriptedModel(script), tools=children_tools({"nest": nest}), submit=False)
    ends: list[ChildEnded] = []
    async with open_channel() as ch:
        ch.ref().subscribe(lambda e: ends.append(e) if isinstance(e, ChildEnded) else None)
        state = await agent(_input())
    tree = sorted((e.child for e in ends), key=lambda c: c.depth)
    assert [(c.depth, c.end) for c in tree] == [(1, "completed"), (2, "completed")]
    assert tree[1].result == (
        "Bottom: not started: depth limit: this execution is 2 level(s) below the top and "
        "children nest at most 2 deep; do this work here instead"
    )
    assert state.messages[-1].text == f"Up: Child nest-1 (id {tree[0].id}) completed."


async def test_k9_an_agent_run_as_a_tool_asks_its_callers_approver_naming_it() -> None:
    asked: list[ToolCall] = []

    async def operator(call: ToolCall) -> bool:
        asked.append(call)
        return call.name == "helper"  # the delegation is allowed; the helper's search is not

    helper = _researcher()
    model = ScriptedModel([call(tool_call("helper", input="x")), "Parent answer."])
    agent = react(
        model=model,
        tools=[as_tool(helper, name="helper", description="a helper")],
        submit=False,
    )
    async with open_channel(approver=operator):
        state = await agent(_input())
    assert [(type(a).__name__, a.name) for a in asked] == [
        ("ToolCall", "helper"),
        ("ChildToolCall", "search"),
    ]
    nested = asked[1]
    assert isinstance(nested, ChildToolCall) and nested.child_name == "helper"
    assert _results(state, "helper") == ["Report: x [rejected by the operator]"]


async def test_k10_the_registry_takes_agents_plain_agent_functions_and_core_bodies() -> None:
    async def echo_agent(state: AgentState) -> AgentState:
        """Says its task back."""
        state.output.completion = f"agent read {state.messages[-1].text}"
        return state

    async def body(task: str) -> str:
        """Shouts its task."""
        return task.upper()

    plan = _plan(
        lambda ids: call(
            tool_call("spawn_agent", agent="echo", task="one"),
            tool_call("spawn_agent", agent="shout", task="two"),
        )
    )
    tools = children_tools({"echo": echo_agent, "shout": body})
    spawn = next(t for t in tools if t.name == "spawn_agent")
    assert spawn.parameters["properties"]["agent"]["enum"] == ["echo", "shout"]
    assert "- echo: Says its task back.\n- shout: Shouts its task." in spawn.description
    agent = react(model=ScriptedModel(plan), tools=tools, submit=False)
    async with open_channel():
        state = await agent(_input())
    heard = "\n\n".join(m.text for m in state.messages if getattr(m, "source", None) == "child")
    assert sorted(re.findall(r"Result:\n(.*)", heard)) == ["TWO", "agent read one"]


async def test_k5_a_wait_on_a_child_whose_announcement_was_read_does_not_read_its_end_again() -> (
    None
):
    # The premise, forced: the child ends while the model's second call is held, so its
    # announcement folds at the next boundary, and only then does the model wait for it.
    a_ended = anyio.Event()
    plan = _plan(
        lambda ids: call(tool_call("spawn_agent", agent="researcher", task="Look at A.", name="a")),
        lambda ids: call(tool_call("list_agents"), wait=a_ended),
        lambda ids: call(tool_call("wait_for_agent", ids=[ids[0]])),
        lambda ids: call(tool_call("kill_agent", id=ids[0])),
    )
    state = await _run_setting_on_child_end(plan, {"researcher": _researcher()}, a_ended)
    (a,) = _ids(state.messages)
    result = "Report: Look at A. [found Look at A.]"
    # The model reads a's result once: in the announcement it read first.
    assert sum(m.text.count(result) for m in state.messages if m.role != "assistant") == 1
    assert [m.text for m in state.messages if getattr(m, "source", None) == "child"] == [
        f"Child a (id {a}) completed.\n\nResult:\n{result}"
    ]
    already = (
        f"a (id {a}) had already ended (completed); you were told so. list_agents with its id "
        "shows its result again."
    )
    assert _results(state, "wait_for_agent") == [already]
    assert _results(state, "kill_agent") == [already]
