"""The console's children in a real terminal (K11, K12): ``agent-channel-acp attach`` inside
tmux on a ``serve`` running the suite's orchestrator; the tree in the side panel, and a
child stopped by key (checked on screen and through the list)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from serving import execution, serving
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
