"""The console's children in a real terminal (K11, K12): ``agent-channel-acp attach`` inside
tmux on a ``serve`` running the suite's orchestrator; the tree in the side panel, and a
child stopped by key (checked on screen and through the list)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from serving import execution, executions, serving
from test_console_terminal import TMUX, poll, terminal

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (CI installs it)")

AGENT = ("--agent", "agents:orchestrator_agent", "--input", "spawn alpha beta")


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    path = tmp_path / "rt"
    path.mkdir(mode=0o700)
    return path


def test_k12_the_tree_on_screen_and_a_child_stopped_by_key(tmp_path: Path, rt: Path) -> None:
    with serving(rt, *AGENT) as served:
        (target,) = served.ids()
        argv = [sys.executable, "-m", "agent_channel_acp", "attach", target]
        with terminal(tmp_path, argv, rt) as term:
            screen = term.until(
                "the tree", lambda s: "Children (2)" in s and s.count(" waiting") >= 2
            )
            assert screen.index("alpha") < screen.index("beta")
            term.keys("C-o")
            term.keys("C-o")  # the second: beta
            term.until("beta selected", lambda s: "▸ beta" in s)
            term.keys("C-x")
            term.until("beta stopped", lambda s: "ended (killed)" in s)

            def children() -> dict[str, str]:
                rows = execution(rt, target).get("children", [])
                return {c["name"]: c["end"] or c["status"] for c in rows}

            poll(lambda: children() == {"alpha": "waiting", "beta": "killed"}, "beta alone ended")
            term.keys("C-q")
            assert term.exit_status() == 0


def test_k12_demo_orchestrator_opens_the_console_on_the_tree(tmp_path: Path, rt: Path) -> None:
    """``demo --orchestrator`` in a terminal: the console on ``serve --demo orchestrator``;
    its researchers' steps never end here, so the only end is the one the key makes."""
    argv = [sys.executable, "-m", "agent_channel_acp", "demo", "--orchestrator"]
    with terminal(tmp_path, argv, rt, AGENT_CHANNEL_DEMO_TOOL_SECONDS="600") as term:
        term.until("the tree", lambda s: "Children (3)" in s and s.count(" running") >= 3)
        term.keys("C-o")
        term.until("a child selected", lambda s: "▸ " in s)
        term.keys("C-x")
        term.until("the child stopped", lambda s: "ended (killed)" in s)
        (listed,) = executions(rt)
        first = listed["children"][0]  # the first in the tree: the one ctrl+o selected
        assert first["end"] == "killed" and first["reason"] == "stopped by the operator"
        term.keys("C-q")
        assert term.exit_status() == 0
