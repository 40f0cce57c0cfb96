"""A plain ``pydantic_ai.Agent`` served by the CLI through its adapter (found by entry point):
restored after a crash with ``--store`` (F6) and refused in one line when nothing serves the
object (F8). The rule suites run against it too (``consumer`` in tests/acp/conftest.py).
Real processes, pydantic-ai's own ``FunctionModel``; checked from the client side only.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from adapter_scenarios import parked, restored_after_a_kill, sent_during_a_tool
from adapter_scenarios import said as said_by
from serving import ctl, messages, one_line_failure, serving, wait_for

AGENT = "pai_agents:agent"


def test_f6_a_killed_server_restores_the_conversation_and_every_acknowledged_message_once(
    tmp_path: Path,
) -> None:
    said, seen = restored_after_a_kill(tmp_path, AGENT)
    users = [m["text"] for m in said if m["role"] == "user"]
    assert users == ["quick first", "gate=g1 wait here", "say=after", "inspect"]  # once each
    cut = [m for m in said if m["role"] == "tool" and m["error"]]
    assert [m["content"] for m in cut] == ["Tool call interrupted by a restart."]
    assert any(m["role"] == "assistant" and m["text"] == "after" for m in said)
    # What the model read after the restart: pydantic-ai's own history, restored through its
    # serialisation, the cut call answered, each message once.
    assert [m["text"] for m in seen if m["role"] == "user"] == users
    assert [m["error"] for m in seen if m["role"] == "tool"] == [
        None,
        "Tool call interrupted by a restart.",
    ]


def test_f2_messages_sent_during_a_tool_reach_the_next_request_after_its_result_once(
    tmp_path: Path,
) -> None:
    seen = sent_during_a_tool(tmp_path, AGENT)
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
            "(installed adapters: langgraph, openai-agents, pydantic-ai)",
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
        wait_for(lambda: parked(rt, sid), "answered by pydantic-ai's TestModel")
        said = said_by(rt, sid)
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
