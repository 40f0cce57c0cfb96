"""A plain OpenAI Agents SDK ``agents.Agent`` served by the CLI through its adapter (found
by entry point): messages after a tool's result (F2), an interrupt in a tool repaired and
continued (F3), restored after a crash with ``--store`` (F6), handoffs (F7), refused in one
line when nothing serves the object (F8), and ``attachable().run(agent)`` (F1). The rule
suites run against it too (``consumer`` in tests/acp/conftest.py). Real processes, the
SDK's own ``ScriptedModel``, tracing off; checked from the client side only.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from adapter_scenarios import inspect, parked, restored_after_a_kill, sent_during_a_tool
from adapter_scenarios import said as said_by
from serving import GUARD, HERE, ctl, env, execution, messages, one_line_failure, serving, wait_for

AGENT = "oai_agents:agent"
OPERATOR_CUT = "Tool call cancelled by the operator."


def test_f2_messages_sent_during_a_tool_reach_the_next_request_after_its_result_once(
    tmp_path: Path,
) -> None:
    seen = sent_during_a_tool(tmp_path, AGENT)
    read = [(m["role"], m["text"], m.get("tool_calls")) for m in seen[1:]]  # after the system's
    assert read == [
        ("user", "gate=g1 start", None),
        ("assistant", "", ["gate"]),
        ("tool", "gate g1 opened", None),
        ("user", "first\n\nsecond", None),  # the next request, after the result, in order, once
        ("assistant", "echo: first\n\nsecond", None),  # the model read them before it answered
        ("user", "inspect", None),
    ]


def test_f3_an_interrupt_stops_the_tool_repairs_the_call_and_the_redirect_continues(
    tmp_path: Path,
) -> None:
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    gates = Path(tempfile.mkdtemp(prefix="acp-gates-"))
    with serving(
        rt, "--agent", AGENT, "--input", "gate=g1 start", AGENT_CHANNEL_TEST_GATES=str(gates)
    ) as s:
        (sid,) = s.ids()
        wait_for(lambda: execution(rt, sid)["runningToolCalls"], "the gate tool running")
        assert ctl(rt, "cancel", sid).returncode == 0
        wait_for(lambda: not execution(rt, sid)["runningToolCalls"], "the gate tool stopped")
        (gates / "g1").touch()  # too late: a tool that went on would now finish
        seen = inspect(rt, sid)  # the redirect: the same conversation goes on
        said = said_by(rt, sid)
    read = [(m["role"], m["text"], m.get("tool_calls")) for m in seen[1:]]
    assert read == [
        ("user", "gate=g1 start", None),
        ("assistant", "", ["gate"]),  # kept (the SDK's to_input_list() would drop it)
        ("tool", OPERATOR_CUT, None),  # answered: the tool did not run to its end
        ("user", "inspect", None),
    ]
    tools = [m for m in said if m["role"] == "tool"]
    assert [(m["content"], m["error"]) for m in tools] == [(OPERATOR_CUT, OPERATOR_CUT)]


def test_f6_a_killed_server_restores_the_conversation_and_every_acknowledged_message_once(
    tmp_path: Path,
) -> None:
    said, seen = restored_after_a_kill(tmp_path, AGENT)
    users = [m["text"] for m in said if m["role"] == "user"]
    assert users == ["quick first", "gate=g1 wait here", "say=after", "inspect"]  # once each
    cut = [m for m in said if m["role"] == "tool" and m["error"]]
    assert [m["content"] for m in cut] == ["Tool call interrupted by a restart."]
    assert any(m["role"] == "assistant" and m["text"] == "after" for m in said)
    # What the model read after the restart: the SDK's own input items, restored, the cut
    # call kept and answered, each message once.
    assert [m["text"] for m in seen if m["role"] == "user"] == users
    calls = [m["tool_calls"] for m in seen if m.get("tool_calls")]
    assert calls == [["quick"], ["gate"]]
    assert [m["text"] for m in seen if m["role"] == "tool"] == [
        "done",
        "Tool call interrupted by a restart.",
    ]


def test_f7_after_a_handoff_the_next_prompts_go_to_the_agent_handed_to(tmp_path: Path) -> None:
    """A handoff ends its run with the agent handed to: the next runs (each turn is one)
    start from it (``last_agent``), with the whole history, and its tools are cards."""
    rt = tmp_path
    with serving(rt, "--agent", "oai_agents:triage", "--input", "handoff please") as s:
        (sid,) = s.ids()
        wait_for(lambda: parked(rt, sid), "the handoff answered")
        assert ctl(rt, "send", sid, "quick now").returncode == 0  # a tool only the helper has
        wait_for(lambda: parked(rt, sid) and said_by(rt, sid)[-1]["role"] == "assistant", "quick")
        seen = inspect(rt, sid)
        said = said_by(rt, sid)
    assert seen[0] == {"role": "system", "text": "You are the helper."}
    calls = [m["tool_calls"] for m in seen if m.get("tool_calls")]
    assert calls == [["transfer_to_helper"], ["quick"]]
    assert [m["text"] for m in said if m["role"] == "tool"][-1] == "done"


@pytest.mark.parametrize("command", ["stdio", "serve"])
@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (
            "oai_agents:not_an_agent",
            "it is a builtins.object, not callable: expected an agent factory "
            "(factory(model) -> async body) or an agent object an adapter serves "
            "(installed adapters: langgraph, openai-agents, pydantic-ai)",
        ),
        (
            "oai_agents_future:agent",
            "the openai-agents adapter refused it: agent-channel-openai-agents serves "
            "openai-agents >=0.24,<0.25; found 0.99.0",
        ),
    ],
)
def test_f8_an_object_nothing_serves_is_one_line(
    tmp_path: Path, command: str, spec: str, says: str
) -> None:
    run = ctl(tmp_path, command, "--agent", spec)
    one_line_failure(run, f"cannot serve {spec}: {says}")
    assert run.stdout == ""


def test_f1_attachable_runs_the_agent_object_and_the_verbs_drive_it(tmp_path: Path) -> None:
    """``attachable().run(agent)`` (in its own process, ``oai_program.py``): the plain agent
    object, served to the verbs of another process (``send``, then ``messages``)."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "oai_program.py")],
        env=env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=HERE,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY "), line
        sid = line.split()[1]
        sent = ctl(tmp_path, "send", sid, "say=attached")
        assert sent.returncode == 0, sent.stderr

        def answered() -> bool:
            said = messages(tmp_path, sid)
            return bool(said) and said[-1]["text"] == "attached"

        wait_for(answered, "the agent's answer")
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(GUARD)
