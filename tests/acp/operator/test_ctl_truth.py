"""Verbs and errors that tell the truth (issue 16, sections 4 and 5): what the shell verbs and
``serve`` say matches what happened. Every verb and ``serve`` run as real subprocesses; the
hand-written agents live in ``agents.py`` or are written to a temporary directory, as an
author's would be.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GUARD, HERE
from serving import (
    ctl,
    ctl_json,
    env,
    execution,
    first_line,
    messages,
    one_line_failure,
    serving,
    stop,
    wait_for,
)

AGENT = ("--agent", "agents:react_agent")

SLOWBOT = '''\
"""A hand-written agent, as a new user writes one: a module named for the agent."""

from agent_channel import agent_channel, wait_for_message


def factory(model=None):
    async def body():
        ch = agent_channel()
        while True:
            await wait_for_message(ch)

    return body
'''


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    return tmp_path / "rt"


def running_calls(rt: Path, target: str) -> list[str]:
    """Ids of the tool calls the conversation asked for and has no result of (raw messages)."""
    raw = messages(rt, target, every=True, full=True)
    done = {m.get("tool_call_id") for m in raw if m.get("role") == "tool"}
    return [c["id"] for m in raw for c in m.get("tool_calls") or [] if c["id"] not in done]


# -- cancel ---------------------------------------------------------------------------------


def test_a26_cancel_with_no_turn_running_says_nothing_was_running(rt: Path) -> None:
    with serving(rt, *AGENT) as served:
        (target,) = served.ids()
        wait_for(lambda: execution(rt, target)["status"] == "waiting for operator", "parked")
        run = ctl(rt, "cancel", target)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == (
            f"nothing to cancel: no turn is running in {target} (waiting for operator)"
        )
        answer = ctl_json(rt, "cancel", target)
        assert answer["sessionId"] == target and answer["cancelled"] is False
        assert execution(rt, target)["turnState"] != "cancelled"  # A12: nothing happened


def test_a26_cancel_of_a_running_turn_says_it_cancelled_it(rt: Path) -> None:
    with serving(rt, *AGENT, "--input", "block it") as served:
        (target,) = served.ids()
        wait_for(lambda: running_calls(rt, target), "the blocking tool call")
        answer = ctl_json(rt, "cancel", target)
        assert answer == {"sessionId": target, "cancelled": True}
        wait_for(lambda: execution(rt, target)["turnState"] == "cancelled", "turn cancelled")
        run = ctl(rt, "cancel", target)  # parked after the cancel (A11): nothing left to stop
        assert run.returncode == 0 and run.stdout.startswith("nothing to cancel"), run


# -- cancel-tool ----------------------------------------------------------------------------


def test_a22_cancel_tool_on_a_call_outside_any_region_says_it_cannot_be_cancelled_alone(
    rt: Path,
) -> None:
    with serving(rt, "--agent", "agents:regionless_agent", "--input", "go") as served:
        (target,) = served.ids()
        wait_for(lambda: running_calls(rt, target), "the tool call")
        (call_id,) = running_calls(rt, target)
        run = ctl(rt, "cancel-tool", target, call_id)
        one_line_failure(run, call_id, "cannot be cancelled alone", "agent-channel-acp cancel")
        answer = json.loads(ctl(rt, "cancel-tool", target, call_id, "--json").stdout)
        assert answer["cancelled"] is False and answer["reason"] == "not_in_region"
        assert running_calls(rt, target) == [call_id]  # still running: the verb did not lie
        one_line_failure(ctl(rt, "cancel-tool", target, "no-such-call"), "no running tool call")


def test_a22_cancel_tool_on_a_finished_call_says_it_finished(rt: Path) -> None:
    with serving(rt, *AGENT, "--input", "block it") as served:
        (target,) = served.ids()
        wait_for(lambda: running_calls(rt, target), "the blocking tool call")
        (call_id,) = running_calls(rt, target)
        assert ctl(rt, "cancel-tool", target, call_id).returncode == 0
        wait_for(lambda: not running_calls(rt, target), "the call's result")
        one_line_failure(ctl(rt, "cancel-tool", target, call_id), "already finished")


# -- the ids of running tool calls ----------------------------------------------------------


def test_a24_ls_and_messages_show_the_ids_of_running_tool_calls(rt: Path) -> None:
    with serving(rt, *AGENT, "--input", "block it") as served:
        (target,) = served.ids()
        wait_for(lambda: running_calls(rt, target), "the blocking tool call")
        (call_id,) = running_calls(rt, target)
        text = ctl(rt, "ls").stdout
        assert call_id in text and "Blocking: block it" in text, text
        (server,) = ctl_json(rt, "ls")["servers"]
        (listed,) = server["executions"]
        assert listed["runningToolCalls"] == [
            {"id": call_id, "title": "Blocking: block it", "kind": "execute"}
        ]
        assert call_id in ctl(rt, "messages", target).stdout
        summary = ctl_json(rt, "messages", target)["messages"]
        (asking,) = [m for m in summary if m.get("toolCalls")]
        assert asking["toolCalls"] == ["block"] and asking["toolCallIds"] == [call_id]
        assert ctl(rt, "cancel-tool", target, call_id).returncode == 0
        wait_for(lambda: not execution(rt, target)["runningToolCalls"], "the call's end")
        assert call_id not in ctl(rt, "ls").stdout


# -- end --------------------------------------------------------------------------------------

PROGRAM = """\
import asyncio, json, sys
from agent_channel import open_channel
from agent_channel_acp import attachable

async def main():
    async with attachable() as served, open_channel() as ch:
        ref = ch.ref()
        ref.mark_live()
        print(json.dumps({"id": served.add(ref, title="its own")}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


def test_end_on_an_execution_a_program_owns_speaks_plainly(rt: Path, tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    proc = subprocess.Popen(
        [sys.executable, str(program)],
        env=env(rt),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=HERE,
    )
    try:
        line = first_line(proc)
        assert line, f"the program did not start (exit status {proc.poll()})"
        target = json.loads(line)["id"]
        run = ctl(rt, "end", target)
        one_line_failure(run)
        assert run.stderr.strip() == (
            "agent-channel-acp: this execution was not started by the server: its program ends it"
        )
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(GUARD)
        if proc.stdout is not None:
            proc.stdout.close()


# -- serve: what the factory returns, where it is, what it is called ------------------------


def serve_fails(rt: Path, *args: str) -> tuple[str, str, int]:
    """``serve --json ARGS``, which must end by itself: its first stdout line (the
    announcement, if it got that far), its stderr and its exit status. One still serving
    after the hang guard is stopped, and the test fails saying so."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_channel_acp", "serve", "--json", *args],
        env=env(rt),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE,
    )
    line = first_line(proc)
    try:
        _, err = proc.communicate(timeout=GUARD)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=GUARD)
        raise AssertionError(f"serve kept serving ({line.strip()}); stderr: {err}") from None
    finally:
        stop(proc)
    return line, err, proc.returncode


@pytest.mark.parametrize(
    ("factory", "says"),
    [
        ("agents:int_factory", "the agent factory returned 42 (int), not a callable body"),
        ("agents:sync_body_factory", "calling the body returned 42, not an awaitable"),
    ],
)
def test_serve_ends_in_one_line_when_the_factory_does_not_give_a_runnable_body(
    rt: Path, factory: str, says: str
) -> None:
    line, err, code = serve_fails(rt, "--agent", factory)
    if factory == "agents:int_factory":  # known before serving: it never announces
        assert line == ""
    assert code == 1 and "Traceback" not in err
    (only,) = err.strip().splitlines()
    assert only.startswith("agent-channel-acp: serve: ") and says in only, only
    assert not list(rt.glob("*")), "serve left its record or socket behind"


def console_script() -> str:
    """The installed ``agent-channel-acp`` command (unlike ``python -m``, it does not put
    the current directory on the module path)."""
    return str(Path(sys.executable).parent / "agent-channel-acp")


@pytest.mark.parametrize("layout", ["module", "package"])
@pytest.mark.parametrize("command", ["serve", "stdio"])
def test_a_factory_module_in_the_current_directory_is_named_with_the_fix(
    rt: Path, tmp_path: Path, layout: str, command: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    if layout == "module":
        (work / "slowbot.py").write_text(SLOWBOT)
    else:
        (work / "slowbot").mkdir()
        (work / "slowbot" / "__init__.py").write_text(SLOWBOT)
    run = subprocess.run(
        [console_script(), command, "--agent", "slowbot:factory"],
        env=env(rt),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=work,
        timeout=GUARD,
    )
    one_line_failure(run, "No module named 'slowbot'", "PYTHONPATH=.")


def test_a_module_missing_everywhere_gets_no_pythonpath_hint(rt: Path, tmp_path: Path) -> None:
    run = subprocess.run(
        [console_script(), "serve", "--agent", "slowbot:factory"],
        env=env(rt),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=GUARD,
    )
    one_line_failure(run, "No module named 'slowbot'")
    assert "PYTHONPATH" not in run.stderr


def titles(rt: Path) -> list[str]:
    (server,) = ctl_json(rt, "ls")["servers"]
    return sorted(e["title"] for e in server["executions"])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), ["slowbot"]),
        (("--input", "Fix the tests"), ["slowbot: Fix the tests"]),
        (("--count", "2"), ["slowbot #1", "slowbot #2"]),
    ],
)
def test_a_hand_written_factory_is_titled_by_its_module(
    rt: Path, tmp_path: Path, args: tuple[str, ...], expected: list[str]
) -> None:
    (tmp_path / "slowbot.py").write_text(SLOWBOT)
    with serving(rt, "--agent", "slowbot:factory", *args, PYTHONPATH=f"{tmp_path}:{HERE}") as s:
        s.ids(len(expected))
        assert titles(rt) == expected


def test_a_body_that_names_its_agent_gives_the_title(rt: Path) -> None:
    with serving(rt, "--agent", "agents:named_agent") as served:
        served.ids()
        assert titles(rt) == ["scout"]


def test_factory_titles_named_by_the_author_stay(rt: Path) -> None:
    with serving(rt, *AGENT) as served:
        served.ids()
        assert titles(rt) == ["react_agent"]
