"""``agent-channel-acp demo --orchestrator`` piped (K11): a real ``serve --demo orchestrator``
watched through the console's ACP client; the children's lives on stdout, exit 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HERE, agent_env


def _has_orchestrator_demo() -> bool:
    try:
        from agent_channel_react import demo
    except ImportError:
        return False
    return hasattr(demo, "orchestrator")


@pytest.mark.skipif(not _has_orchestrator_demo(), reason="the orchestrator demo is not there")
def test_k11_demo_orchestrator_piped_prints_each_childs_life_and_the_answer(
    tmp_path: Path,
) -> None:
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    steps = "1.0"  # seconds: the watcher binds long before the first child (two steps) ends
    run = subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", "demo", "--orchestrator"],
        env=agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt), AGENT_CHANNEL_DEMO_TOOL_SECONDS=steps),
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=180,  # a hang guard, not a timing assertion
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    children = [line.strip() for line in lines if line.startswith("  child ")]
    names = {line.split()[1].rstrip(":") for line in children}
    assert len(names) == 3
    for name in names:  # each seen running, then ended
        mine = [line for line in children if line.startswith(f"child {name}:")]
        assert mine[0].endswith("running") and "ended (" in mine[-1], mine
    ends = [line for line in children if "ended (" in line]
    assert sum("ended (killed)" in line for line in ends) == 1
    assert sum("ended (completed)" in line for line in ends) == 2
    assert any(line.startswith("the orchestrator answers: ") for line in lines)
    assert lines[-1] == "demo finished: every step behaved as described"
    bad = subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", "demo", "--orchestrator", "--stdio"],
        env=agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt)),
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=60,
    )
    assert bad.returncode == 2 and "--orchestrator is for the console" in bad.stderr
