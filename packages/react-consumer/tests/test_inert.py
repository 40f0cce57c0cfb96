"""Inert by default: a channel nobody uses changes nothing (the primary regression guard).

Each scripted conversation runs three ways: with no channel open at all, in a
fresh channel nobody holds a ref to, and with a producer attached that only
watches. Messages and output must be identical; the watcher's events go into a
golden snapshot with them, so any change in behaviour shows up as a diff.
Regenerate with ``UPDATE_GOLDEN=1 pytest packages/react-consumer/tests/test_inert.py``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_channel import ChatMessageUser, open_channel
from agent_channel_react import (
    AgentState,
    Attempts,
    ReactAgent,
    ScriptedModel,
    ScriptStep,
    call,
    handoff,
    react,
    reply,
    tool,
    tool_call,
)

from .helpers import Recorder, add, crash, echo, event_log, fail, normalise

pytestmark = pytest.mark.anyio

GOLDEN = Path(__file__).parent / "golden" / "react_inert.json"


def _ok(answer: str, state: AgentState) -> bool:
    return answer == "42"


async def _checker(answer: str, state: AgentState) -> bool:
    return _ok(answer, state)


async def _never(answer: str, state: AgentState) -> bool:
    return False


@tool(kind="read", title="Reading {path[0]}")
async def read(path: Any = None) -> str:
    """Read a path (its title indexes into the argument)."""
    return f"read {path!r}"


@tool(kind="search", title="Finding {query.name} in {where:>5d}")
async def find(query: Any = None, where: Any = None) -> str:
    """Find something (its title reads an attribute and needs an int)."""
    return "found"


def _forever(messages: Any, tools: Any) -> ScriptStep:
    return call(tool_call("add", a=1, b=1), content="Adding again.")


Scenario = Callable[[ScriptedModel], ReactAgent]
SCRIPTS: dict[str, tuple[Any, Scenario]] = {
    "plain_answer": (
        ["Hello! Nothing to look up, so here is my answer."],
        lambda m: react(model=m, submit=False),
    ),
    "tool_rounds": (
        [
            call(tool_call("add", a=1, b=2), content="First 1+2."),
            call(tool_call("add", a=3, b=4), content="Then 3+4."),
            call(tool_call("submit", answer="3 and 7")),
        ],
        lambda m: react(model=m, tools=[add]),
    ),
    "parallel_tools": (
        [
            call(
                tool_call("add", a=2, b=2), tool_call("echo", text="hi"), tool_call("add", a=5, b=5)
            ),
            call(tool_call("submit", answer="4, hi, 10")),
        ],
        lambda m: react(model=m, tools=[add, echo]),
    ),
    "tool_errors": (
        [
            call(
                tool_call("fail", why="on purpose"),
                tool_call("crash"),
                tool_call("nope"),
                tool_call("add", a="x"),
            ),
            call(tool_call("submit", answer="errors seen")),
        ],
        lambda m: react(model=m, tools=[add, fail, crash]),
    ),
    "reasoning_stream": (
        [reply("The answer, streamed in a few pieces of text.", reasoning="Let me think it over.")],
        lambda m: react(model=m, submit=False, prompt="Be brief."),
    ),
    "continue_prompt": (
        [
            "I think I am done.",
            call(tool_call("submit", answer="done")),
        ],
        lambda m: react(model=m, on_continue="Use {submit}() to finish."),
    ),
    "attempts": (
        [
            call(tool_call("submit", answer="41")),
            call(tool_call("submit", answer="42")),
        ],
        lambda m: react(model=m, attempts=Attempts(3, _checker)),
    ),
    "attempts_exhausted": (
        [call(tool_call("submit", answer="a")), call(tool_call("submit", answer="b"))],
        lambda m: react(model=m, attempts=Attempts(2, _never, "Wrong, again.")),
    ),
    "tool_titles": (
        [
            call(
                tool_call("read", path=3),  # TypeError: 'int' object is not subscriptable
                tool_call("read", path=["a", "b"]),  # fits
                tool_call("read"),  # None[0]: TypeError
                tool_call("find", query="x", where=1),  # AttributeError
                tool_call("find", query=None, where="far"),  # AttributeError, then ValueError
                tool_call("echo"),  # KeyError (and an invalid call)
            ),
            call(tool_call("submit", answer="titles")),
        ],
        lambda m: react(model=m, tools=[read, find, echo]),
    ),
    "handoff_beside_a_tool": (
        [
            call(tool_call("helper"), tool_call("add", a=1, b=2), content="Two at once."),
            call(tool_call("submit", answer="3")),
        ],
        lambda m: react(
            model=m,
            tools=[
                handoff(
                    react(model=ScriptedModel(["Helper: 3."]), submit=False, prompt="Helper."),
                    name="helper",
                    description="Hand over to the helper.",
                ),
                add,
            ],
        ),
    ),
    "max_turns": (_forever, lambda m: react(model=m, tools=[add], max_turns=3)),
    "message_limit": (_forever, lambda m: react(model=m, tools=[add], message_limit=7)),
    "token_limit": (_forever, lambda m: react(model=m, tools=[add], token_limit=150)),
    "max_turn_requests": (_forever, lambda m: react(model=m, tools=[add], max_turn_requests=2)),
}


def _input() -> AgentState:
    return AgentState(messages=[ChatMessageUser(content="Please work this out.")])


def _result(state: AgentState) -> dict[str, Any]:
    return normalise(json.loads(state.model_dump_json()))


async def _three_runs(name: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Recorder]:
    script, build = SCRIPTS[name]
    bare = await build(ScriptedModel(script))(_input())
    async with open_channel():
        fresh = await build(ScriptedModel(script))(_input())
    recorder = Recorder()
    async with open_channel() as ch:
        ch.ref().subscribe(recorder)
        watched = await build(ScriptedModel(script))(_input())
    return _result(bare), _result(fresh), _result(watched), recorder


@pytest.mark.parametrize("name", sorted(SCRIPTS))
async def test_inert_runs_are_identical(name: str) -> None:
    bare, fresh, watched, recorder = await _three_runs(name)
    assert bare == fresh == watched
    snapshot = {"result": watched, "events": normalise(event_log(recorder.events))}
    golden: dict[str, Any] = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if os.environ.get("UPDATE_GOLDEN"):
        golden[name] = snapshot
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    assert name in golden, "no snapshot yet: run with UPDATE_GOLDEN=1"
    assert snapshot == golden[name]


async def test_every_scenario_has_a_snapshot() -> None:
    assert sorted(json.loads(GOLDEN.read_text())) == sorted(SCRIPTS)
