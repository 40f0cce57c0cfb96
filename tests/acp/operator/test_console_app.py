"""The operator console (``agent-channel-acp attach``) in Textual's headless harness, against
a real ``agent-channel-acp serve --demo`` subprocess on a real unix socket. A test that
takes ``agent_host`` runs twice: the demo in ``serve``, and on a Ray cluster ``serve --ray``
serves (``hosts``).

The demo's tools take :data:`TOOL_SECONDS` here, far longer than any test: a tool ends only
when the operator stops it, so every step waits on what the screen shows, never on a clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from agent_channel_acp.cli._parser import DEMO_TASK
from agent_channel_acp.operator.console._app import Console
from agent_channel_acp.operator.console._widgets import EntryView, Picker
from conftest import GUARD, HERE, agent_env
from hosts import LOCAL, Host, ray_env
from serving import executions, stop
from textual.pilot import Pilot
from textual.widgets import Input, Static

pytestmark = pytest.mark.anyio

TOOL_SECONDS = "600"
SIZE = (120, 40)
DOCS = HERE.parent.parent / "docs"


@contextmanager
def serving(
    rt: Path, *args: str, tool_seconds: str = TOOL_SECONDS, host: Host = LOCAL
) -> Iterator[subprocess.Popen[str]]:
    """``agent-channel-acp serve --demo --json ARGS`` until the block ends; on a Ray
    ``host``, the demo's executions run on the cluster and ``serve --ray`` serves them."""
    env = agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt), AGENT_CHANNEL_DEMO_TOOL_SECONDS=tool_seconds)
    with ExitStack() as stack:
        command = ["serve", "--demo", "--json", *args]
        if host.kind == "ray":
            seconds = {"AGENT_CHANNEL_DEMO_TOOL_SECONDS": tool_seconds}
            rest = stack.enter_context(host.launched(DEMO_TASK, *args, **seconds))
            command = ["serve", "--ray", str(host.address), "--json", *rest]
            env.update(ray_env())
        yield stack.enter_context(_serve(command, env))


@contextmanager
def _serve(command: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_channel_acp", *command],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        cwd=HERE,
    )
    try:
        out: list[str] = []
        stdout = proc.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: out.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(GUARD * 3)
        assert out and json.loads(out[0])["pid"] == proc.pid, f"serve did not start: {out}"
        yield proc
    finally:
        stop(proc)


@pytest.fixture
def rt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "rt"
    path.mkdir(mode=0o700)
    monkeypatch.setenv("AGENT_CHANNEL_RUNTIME_DIR", str(path))
    return path


async def until(pilot: Pilot[None], what: str, check: Callable[[], object]) -> object:
    """Poll ``check`` between frames under the hang guard (never a timing assertion)."""
    for _ in range(int(GUARD * 3 / 0.02)):
        found = check()
        if found:
            await pilot.pause()
            return found
        await pilot.pause(0.02)
    raise AssertionError(f"waited in vain for {what}")


def views(app: Console, kind: str) -> list[EntryView]:
    return [v for v in app.query(EntryView) if v.entry.kind == kind]


def shown(app: Console, kind: str) -> str:
    return "\n".join(str(v.content) for v in views(app, kind))


def panel(app: Console, selector: str) -> str:
    return str(app.query_one(selector, Static).content)


async def verb(rt: Path, *args: str) -> None:
    """``agent-channel-acp ARGS`` as another client would run it, off the app's loop."""
    run = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "agent_channel_acp", *args],
        env=agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt)),
        capture_output=True,
        text=True,
        timeout=GUARD * 3,
    )
    assert run.returncode == 0, run.stderr


def running_card(app: Console) -> EntryView | None:
    cards = [v for v in views(app, "tool") if v.entry.status == "in_progress"]
    return cards[-1] if cards else None


async def type_and_send(pilot: Pilot[None], text: str) -> None:
    await pilot.click("#input")
    await pilot.press(*text)
    await pilot.press("enter")


async def test_console_renders_the_conversation_and_a_running_tool_card(
    rt: Path, agent_host: Host
) -> None:
    with serving(rt, host=agent_host):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, "the bind", lambda: app.state.role == "driver")
            await until(pilot, "the task", lambda: "briefing" in shown(app, "user"))
            card = await until(pilot, "a running tool card", lambda: running_card(app))
            assert isinstance(card, EntryView)
            assert "running" in str(card.content) and "interruptible agents" in str(card.content)
            assert "First, a search." in shown(app, "agent")
            await until(
                pilot, "the indicator", lambda: "running · turn started" in panel(app, "#header")
            )


async def test_esc_sends_session_cancel_and_the_card_turns_cancelled(
    rt: Path, agent_host: Host
) -> None:
    with serving(rt, host=agent_host):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            card = await until(pilot, "a running tool card", lambda: running_card(app))
            assert isinstance(card, EntryView)
            await pilot.press("escape")
            await until(pilot, "turn_state cancelled", lambda: app.state.turn == "cancelled")
            await until(pilot, "the card cancelled", lambda: "cancelled" in str(card.content))
            assert card.has_class("status-cancelled")
            inp = app.query_one("#input")
            assert app.focused is inp
            assert "redirect" in str(inp.placeholder)  # pyright: ignore[reportAttributeAccessIssue]
            await until(
                pilot, "the indicator", lambda: "waiting for operator" in panel(app, "#header")
            )


async def test_enter_while_busy_shows_queued_then_the_echo_replaces_it(
    rt: Path, agent_host: Host
) -> None:
    with serving(rt, host=agent_host):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, "a running tool card", lambda: running_card(app))
            await type_and_send(pilot, "look at the tests too")
            await until(
                pilot, "the queued line", lambda: "look at the tests" in shown(app, "queued")
            )
            assert "queued" in shown(app, "queued")
            await until(pilot, "the server's queue", lambda: app.state.mine_queued())
            # The turn ends only by a cancel here; the message posted before it is read at once.
            await pilot.press("escape")
            await until(pilot, "the echo", lambda: "look at the tests" in shown(app, "operator"))
            assert not views(app, "queued")


async def test_withdraw_key_removes_a_queued_message_the_agent_never_sees_it(
    rt: Path, agent_host: Host
) -> None:
    with serving(rt, host=agent_host):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, "a running tool card", lambda: running_card(app))
            await type_and_send(pilot, "never mind this one")
            await until(pilot, "the server's queue", lambda: app.state.mine_queued())
            await until(
                pilot, "the queue panel", lambda: "never mind this one" in panel(app, "#queue")
            )
            await pilot.press("ctrl+w")
            await until(pilot, "the queue empty", lambda: not app.state.queue)
            # The screen follows the state at its next frame: wait for it, don't race it.
            await until(pilot, "the queued line gone", lambda: not views(app, "queued"))
            note = "withdrawn before the agent read it"
            await until(pilot, "the note", lambda: note in shown(app, "note"))
            await pilot.press("escape")  # the turn ends; the agent reads what is queued: nothing
            await until(pilot, "turn_state cancelled", lambda: app.state.turn == "cancelled")
            await type_and_send(pilot, "carry on")
            await until(pilot, "the echo", lambda: "carry on" in shown(app, "operator"))
            assert "never mind" not in shown(app, "operator")


def queued_ids(app: Console) -> list[str]:
    return [v.entry.message_id for v in views(app, "queued")]


async def test_a25_two_identical_messages_withdraw_one_the_right_one_goes(
    rt: Path, agent_host: Host
) -> None:
    with serving(rt, host=agent_host):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, "a running tool card", lambda: running_card(app))
            await type_and_send(pilot, "same")
            await type_and_send(pilot, "same")
            await until(pilot, "both in the server's queue", lambda: len(app.state.queue) == 2)
            older, newer = (q.id for q in app.state.queue)
            await until(pilot, "both lines linked", lambda: queued_ids(app) == [older, newer])
            await pilot.press("ctrl+w")  # withdraws the newest of ours
            await until(pilot, "one left", lambda: [q.id for q in app.state.queue] == [older])
            await until(pilot, "the newer line gone", lambda: queued_ids(app) == [older])
            await pilot.press("escape")  # the turn stops; the agent reads what is queued
            await until(pilot, "the echo", lambda: "same" in shown(app, "operator"))
            assert not views(app, "queued")
            assert shown(app, "operator").count("same") == 1


async def test_a25_a_long_message_withdrawn_leaves_the_screen(rt: Path, agent_host: Host) -> None:
    """The queue shows a message's first 2,000 characters: the line is matched by id."""
    with serving(rt, host=agent_host):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, "a running tool card", lambda: running_card(app))
            app.query_one("#input", Input).value = "long " * 500
            await pilot.press("enter")
            await until(pilot, "the server's queue", lambda: app.state.mine_queued())
            await pilot.press("ctrl+w")
            await until(pilot, "the queue empty", lambda: not app.state.queue)
            await until(pilot, "the queued line gone", lambda: not views(app, "queued"))
            assert "withdrawn before the agent read it" in shown(app, "note")


async def test_a14_attach_observe_binds_as_observer_and_never_drives(
    rt: Path, agent_host: Host
) -> None:
    with serving(rt, host=agent_host):
        app = Console(observe=True)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, "the bind", lambda: app.state.role == "observer")
            card = await until(pilot, "a running tool card", lambda: running_card(app))
            assert isinstance(card, EntryView)
            await until(pilot, "the role shown", lambda: "observer" in panel(app, "#header"))
            inp = app.query_one("#input", Input)
            assert "Observing only" in str(inp.placeholder)
            await pilot.press("escape")
            await type_and_send(pilot, "let me drive")
            await until(pilot, "the refusals", lambda: "observing only" in shown(app, "note"))
            assert not views(app, "queued") and not app.state.queue
            (listed,) = await asyncio.to_thread(executions, rt)
            assert listed["turnState"] == "started"  # nothing was stopped
            assert card.entry.status == "in_progress"


async def test_a22_tool_cancel_key_stops_one_tool_and_the_turn_goes_on(
    rt: Path, agent_host: Host
) -> None:
    with serving(rt, host=agent_host):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            card = await until(pilot, "a running tool card", lambda: running_card(app))
            assert isinstance(card, EntryView)
            await pilot.press("ctrl+t")
            await until(
                pilot,
                "the card cancelled (or the refusal)",
                lambda: (
                    card.entry.status == "cancelled" or "could not cancel" in shown(app, "note")
                ),
            )
            if card.entry.status != "cancelled":
                pytest.skip("this agent's tool calls are not cancellable alone (no regions yet)")
            await until(pilot, "the next tool", lambda: (c := running_card(app)) and c is not card)
            assert app.state.turn == "started"  # no turn_state cancelled: the turn went on


async def test_approval_card_answered_by_key(rt: Path) -> None:
    with serving(rt, "--approve"):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            await until(
                pilot, "the approval card", lambda: "Approval needed" in panel(app, "#approval")
            )
            assert "interruptible agents" in panel(app, "#approval")
            await until(pilot, "the indicator", lambda: "approval pending" in panel(app, "#header"))
            await pilot.press("ctrl+y")
            card = await until(pilot, "the tool running", lambda: running_card(app))
            assert isinstance(card, EntryView)
            await until(pilot, "the card gone", lambda: panel(app, "#approval") == "")


async def test_an_approval_the_server_stops_waiting_for_leaves_the_panel_and_the_header(
    rt: Path,
) -> None:
    """Another client's ``cancel`` settles the held approval ($/cancel_request): the console
    drops its box and its header stops saying "approval pending" (issue 29, item 9)."""
    with serving(rt, "--approve"):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, "the indicator", lambda: "approval pending" in panel(app, "#header"))
            await verb(rt, "cancel", app.state.execution_id)  # another client
            await until(pilot, "the turn cancelled", lambda: app.state.turn == "cancelled")
            await until(pilot, "the card gone", lambda: panel(app, "#approval") == "")
            assert "pending" not in panel(app, "#header")
            assert "no longer asked" in shown(app, "note")


async def test_reconnects_after_the_server_restarts(rt: Path) -> None:
    with serving(rt) as proc:
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, "a running tool card", lambda: running_card(app))
            first = app.state.execution_id
            stop(proc)
            await until(pilot, "the disconnect", lambda: "disconnected" in app.state.activity)
            await until(pilot, "the indicator", lambda: "disconnected" in panel(app, "#header"))
            with serving(rt):
                await until(
                    pilot,
                    "the bind to the new server",
                    lambda: app.link.attempts >= 2 and app.state.role == "driver",
                )
                assert app.state.execution_id != first
                await until(pilot, "the replayed task", lambda: "briefing" in shown(app, "user"))


async def test_clear_message_at_execution_end_with_undelivered_messages(rt: Path) -> None:
    with serving(rt):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, "a running tool card", lambda: running_card(app))
            await type_and_send(pilot, "you will not read this")
            await until(pilot, "the server's queue", lambda: app.state.mine_queued())
            await verb(rt, "end", app.state.execution_id)
            await until(pilot, "the end", lambda: "The execution has ended" in shown(app, "note"))
            note = shown(app, "note")
            assert "you will not read this" in note
            await until(pilot, "the indicator", lambda: "finished" in panel(app, "#header"))
            assert not views(app, "queued")


async def test_picker_lists_executions_with_status_and_binds_the_choice(
    rt: Path, agent_host: Host
) -> None:
    with serving(rt, "--count", "2", host=agent_host):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, "the picker", lambda: isinstance(app.screen, Picker))
            listed = app.screen.query_one("OptionList")
            assert listed.option_count == 2  # pyright: ignore[reportAttributeAccessIssue]
            await pilot.press("down", "enter")
            await until(pilot, "the bind", lambda: app.state.role == "driver")
            assert app.state.title.endswith("#2")


async def test_screenshot_of_the_console_mid_run(rt: Path, tmp_path: Path) -> None:
    """The console mid-run (a cancelled card, a redirect, a queued message) as SVG; with
    ``AGENT_CHANNEL_SCREENSHOT=1`` it is written to docs/console.svg (the README's picture)."""
    with serving(rt):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, "a running tool card", lambda: running_card(app))
            await pilot.press("escape")
            await until(pilot, "turn_state cancelled", lambda: app.state.turn == "cancelled")
            await type_and_send(pilot, "Change of plan: brief me on operator consoles.")
            await until(
                pilot,
                "the redirect's tool",
                lambda: (c := running_card(app)) and "operator consoles" in c.entry.title,
            )
            await type_and_send(pilot, "Also add a section on pricing.")
            await until(pilot, "the server's queue", lambda: app.state.mine_queued())
            await until(pilot, "a frame", lambda: not app.state.changed)
            svg = app.export_screenshot(title="agent-channel-acp attach")
    assert "operator" in svg and "cancelled" in svg and "queued" in svg
    where = DOCS if os.environ.get("AGENT_CHANNEL_SCREENSHOT") == "1" else tmp_path
    (where / "console.svg").write_text(svg)
