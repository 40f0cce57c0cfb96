"""The console's children (K11, K12) in Textual's headless harness, against a real
``agent-channel-acp serve`` running the suite's orchestrator (``orchestrator_agent``) on a
real unix socket: the tree in the side panel, a child selected by key, steered with the
input line, its tail read, another stopped by key."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from agent_channel_acp.operator.console._app import Console
from conftest import GUARD, HERE, agent_env
from serving import stop
from test_console_app import SIZE, panel, shown, until, views

pytestmark = pytest.mark.anyio


@contextmanager
def orchestrating(rt: Path) -> Iterator[subprocess.Popen[str]]:
    """``serve --agent agents:orchestrator_agent`` spawning alpha and beta at once."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agent_channel_acp",
            "serve",
            "--json",
            "--agent",
            "agents:orchestrator_agent",
            "--input",
            "spawn alpha beta",
        ],
        env=agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt)),
        stdout=subprocess.PIPE,
        text=True,
        cwd=HERE,
    )
    try:
        out: list[str] = []
        stdout = proc.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: out.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(GUARD * 3)
        assert out and json.loads(out[0])["pid"] == proc.pid, f"serve did not start: {out}"
        yield proc
    finally:
        stop(proc)


@pytest.fixture
def rt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "rt"
    path.mkdir(mode=0o700)
    monkeypatch.setenv("AGENT_CHANNEL_RUNTIME_DIR", str(path))
    return path


def card(app: Console, name: str) -> str:
    """The child's card as the transcript shows it."""
    views_of = [v for v in views(app, "tool") if v.entry.title.startswith(f"Child agent {name}:")]
    return "\n".join(str(v.content) for v in views_of)


async def test_k11_k12_the_console_shows_the_tree_steers_reads_and_stops_a_child_by_key(
    rt: Path,
) -> None:
    with orchestrating(rt):
        app = Console()
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, "the bind", lambda: app.state.role == "driver")
            await until(
                pilot,
                "both children waiting in the tree",
                lambda: panel(app, "#children").count("waiting") == 2,
            )
            tree = panel(app, "#children")
            assert tree.index("alpha") < tree.index("beta") and "Children[/] (2)" in tree
            assert card(app, "alpha") and card(app, "beta")  # a card each in the transcript
            assert "(other)" not in card(app, "alpha")  # a kind that says nothing is not shown

            await pilot.press("ctrl+o")  # alpha
            await until(pilot, "alpha selected", lambda: "▸ [b]alpha" in panel(app, "#children"))
            await pilot.click("#input")
            await pilot.press(*"finish now")
            await pilot.press("ctrl+e")
            await until(
                pilot,
                "the steer's outcome",
                lambda: "steer for child alpha: delivered" in shown(app, "note"),
            )
            await until(
                pilot, "alpha completed", lambda: "ended (completed)" in panel(app, "#children")
            )
            await pilot.press("ctrl+r")
            await until(
                pilot, "alpha's tail", lambda: "assistant: alpha: done" in shown(app, "note")
            )

            await pilot.press("ctrl+o")  # beta
            await until(pilot, "beta selected", lambda: "▸ [b]beta" in panel(app, "#children"))
            await pilot.press("ctrl+x")
            await until(pilot, "beta stopped", lambda: "ended (killed)" in panel(app, "#children"))
            assert "stopped child beta" in shown(app, "note")
            await until(pilot, "beta's card failed", lambda: "killed" in card(app, "beta"))
            await until(
                pilot,
                "the parent answering the note",
                lambda: "seen: The operator stopped child beta" in shown(app, "agent"),
            )
