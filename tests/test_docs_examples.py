"""The agent author's quickstart example (docs/examples/slow_tools.py), run as written,
and the README's agent body (``my_agents.py``, read out of README.md by scripts/examples.py).

A runtime drives the first the way a producer would, on asyncio and trio: one tool call stopped
alone (the turn goes on and the call gets the core's cancelled result), a message sent
while the tools run (read before the model's next call), and a stop of the whole turn
(repaired). The operator's actions are taken in the event callback, at the moment the
event says they apply, so nothing depends on timing.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest
from agent_channel import (
    AgentRef,
    AwaitingInput,
    Cancel,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    ExecutionEvent,
    MessageAppended,
    ToolCallStarted,
    TurnCancelled,
    UserMessage,
    open_channel,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs/examples/slow_tools.py"


def _module_from(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def slow_tools() -> Iterator[Any]:
    yield _module_from("slow_tools", EXAMPLE)
    sys.modules.pop("slow_tools", None)


@pytest.fixture
def my_agents(tmp_path: Path) -> Iterator[Any]:
    """README.md's ``my_agents.py``, as the README shows it."""
    examples = _module_from("examples", ROOT / "scripts/examples.py")
    path = tmp_path / "my_agents.py"
    path.write_text(examples.example("readme-agent"), encoding="utf-8")
    yield _module_from("my_agents", path)
    sys.modules.pop("my_agents", None)


async def _drive(
    module: ModuleType, act: Callable[[AgentRef, ExecutionEvent, int], None], turns: int
) -> list[object]:
    """Run the example's factory, post one message, let ``act`` play the operator."""
    events: list[ExecutionEvent] = []
    messages: list[object] = []
    idle = anyio.Event()
    with anyio.fail_after(20):  # a hang guard
        async with open_channel() as ch, anyio.create_task_group() as tg:
            ref = ch.ref()

            def on_event(event: ExecutionEvent) -> None:
                events.append(event)
                act(ref, event, sum(isinstance(e, ToolCallStarted) for e in events))
                if sum(isinstance(e, AwaitingInput) for e in events) == turns:
                    idle.set()

            ref.subscribe(on_event)
            tg.start_soon(module.factory(None))
            ref.post(UserMessage("otter badger"))
            await idle.wait()
            messages.extend(ref.messages())
            tg.cancel_scope.cancel()
    return [*messages, *events]


async def test_one_tool_call_stopped_alone_and_the_turn_goes_on(slow_tools: Any) -> None:
    slow_tools.SECONDS = 0.01

    def operator(ref: AgentRef, event: ExecutionEvent, started: int) -> None:
        if isinstance(event, ToolCallStarted) and started == 1:  # ctrl+t on the first card
            assert ref.cancel_region(event.tool_call_id) is True

    seen = await _drive(slow_tools, operator, turns=1)
    results = [(m.content, m.error) for m in seen if isinstance(m, ChatMessageTool)]
    assert results == [
        ("Tool call cancelled by the operator.", "cancelled"),
        ("'badger' is a word", None),
    ]
    answers = [m.text for m in seen if isinstance(m, ChatMessageAssistant)]
    assert answers[-1] == "Done: 1 found, 1 stopped."
    assert not any(isinstance(e, TurnCancelled) for e in seen)


async def test_a_message_sent_while_the_tools_run_is_read_before_the_answer(
    slow_tools: Any,
) -> None:
    slow_tools.SECONDS = 0.01

    def operator(ref: AgentRef, event: ExecutionEvent, started: int) -> None:
        if isinstance(event, ToolCallStarted) and started == 2:
            ref.post(UserMessage("also: be brief"))

    seen = await _drive(slow_tools, operator, turns=1)
    messages = [m for m in seen if isinstance(m, ChatMessageUser | ChatMessageTool)]
    assert [type(m).__name__ for m in messages] == [
        "ChatMessageUser",
        "ChatMessageTool",
        "ChatMessageTool",
        "ChatMessageUser",  # after both results, before the model's answer
    ]
    assert messages[-1].text == "also: be brief"
    answers = [m.text for m in seen if isinstance(m, ChatMessageAssistant)]
    assert answers[-1] == "Done: 2 found, 0 stopped."


async def test_a_stop_of_the_turn_repairs_the_open_tool_calls(slow_tools: Any) -> None:
    slow_tools.SECONDS = 3600  # stopped long before

    def operator(ref: AgentRef, event: ExecutionEvent, started: int) -> None:
        if isinstance(event, ToolCallStarted) and started == 1:  # Esc, or the editor's stop
            ref.interrupt(Cancel("user_cancel"))

    seen = await _drive(slow_tools, operator, turns=1)
    results = [(m.tool_call_id, m.error) for m in seen if isinstance(m, ChatMessageTool)]
    assert [error for _, error in results] == ["cancelled", "cancelled"]  # both calls answered
    assert sum(isinstance(e, TurnCancelled) for e in seen) == 1
    answers = [m.text for m in seen if isinstance(m, ChatMessageAssistant)]
    assert answers == ["Looking up 2 word(s)."]  # the turn ended at the stop


async def test_the_readme_agent_answers_each_message_as_serve_and_launch_run_it(
    my_agents: Any,
) -> None:
    """``serve --agent my_agents:factory`` runs ``factory(model)()``; ``launch`` runs ``body()``."""
    assert my_agents.factory("any-model") is my_agents.body
    appended = 0
    changed = anyio.Event()
    texts: list[str] = []

    def on_event(event: ExecutionEvent) -> None:
        nonlocal appended, changed
        if isinstance(event, MessageAppended):
            appended += 1
            changed.set()
            changed = anyio.Event()

    async def until(count: int) -> None:
        while appended < count:
            await changed.wait()

    with anyio.fail_after(20):  # a hang guard
        async with open_channel() as ch, anyio.create_task_group() as tg:
            ref = ch.ref()
            ref.subscribe(on_event)
            tg.start_soon(my_agents.factory(None))
            ref.post(UserMessage("hi"))  # serve --input "hi"
            await until(2)
            ref.post(UserMessage("are you there?"))  # agent-channel-acp send
            await until(4)
            texts += [m.text for m in ref.messages()]
            tg.cancel_scope.cancel()
    assert texts == ["hi", "heard: hi", "are you there?", "heard: are you there?"]


@pytest.fixture
def weather() -> Iterator[Any]:
    yield _module_from("weather", ROOT / "docs/examples/weather.py")
    sys.modules.pop("weather", None)


async def _stopped_in_paris_then_rome(make: Any, example: Any) -> None:
    """The weather examples' run: stopped in the slow tool (Paris), the call gets its
    cancelled result, and the redirect (Rome, the tool made quick) goes on in the same
    conversation."""
    answered = anyio.Event()
    with anyio.fail_after(20):  # a hang guard
        async with open_channel() as ch, anyio.create_task_group() as tg:
            ref = ch.ref()
            ref.mark_live()

            def on_event(event: ExecutionEvent) -> None:
                if isinstance(event, ToolCallStarted) and event.arguments["city"] == "Paris":
                    ref.interrupt(Cancel("user_cancel"))  # Esc, or the editor's stop
                if isinstance(event, TurnCancelled):
                    example.forecast_seconds = 0
                    ref.post(UserMessage("then weather in Rome"))
                if isinstance(event, AwaitingInput) and event.stop_reason == "end_turn":
                    answered.set()

            ref.subscribe(on_event)
            tg.start_soon(make(None))
            ref.post(UserMessage("weather in Paris"))
            await answered.wait()
            seen = ref.messages()
            tg.cancel_scope.cancel()
    results = [(m.text, m.error) for m in seen if isinstance(m, ChatMessageTool)]
    assert results[0] == ("Tool call cancelled by the operator.",) * 2
    assert results[1] == ("sunny in Rome", None)
    assert [m.text for m in seen if isinstance(m, ChatMessageUser)] == [
        "weather in Paris",
        "then weather in Rome",
    ]
    assert seen[-1].text == "It is sunny in Rome."


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # pydantic-ai's runs are asyncio's
async def test_the_pydantic_ai_example_is_stopped_in_its_tool_and_redirected(
    weather: Any,
) -> None:
    """docs/examples/weather.py, served as ``serve --agent weather:agent`` serves it (its
    adapter, found by entry point, makes the factory): stopped in the slow tool, the call
    gets its cancelled result, and the redirect goes on in the same conversation."""
    from agent_channel_pydantic_ai import adapt

    make = adapt(weather.agent)
    assert make is not None
    await _stopped_in_paris_then_rome(make, weather)


SUPPORT_DRIVER = r"""
import json
import anyio
from agent_channel import (
    AwaitingInput, Cancel, ToolCallStarted, TurnCancelled, UserMessage, open_channel,
)
from agent_channel_openai_agents import adapt
import support


async def main():
    make = adapt(support.agent)  # what `serve --agent support:agent` does, by entry point
    answered = anyio.Event()
    with anyio.fail_after(20):  # a hang guard
        async with open_channel() as ch, anyio.create_task_group() as tg:
            ref = ch.ref()
            ref.mark_live()

            def on_event(event):
                if isinstance(event, ToolCallStarted) and event.arguments["order"] == "42":
                    ref.interrupt(Cancel("user_cancel"))  # Esc, or the editor's stop
                if isinstance(event, TurnCancelled):
                    support.lookup_seconds = 0
                    ref.post(UserMessage("then where is order 7"))
                if isinstance(event, AwaitingInput) and event.stop_reason == "end_turn":
                    answered.set()

            ref.subscribe(on_event)
            tg.start_soon(make(None))
            ref.post(UserMessage("where is order 42"))
            await answered.wait()
            seen = ref.messages()
            tg.cancel_scope.cancel()
    print(json.dumps([[m.role, m.text, getattr(m, "error", None)] for m in seen]))


anyio.run(main)
"""


def test_the_openai_agents_example_is_stopped_in_its_tool_and_redirected() -> None:
    """docs/examples/support.py, served as ``serve --agent support:agent`` serves it (its
    adapter makes the factory): stopped in the slow tool, the call kept with its cancelled
    result, and the redirect goes on in the same conversation. In its own process: the
    SDK's package is named ``agents``, as tests/acp's agents module is."""
    import json
    import os
    import subprocess

    examples = ROOT / "docs/examples"
    env = {**os.environ, "PYTHONPATH": str(examples), "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    run = subprocess.run(
        [sys.executable, "-c", SUPPORT_DRIVER],
        cwd=examples,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    seen = [tuple(m) for m in json.loads(run.stdout.splitlines()[-1])]
    cut = "Tool call cancelled by the operator."
    assert [m for m in seen if m[0] == "tool"] == [
        ("tool", cut, cut),
        ("tool", "order 7 has shipped", None),
    ]
    assert [m[1] for m in seen if m[0] == "user"] == ["where is order 42", "then where is order 7"]
    assert seen[-1] == ("assistant", "Your order 7 has shipped.", None)


@pytest.fixture
def forecast() -> Iterator[Any]:
    yield _module_from("forecast", ROOT / "docs/examples/forecast.py")
    sys.modules.pop("forecast", None)


def test_the_langgraph_page_shows_the_example_that_runs() -> None:
    """docs/langgraph.md shows docs/examples/forecast.py whole: what a reader copies runs."""
    page = (ROOT / "docs/langgraph.md").read_text(encoding="utf-8")
    assert f"```python\n{(ROOT / 'docs/examples/forecast.py').read_text()}```" in page


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # LangGraph's runs are asyncio's
async def test_the_langgraph_example_is_stopped_in_its_tool_and_redirected(
    forecast: Any,
) -> None:
    """docs/examples/forecast.py, served as ``serve --agent forecast:graph`` serves it (its
    adapter, found by entry point, makes the factory): stopped in the slow tool, the call
    gets its cancelled result, and the redirect goes on in the same conversation."""
    from agent_channel_langgraph import adapt

    make = adapt(forecast.graph)
    assert make is not None
    await _stopped_in_paris_then_rome(make, forecast)
