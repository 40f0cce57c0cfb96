"""``agent-channel-acp demo --script``, exactly as the README runs it: a real ``serve --demo``
subprocess driven through the console's ACP client, its transcript on stdout, exit 0."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from agent_channel_acp.cli._parser import build_parser
from conftest import HERE, agent_env

pytestmark = pytest.mark.skipif(
    "attach" not in build_parser().format_help(),
    reason="the attach/demo wiring (notes/console-cli.diff) is not applied to _cli.py yet",
)


def _demo(rt: Path, *args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt), **env_vars)
    return subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", "demo", *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=180,  # a hang guard, not a timing assertion
    )


def _unreachable_url() -> str:
    """An OpenAI-compatible URL on a port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


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
        "waiting for operator · turn cancelled",
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
    url = _unreachable_url()
    run = _demo(rt, "--script", "--model", "some-model", OPENAI_BASE_URL=url)
    assert run.returncode == 1
    # once, in plain words: no log line from the server beside the demo's own, no repr()
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("agent-channel-acp: demo:"), run.stderr
    assert "cannot reach the model server at " + url in line, run.stderr
    assert '("' not in line, line
    assert not list(rt.glob("*.json")), "the demo's server left its discovery record behind"


def test_demo_model_flag_is_refused_for_the_stdio_tour(tmp_path: Path) -> None:
    run = _demo(tmp_path, "--stdio", "--model", "some-model")
    assert run.returncode == 2
    assert "--model is for the console and --script" in run.stderr


MODEL_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "AGENT_CHANNEL_MODEL")


def _readme_first_command() -> list[str]:
    """The README quickstart's first command, from ``uv run`` on (the ``pip install uv``
    before it has been done: CI runs with uv on PATH)."""
    readme = (HERE.parents[1] / "README.md").read_text()
    block = readme[readme.index("## 30-second quickstart") :]
    block = block[block.index("```sh\n") + 6 :]
    first = block.splitlines()[0]
    command = first[first.index("uv run ") :].split()
    assert command[-2:] == ["agent-channel-acp", "demo"], first
    return command


@pytest.mark.parametrize(
    "variables",
    [
        {"OPENAI_API_KEY": "sk-not-a-real-key"},
        {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
        {"OPENAI_API_KEY": "sk-not-a-real-key", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
    ],
    ids=lambda v: "+".join(v),
)
def test_readme_first_command_runs_the_scripted_demo_with_model_variables_set(
    tmp_path: Path, variables: dict[str, str]
) -> None:
    """A shell that has an OpenAI key or URL (but names no model) still gets the demo, plus
    one line on how to use a real model."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH (CI puts it there)")
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in MODEL_VARIABLES}
    env.update(variables, AGENT_CHANNEL_RUNTIME_DIR=str(rt), AGENT_CHANNEL_DEMO_TOOL_SECONDS="0.3")
    run = subprocess.run(
        [uv, *_readme_first_command()[1:]],
        env=env,
        capture_output=True,
        text=True,
        cwd=HERE.parents[1],
        stdin=subprocess.DEVNULL,
        timeout=300,  # a hang guard (uv may sync first), not a timing assertion
    )
    assert run.returncode == 0, run.stderr
    assert "demo finished: every step behaved as described" in run.stdout
    hints = [ln for ln in run.stderr.splitlines() if "no model is named" in ln]
    assert len(hints) == 1, run.stderr
    assert next(iter(variables)) in hints[0] and "--model NAME" in hints[0], hints


def test_a_model_named_by_agent_channel_model_is_used(tmp_path: Path) -> None:
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    url = _unreachable_url()
    run = _demo(rt, "--script", OPENAI_BASE_URL=url, AGENT_CHANNEL_MODEL="some-model")
    assert run.returncode == 1
    assert "cannot reach the model server at " + url in run.stderr
    assert "no model is named" not in run.stderr
