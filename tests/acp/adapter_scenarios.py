"""What each framework adapter's own tests do over ``serve`` (tests/acp/adapters/): the
scenarios are the same for every framework, the model's view of them is each one's own.

Each returns what the client reads (``said``: the conversation, full, each with its
``text``) and what the model read at a final ``inspect`` prompt (``seen``: the scripted
model's own summary of its input).
"""

from __future__ import annotations

import json
import signal
import tempfile
from pathlib import Path
from typing import Any

from serving import ctl, execution, messages, serving, wait_for

Said = list[dict[str, Any]]


def parked(rt: Path, sid: str) -> bool:
    return execution(rt, sid)["status"] == "waiting for operator"


def said(rt: Path, sid: str) -> Said:
    """The conversation as the client reads it (full), each with its ``text``."""
    out = messages(rt, sid, every=True, full=True)
    for m in out:
        content = m["content"]
        m["text"] = (
            content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
        )
    return out


def inspect(rt: Path, sid: str) -> Said:
    """What the model read at an ``inspect`` prompt (the scripted model reports it)."""
    assert ctl(rt, "send", sid, "inspect").returncode == 0
    wait_for(lambda: said(rt, sid)[-1]["role"] == "assistant" and parked(rt, sid), "inspect")
    return json.loads(said(rt, sid)[-1]["text"])


def restored_after_a_kill(tmp_path: Path, agent: str) -> tuple[Said, Said]:
    """F6: a prompt answered, a gate tool running, a message queued behind it, the server
    killed; a restart with the same ``--store`` answers the queued message, then
    ``inspect``."""
    rt, store = tmp_path / "rt", tmp_path / "store.db"
    rt.mkdir(mode=0o700)
    gate_env = {"AGENT_CHANNEL_TEST_GATES": tempfile.mkdtemp(prefix="acp-gates-")}
    args = ("--agent", agent, "--store", str(store))
    with serving(rt, *args, "--input", "quick first", **gate_env) as s:
        (sid,) = s.ids()
        wait_for(lambda: parked(rt, sid), "the first prompt answered")
        assert ctl(rt, "send", sid, "gate=g1 wait here").returncode == 0
        wait_for(lambda: execution(rt, sid)["runningToolCalls"], "the gate tool running")
        assert ctl(rt, "send", sid, "say=after").returncode == 0  # queued behind the tool
        assert s.stop(signal.SIGKILL) == -signal.SIGKILL
    with serving(rt, *args, **gate_env) as s:
        assert s.ids() == [sid]  # the same execution, restored
        wait_for(lambda: parked(rt, sid), "the restored run answered the queued message")
        seen = inspect(rt, sid)
        return said(rt, sid), seen


def sent_during_a_tool(tmp_path: Path, agent: str) -> Said:
    """F2: "first" and "second" sent while a gate tool runs; the gate opened; ``inspect``."""
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    gates = Path(tempfile.mkdtemp(prefix="acp-gates-"))
    with serving(
        rt, "--agent", agent, "--input", "gate=g1 start", AGENT_CHANNEL_TEST_GATES=str(gates)
    ) as s:
        (sid,) = s.ids()
        wait_for(lambda: execution(rt, sid)["runningToolCalls"], "the gate tool running")
        for text in ("first", "second"):
            assert ctl(rt, "send", sid, text).returncode == 0  # acknowledged, queued
        (gates / "g1").touch()
        wait_for(lambda: parked(rt, sid), "the turn ended")
        return inspect(rt, sid)
