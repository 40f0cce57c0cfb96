"""A plain ``pydantic_ai.Agent`` served by the CLI through its adapter (found by entry point):
restored after a crash with ``--store`` (F6) and refused in one line when nothing serves the
object (F8). The rule suites run against it too (``consumer`` in tests/acp/conftest.py).
Real processes, pydantic-ai's own ``FunctionModel``; checked from the client side only.
"""

from __future__ import annotations

import json
import signal
import tempfile
from pathlib import Path
from typing import Any

import pytest
from serving import ctl, execution, messages, one_line_failure, serving, wait_for

AGENT = "pai_agents:agent"


def _parked(rt: Path, sid: str) -> bool:
    return execution(rt, sid)["status"] == "waiting for operator"


def _said(rt: Path, sid: str) -> list[dict[str, Any]]:
    """The conversation as the client reads it (full), each with its ``text``."""
    out = messages(rt, sid, every=True, full=True)
    for m in out:
        content = m["content"]
        m["text"] = (
            content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
        )
    return out


def test_f6_a_killed_server_restores_the_conversation_and_every_acknowledged_message_once(
    tmp_path: Path,
) -> None:
    rt, store = tmp_path / "rt", tmp_path / "store.db"
    rt.mkdir(mode=0o700)
    gates = tempfile.mkdtemp(prefix="acp-gates-")
    gate_env = {"AGENT_CHANNEL_TEST_GATES": gates}
    args = ("--agent", AGENT, "--store", str(store))
    with serving(rt, *args, "--input", "quick first", **gate_env) as s:
        (sid,) = s.ids()
        wait_for(lambda: _parked(rt, sid), "the first prompt answered")
        assert ctl(rt, "send", sid, "gate=g1 wait here").returncode == 0
        wait_for(lambda: execution(rt, sid)["runningToolCalls"], "the gate tool running")
        assert ctl(rt, "send", sid, "say=after").returncode == 0  # queued behind the tool
        assert s.stop(signal.SIGKILL) == -signal.SIGKILL
    with serving(rt, *args, **gate_env) as s:
        assert s.ids() == [sid]  # the same execution, restored
        wait_for(lambda: _parked(rt, sid), "the restored run answered the queued message")
        assert ctl(rt, "send", sid, "inspect").returncode == 0
        wait_for(lambda: _said(rt, sid)[-1]["role"] == "assistant" and _parked(rt, sid), "inspect")
        said = _said(rt, sid)
    users = [m["text"] for m in said if m["role"] == "user"]
    assert users == ["quick first", "gate=g1 wait here", "say=after", "inspect"]  # once each
    cut = [m for m in said if m["role"] == "tool" and m["error"]]
    assert [m["content"] for m in cut] == ["Tool call interrupted by a restart."]
    assert any(m["role"] == "assistant" and m["text"] == "after" for m in said)
    # What the model read after the restart: pydantic-ai's own history, restored through its
    # serialisation, the cut call answered, each message once.
    seen = json.loads(said[-1]["text"])
    assert [m["text"] for m in seen if m["role"] == "user"] == users
    assert [m["error"] for m in seen if m["role"] == "tool"] == [
        None,
        "Tool call interrupted by a restart.",
    ]


def test_f2_messages_sent_during_a_tool_reach_the_next_request_after_its_result_once(
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
        for text in ("first", "second"):
            assert ctl(rt, "send", sid, text).returncode == 0  # acknowledged, queued
        (gates / "g1").touch()
        wait_for(lambda: _parked(rt, sid), "the turn ended")
        assert ctl(rt, "send", sid, "inspect").returncode == 0
        wait_for(lambda: _said(rt, sid)[-1]["role"] == "assistant" and _parked(rt, sid), "inspect")
        seen = json.loads(_said(rt, sid)[-1]["text"])
    roles = [(m["role"], m["text"]) for m in seen if m["role"] != "assistant"]
    assert roles == [
        ("system", "You are a test agent."),
        ("user", "gate=g1 start"),
        ("tool", "gate g1 opened"),
        ("user", "first\n\nsecond"),  # one request later, after the result, in post order
        ("user", "inspect"),
    ]


@pytest.mark.parametrize("command", ["stdio", "serve"])
@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (
            "pai_agents:not_an_agent",
            "it is a builtins.object, not callable: expected an agent factory "
            "(factory(model) -> async body) or an agent object an adapter serves "
            "(installed adapters: openai-agents, pydantic-ai)",
        ),
        (
            "pai_agents_future:agent",
            "the pydantic-ai adapter refused it: agent-channel-pydantic-ai serves "
            "pydantic-ai-slim >=2.78,<2.79; found 2.99.0",
        ),
    ],
)
def test_f8_an_object_nothing_serves_is_one_line(
    tmp_path: Path, command: str, spec: str, says: str
) -> None:
    run = ctl(tmp_path, command, "--agent", spec)
    one_line_failure(run, f"cannot serve {spec}: {says}")
    assert run.stdout == ""


def test_f1_the_model_flag_overrides_the_agents_own(tmp_path: Path) -> None:
    """``--model NAME`` reaches pydantic-ai (``iter(model=NAME)``): ``test`` is its TestModel."""
    rt = tmp_path
    with serving(rt, "--agent", "pai_agents:plain", "--model", "test", "--input", "hello") as s:
        (sid,) = s.ids()
        wait_for(lambda: _parked(rt, sid), "answered by pydantic-ai's TestModel")
        said = _said(rt, sid)
    # pydantic-ai's own TestModel answers, not the agent's FunctionModel (which echoes)
    assert said[-1]["role"] == "assistant" and "echo" not in said[-1]["text"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_f1_attachable_runs_the_agent_object_and_the_verbs_drive_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``attachable().run(agent)``: the plain agent object, served to the verbs of another
    process (``send``, then ``messages``) as ``serve`` serves it."""
    import anyio
    import pai_agents
    from agent_channel_acp import attachable

    monkeypatch.setenv("AGENT_CHANNEL_RUNTIME_DIR", str(tmp_path))
    async with attachable() as served, anyio.create_task_group() as tg:
        tg.start_soon(lambda: served.run(pai_agents.agent, title="pai"))
        with anyio.fail_after(30):  # a hang guard
            while not served.executions():
                await anyio.lowlevel.checkpoint()
        (sid,) = [e["id"] for e in served.executions()]
        sent = await anyio.to_thread.run_sync(ctl, tmp_path, "send", sid, "say=attached")
        assert sent.returncode == 0, sent.stderr

        def answered() -> bool:
            said = messages(tmp_path, sid)
            return bool(said) and said[-1]["text"] == "attached"

        await anyio.to_thread.run_sync(wait_for, answered, "the agent's answer")
        tg.cancel_scope.cancel()
