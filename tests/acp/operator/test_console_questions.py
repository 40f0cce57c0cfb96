"""The console answers the model's question (Q2, Q4; docs/questions.md), in a real terminal:
``agent-channel-acp attach`` in tmux, bound to ``serve`` running
``question_agents:asking_agent``. The console advertises form elicitation: each question is
a box in its side panel that the input line answers (a choice by its number or its words, a
form field after field), and the box goes when the server stops asking (Q3, Q4)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from serving import ctl, messages, serving
from test_console_terminal import (
    TMUX,
    Terminal,
    header,
    only_execution,
    poll,
    terminal,
    transcript,
)

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (CI installs it)")


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    path = tmp_path / "rt"
    path.mkdir(mode=0o700)
    return path


def side(screen: str) -> str:
    """The side panel's text as one line (right of its border, above the input line)."""
    lines = screen.splitlines()
    box = next((i for i, line in enumerate(lines) if line.startswith("▊")), None)
    if box is None or len(lines) < 2:  # not drawn yet
        return ""
    edge = lines[1].rfind("│")
    return " ".join(" ".join(line[edge + 1 :] for line in lines[1:box]).split())


@contextmanager
def asking(tmp_path: Path, rt: Path, word: str) -> Iterator[tuple[str, Terminal]]:
    """``serve`` running the asking agent on the task ``word`` (``choose``, ``form``,
    ``free``), and ``attach`` on its execution in tmux: the target and the terminal."""
    with serving(rt, "--agent", "question_agents:asking_agent", "--input", word):
        target = only_execution(rt)
        argv = [sys.executable, "-m", "agent_channel_acp", "attach", target]
        with terminal(tmp_path, argv, rt) as term:
            yield target, term


def said(rt: Path, target: str) -> list[tuple[object, object]]:
    return [(m.get("role"), m.get("text")) for m in messages(rt, target, every=True)]


def test_q4_the_console_shows_the_question_and_its_next_message_answers_it(
    tmp_path: Path, rt: Path
) -> None:
    with asking(tmp_path, rt, "free") as (target, term):
        term.until("the bind", lambda s: "driver" in header(s))
        term.until(
            "the question", lambda s: "the agent asks: What is the deadline?" in transcript(s)
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


def test_q2_the_console_answers_a_choice_with_any_choice_by_its_number(
    tmp_path: Path, rt: Path
) -> None:
    with asking(tmp_path, rt, "choose") as (target, term):
        asked = term.until("the question", lambda s: "Which colour?" in s)
        term.keys("2", literal=True)  # the second choice, as the box numbers them
        term.keys("Enter")
        poll(
            lambda: "answer: blue" in [m.get("text") for m in messages(rt, target)],
            "the model reading the second choice",
        )
        assert ("user", "2") not in said(rt, target)  # an answer, not a message
        # what the operator read: each choice numbered, and the keys that answer
        assert "1 red" in side(asked) and "2 blue" in side(asked), side(asked)
        assert "Enter answers" in side(asked) and "ctrl+n declines" in side(asked)
        term.keys("C-q")
        assert term.exit_status() == 0


def test_q2_the_console_fills_a_forms_fields_one_after_the_other(tmp_path: Path, rt: Path) -> None:
    with asking(tmp_path, rt, "form") as (target, term):
        term.until("the question", lambda s: "Trip details?" in s)
        term.keys("Lisbon", literal=True)
        term.keys("Enter")
        term.until("the next field", lambda s: "city: Lisbon" in side(s))
        term.keys("3", literal=True)
        term.keys("Enter")

        def answered() -> bool:
            texts = [str(m.get("text")) for m in messages(rt, target)]
            return any("city: Lisbon" in t and "days: 3" in t for t in texts)

        poll(answered, "the model reading both fields")
        assert ("user", "Lisbon") not in said(rt, target)
        assert ("user", "3") not in said(rt, target)
        term.keys("C-q")
        assert term.exit_status() == 0


def test_q4_an_answer_from_the_shell_drops_the_consoles_question_and_pending_header(
    tmp_path: Path, rt: Path
) -> None:
    with asking(tmp_path, rt, "choose") as (target, term):
        term.until("the question", lambda s: "Which colour?" in side(s))
        assert ctl(rt, "answer", target, "blue").returncode == 0  # another client
        # the box goes before the model's answer arrives (same connection, in order)
        after = term.until("the answer on screen", lambda s: "answer: blue" in transcript(s))
        assert "Which colour?" not in side(after), side(after)
        assert "pending" not in header(after), header(after)
        term.keys("C-q")
        assert term.exit_status() == 0
