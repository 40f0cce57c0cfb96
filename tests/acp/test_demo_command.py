"""The README's demo command works and tells the story it promises."""

from __future__ import annotations

import json
import subprocess
import sys


def test_demo_command_stops_mid_tool_then_follows_the_redirect() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", "demo", "--json", "--tool-seconds", "0.5"],
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard, not a timing assertion
    )
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert lines[-1]["stop_reasons"] == ["cancelled", "end_turn", "end_turn", "end_turn"]
    statuses = [line.get("status") or line.get("stop_reason") for line in lines]
    statuses = [s for s in statuses if s]
    # the stopped tool is reported failed before its prompt answers "cancelled"
    assert statuses[:2] == ["failed", "cancelled"]
    said = "".join(line["text"] for line in lines if line["who"] == "agent")
    assert "did not finish: search (cancelled" in said  # the model saw the repaired call
