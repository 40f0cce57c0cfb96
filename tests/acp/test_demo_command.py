"""The README's demo command works and tells the story it promises."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading


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


def test_ctrl_c_during_the_demo_exits_130_quietly() -> None:
    # Ctrl-C in a terminal signals the whole foreground process group: the demo and the
    # agent it launched. A group of its own here, so the test can play the terminal.
    demo = subprocess.Popen(
        [sys.executable, "-m", "agent_channel_acp", "demo", "--json", "--tool-seconds", "600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    guard = threading.Timer(60, lambda: os.killpg(demo.pid, signal.SIGKILL))  # hang guard only
    guard.start()
    try:
        assert demo.stdout is not None
        started = 0
        for line in demo.stdout:  # wait until the redirect's (long) tool call runs
            event = json.loads(line)
            started += event["who"] == "tool" and event["text"].startswith("▶")
            if started == 2:
                break
        os.killpg(demo.pid, signal.SIGINT)
        out, err = demo.communicate()
    finally:
        guard.cancel()
    assert demo.returncode == 130, err
    assert err.strip() == "", err
    assert "Traceback" not in out
