"""``agent-channel-acp demo --script``, exactly as the README runs it: a real ``serve --demo``
subprocess driven through the console's ACP client, its transcript on stdout, exit 0."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from agent_channel_acp._cli import build_parser
from conftest import HERE, agent_env

pytestmark = pytest.mark.skipif(
    "attach" not in build_parser().format_help(),
    reason="the attach/demo wiring (notes/console-cli.diff) is not applied to _cli.py yet",
)


def _demo(rt: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt))
    return subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", "demo", *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=180,  # a hang guard, not a timing assertion
    )


def test_demo_script_plays_the_operator_and_prints_a_readable_transcript(tmp_path: Path) -> None:
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    run = _demo(rt, "--script")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    steps = [
        "attached to",
        "operator sends: 'What are you working on?'",
        "shown as queued",
        "operator cancels just this tool call",
        "its echo replaced the queued line",
        "operator interrupts the turn (Esc)",
        "[tool cancelled]",
        "waiting for you",
        "operator redirects:",
        "operator queues a second thought",
        "withdrawn before the agent read it",
        "operator lets the agent finish",
        "[tool done]",
        "The execution has ended",
        "demo finished: every step behaved as described",
    ]
    at = 0
    for step in steps:  # in this order
        found = out.find(step, at)
        assert found >= 0, f"{step!r} missing after position {at}:\n{out}"
        at = found
    conversation = out[out.index("The conversation, as the console shows it:") :]
    assert "operator> Change of plan" in conversation
    assert "operator> Also add a section on pricing." not in conversation  # withdrawn
    assert not list(rt.glob("*.json")), "the demo's server left its discovery record behind"


def test_demo_without_a_terminal_plays_the_script(tmp_path: Path) -> None:
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    run = _demo(rt)  # stdout is a pipe here, as in CI
    assert run.returncode == 0, run.stderr
    assert "demo finished: every step behaved as described" in run.stdout


def test_demo_model_flag_uses_the_configured_endpoint_and_names_it_when_unreachable(
    tmp_path: Path,
) -> None:
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    env = agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt), OPENAI_BASE_URL=url)
    run = subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", "demo", "--script", "--model", "some-model"],
        env=env,
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=180,  # a hang guard, not a timing assertion
    )
    assert run.returncode == 1
    (line,) = [ln for ln in run.stderr.splitlines() if ln.startswith("agent-channel-acp: demo:")]
    assert "cannot reach the model server at " + url in line, run.stderr
    assert not list(rt.glob("*.json")), "the demo's server left its discovery record behind"


def test_demo_model_flag_is_refused_for_the_stdio_tour(tmp_path: Path) -> None:
    run = _demo(tmp_path, "--stdio", "--model", "some-model")
    assert run.returncode == 2
    assert "--model is for the console and --script" in run.stderr
