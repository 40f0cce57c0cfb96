"""stdin and stdout need not be pipes: /dev/null and regular files work (real CLI, subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import agent_env

CLI = [sys.executable, "-m", "agent_channel_acp", "stdio", "--agent", "agents:react_agent"]
TIMEOUT = 60  # a hang guard, not a timing assertion


def test_eof_on_dev_null_ends_the_process_cleanly() -> None:
    run = subprocess.run(
        CLI,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=agent_env(),
        timeout=TIMEOUT,
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stdout == ""


def test_requests_from_a_file_are_answered_into_a_file(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    replies = tmp_path / "replies.jsonl"
    requests.write_text(
        json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
        )
        + "\n[1, 2, 3]\n"
    )
    with requests.open("rb") as stdin, replies.open("wb") as stdout:
        run = subprocess.run(
            CLI,
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=agent_env(),
            timeout=TIMEOUT,
        )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    frames = {f.get("id"): f for f in map(json.loads, replies.read_text().splitlines())}
    assert frames[1]["result"]["agentInfo"]["name"] == "agent-channel-acp"
    assert frames[None]["error"]["code"] == -32600  # the filter still answers bad frames


def test_stdout_to_dev_null_with_requests_from_a_file(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "none"}}
    requests.write_text(json.dumps(cancel) + "\n")
    with requests.open("rb") as stdin:
        run = subprocess.run(
            CLI,
            stdin=stdin,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=agent_env(),
            timeout=TIMEOUT,
        )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert "cancel for unknown session" in run.stderr  # the request was read and handled


def test_the_demo_answers_session_new_from_a_file_into_a_file(tmp_path: Path) -> None:
    # the changelog's `stdio --demo < requests.jsonl > replies.jsonl`: stdin ends at once,
    # before the session/new handler has finished; its reply must still be written
    requests = tmp_path / "requests.jsonl"
    replies = tmp_path / "replies.jsonl"
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(tmp_path), "mcpServers": []},
        },
    ]
    requests.write_text("".join(json.dumps(line) + "\n" for line in lines))
    demo = [sys.executable, "-m", "agent_channel_acp", "stdio", "--demo"]
    with requests.open("rb") as stdin, replies.open("wb") as stdout:
        run = subprocess.run(
            demo,
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=agent_env(),
            timeout=TIMEOUT,
        )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    frames = {f.get("id"): f for f in map(json.loads, replies.read_text().splitlines())}
    assert frames[1]["result"]["agentInfo"]["name"] == "agent-channel-acp"
    assert frames[2]["result"]["sessionId"], frames
