"""The console answers the model's question (Q2, Q4; docs/questions.md), in a real terminal:
``agent-channel-acp attach`` in tmux, bound to ``serve`` running
``question_agents:asking_agent``. The console advertises no form elicitation, so a question
without choices is a ``[question]`` line that the operator's next message answers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from serving import messages, serving
from test_console_terminal import TMUX, header, only_execution, poll, terminal, transcript

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (CI installs it)")


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    path = tmp_path / "rt"
    path.mkdir(mode=0o700)
    return path


def test_q4_the_console_shows_the_question_and_its_next_message_answers_it(
    tmp_path: Path, rt: Path
) -> None:
    with serving(rt, "--agent", "question_agents:asking_agent", "--input", "free"):
        target = only_execution(rt)
        argv = [sys.executable, "-m", "agent_channel_acp", "attach", target]
        with terminal(tmp_path, argv, rt) as term:
            term.until("the bind", lambda s: "driver" in header(s))
            term.until(
                "the question", lambda s: "[question] What is the deadline?" in transcript(s)
            )
            term.keys("Friday noon", literal=True)
            term.keys("Enter")
            poll(
                lambda: "answer: Friday noon" in [m.get("text") for m in messages(rt, target)],
                "the model reading the answer",
            )
            term.until("the answer on screen", lambda s: "answer: Friday noon" in transcript(s))
            said = [(m.get("role"), m.get("text")) for m in messages(rt, target, every=True)]
            assert ("tool", "Friday noon") in said  # the tool's result: an answer...
            assert ("user", "Friday noon") not in said  # ...not a message to the agent
            term.keys("C-q")
            assert term.exit_status() == 0
