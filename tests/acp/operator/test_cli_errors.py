"""Every CLI failure is one clear line on stderr and a non-zero exit, never a traceback.

The real command line, as a subprocess (``python -m agent_channel_acp``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from agent_channel_acp import __version__
from conftest import HERE, agent_env

TIMEOUT = 60  # a hang guard, not a timing assertion


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=agent_env(**env),
        cwd=str(HERE),
        timeout=TIMEOUT,
    )


def one_line_error(run: subprocess.CompletedProcess[str]) -> str:
    """The single line a failed run printed, after checking it is a clean failure."""
    assert run.returncode not in (0, None), run
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert run.stdout == ""
    return lines[0]


def test_version_prints_the_package_version() -> None:
    run = cli("--version")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"agent-channel-acp {__version__}"


def test_an_unknown_flag_is_named() -> None:
    line = one_line_error(cli("stdio", "--bogus"))
    assert "--bogus" in line
    line = one_line_error(cli("stdio", "--demo", "--bogus"))
    assert "--bogus" in line


def test_a_missing_agent_choice_is_one_line() -> None:
    line = one_line_error(cli("stdio"))
    assert "--agent" in line and "--demo" in line


@pytest.mark.parametrize("where", ["flag", "env"])
def test_a_bad_log_level_is_one_line_naming_where_it_came_from(where: str) -> None:
    if where == "flag":
        run = cli("stdio", "--demo", "--log-level", "loud")
    else:
        run = cli("stdio", "--demo", AGENT_CHANNEL_ACP_LOG="loud")
    line = one_line_error(run)
    assert "'loud'" in line and "WARNING" in line
    assert ("AGENT_CHANNEL_ACP_LOG" in line) == (where == "env")


def test_a_log_level_is_case_insensitive() -> None:
    run = cli("stdio", "--agent", "agents:react_agent", "--log-level", "debug")
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_demo_tool_seconds_must_be_a_positive_number(value: str) -> None:
    line = one_line_error(cli("demo", "--tool-seconds", value))
    assert "--tool-seconds" in line and "positive" in line


@pytest.mark.parametrize("value", ["0", "-5", "many"])
def test_context_window_must_be_a_positive_integer(value: str) -> None:
    line = one_line_error(cli("stdio", "--demo", "--context-window", value))
    assert "--context-window" in line


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_such_module_here:factory", "No module named 'no_such_module_here'"),
        ("agents:no_such_factory", "has no attribute 'no_such_factory'"),
        ("agents:TOOLS", "not callable"),
        ("agents", "module:attr"),
        ("agents:", "module:attr"),
        ("broken_agents:factory", "RuntimeError: broken on import"),
    ],
)
def test_a_bad_agent_path_is_one_clear_line(tmp_path: Path, spec: str, says: str) -> None:
    (tmp_path / "broken_agents.py").write_text('raise RuntimeError("broken on import")\n')
    run = cli("stdio", "--agent", spec, PYTHONPATH=f"{HERE}:{tmp_path}")
    line = one_line_error(run)
    assert spec in line and says in line
    if spec.startswith("broken"):
        assert "broken_agents.py:1" in line  # where, so the author can find it


def without_demo_extra(tmp_path: Path) -> str:
    """A PYTHONPATH on which ``agent_channel_react`` (the demo extra) is not installed."""
    fake = tmp_path / "agent_channel_react"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'agent_channel_react'\","
        " name='agent_channel_react')\n"
    )
    return f"{tmp_path}:{HERE}"


@pytest.mark.parametrize("command", [["demo"], ["stdio", "--demo"]])
def test_the_demo_without_its_extra_is_one_line_saying_what_to_install(
    tmp_path: Path, command: list[str]
) -> None:
    line = one_line_error(cli(*command, PYTHONPATH=without_demo_extra(tmp_path)))
    assert (
        "; install the demo: pip install ./packages/channel-core ./packages/store-sqlite "
        "./packages/react-consumer "
        "'./packages/acp-producer[demo]' (from the root of a clone" in line
    )
