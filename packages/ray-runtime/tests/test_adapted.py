"""``launch("module:attr")`` naming a framework's agent object runs it through its installed
adapter (F1), as ``serve --agent`` does: resolved on the worker by ``agent_channel.lowlevel``.

The driver is a process of its own, its script's folder holding the agent's module (Ray puts
a driver's script folder on its workers' path), so the worker imports it by name.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from nodes import ray_env

AGENT = """
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

agent = Agent(TestModel(custom_output_text="hello from pydantic-ai"))
"""

DRIVER = """
import time
import agent_channel_ray as acr
from agent_channel import UserMessage
acr.start_cluster(num_cpus=1)
ref = acr.launch("ray_f1_agent:agent", live=True)
ref.post(UserMessage("hi"))
end = time.monotonic() + 90
while not any(m.text == "hello from pydantic-ai" for m in ref.messages()):
    assert time.monotonic() < end, (ref.messages(), [r.reason for r in acr.executions()])
    time.sleep(0.05)
print([(m.role, m.text) for m in ref.messages()])
assert ref.end()
"""


def test_f1_a_spec_naming_a_pydantic_ai_agent_runs_through_its_adapter() -> None:
    pytest.importorskip("pydantic_ai")
    pytest.importorskip("agent_channel_pydantic_ai")
    with tempfile.TemporaryDirectory(prefix="ray-f1-", dir="/tmp") as tmp:
        (Path(tmp) / "ray_f1_agent.py").write_text(AGENT)
        (Path(tmp) / "drive.py").write_text(DRIVER)
        run = subprocess.run(
            [sys.executable, str(Path(tmp) / "drive.py")],
            env=ray_env(tmp),
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        assert "('user', 'hi'), ('assistant', 'hello from pydantic-ai')" in run.stdout
