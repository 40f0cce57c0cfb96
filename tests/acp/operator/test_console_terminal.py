"""The operator console in a real terminal: ``agent-channel-acp demo`` / ``attach`` inside tmux
(120x36), driven with ``send-keys`` and read back with ``capture-pane``.

What a person sees is checked where they see it: the end of the conversation on screen after
an interrupt and a redirect, the scroll keys in the key bar, text the agent never kept marked
as interrupted, and a failed execution said as failed (and the exit status that goes with
it). Every wait polls the screen or a verb under the suite's hang guard; nothing sleeps to
synchronise and nothing asserts a duration. Skipped only where tmux is not installed (CI
installs it).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import GUARD, HERE, agent_env
from serving import POLL, executions, messages, serving

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (CI installs it)")

WIDTH, HEIGHT = 120, 36
REDIRECT = "Change of plan: brief me on operator consoles instead."
BARS = str.maketrans("", "", "▁▂▃▄▅▆▇█▔▊▎")
"""Scrollbar and input-box glyphs, which share lines with the text."""


class Terminal:
    """One tmux server of its own (its own socket) running one command in a 120x36 pane."""

    def __init__(self, where: Path) -> None:
        self.socket = where / "tmux.sock"
        self.status = where / "status"
        self.config = where / "tmux.conf"

    def tmux(self, *args: str) -> str:
        assert TMUX is not None
        self.config.write_text("set -g remain-on-exit on\n")  # the last screen stays readable
        run = subprocess.run(
            [TMUX, "-S", str(self.socket), "-f", str(self.config), *args],
            capture_output=True,
            text=True,
            timeout=GUARD,
        )
        assert run.returncode == 0, f"tmux {args[0]}: {run.stderr}"
        return run.stdout

    def start(self, argv: list[str], env: dict[str, str]) -> None:
        """Run ``argv`` in the pane; its exit status lands in :attr:`status`."""
        env = {**env, "TERM": "tmux-256color"}
        line = " ".join(
            [
                "cd",
                shlex.quote(str(HERE)),
                "&&",
                "env",
                "-i",
                *(shlex.quote(f"{k}={v}") for k, v in env.items()),
                shlex.join(argv),
                ";",
                "echo",
                "$?",
                ">",
                shlex.quote(str(self.status)),
            ]
        )
        self.tmux("new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT), "-s", "t", line)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t")

    def everything(self) -> str:
        """The pane's history and screen, wrapped lines joined (after the app closed)."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "t")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.tmux("send-keys", "-t", "t", *(["-l"] if literal else []), *keys)

    def until(self, what: str, check: Callable[[str], object]) -> str:
        """Poll the screen until ``check`` holds; the screen it held on."""
        deadline = time.monotonic() + GUARD * 3
        while True:
            screen = self.screen()
            if check(screen):
                return screen
            assert time.monotonic() < deadline, f"waited in vain for {what}; the screen:\n{screen}"
            time.sleep(POLL)

    def exit_status(self) -> int:
        """The command's exit status, once it has exited."""
        wait_for_path(self.status, "the console to exit")
        return int(self.status.read_text())

    def close(self) -> None:
        subprocess.run(
            [TMUX or "tmux", "-S", str(self.socket), "kill-server"],
            capture_output=True,
            timeout=GUARD,
        )


def wait_for_path(path: Path, what: str) -> None:
    deadline = time.monotonic() + GUARD * 3
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"waited in vain for {what}"
        time.sleep(POLL)


@contextmanager
def terminal(tmp_path: Path, argv: list[str], rt: Path, **extra: str) -> Iterator[Terminal]:
    term = Terminal(tmp_path)
    term.start(argv, agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt), **extra))
    try:
        yield term
    finally:
        term.close()


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    path = tmp_path / "rt"
    path.mkdir(mode=0o700)
    return path


def header(screen: str) -> str:
    return screen.splitlines()[0]


def key_bar(screen: str) -> str:
    return screen.rstrip("\n").splitlines()[-1]


def transcript(screen: str) -> str:
    """The conversation column's text as one line (the side panel cut off, wrapping undone)."""
    lines = screen.splitlines()
    edge = lines[1].rfind("│")  # the side panel's left border
    box = next(i for i, line in enumerate(lines) if line.startswith("▊"))  # the input line
    body = [line[:edge] for line in lines[1:box]]
    text = " ".join(line.translate(BARS) for line in body)
    return " ".join(text.split())


def flat(text: str) -> str:
    return " ".join(text.split())


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(
        str(part.get("text", "")) for part in content or [] if part.get("type") == "text"
    )


def only_execution(rt: Path) -> str:
    found: list[str] = []

    def listed() -> bool:
        found[:] = [e["id"] for e in executions(rt)] if list(rt.glob("*.json")) else []
        return bool(found)

    poll(listed, "an execution to be listed")
    return found[0]


def poll(check: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + GUARD * 3
    while not check():
        assert time.monotonic() < deadline, f"waited in vain for {what}"
        time.sleep(POLL)


def demo_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "agent_channel_acp", "demo", *args]


def test_after_esc_and_a_redirect_the_screen_shows_the_end_of_the_answer(
    tmp_path: Path, rt: Path
) -> None:
    """Issue 16 §2: the view follows the end while the operator has not scrolled up, over a
    conversation longer than the screen; PageUp leaves the end, End comes back to it."""
    with terminal(tmp_path, demo_argv("--tool-seconds", "0.5"), rt) as term:
        target = only_execution(rt)
        poll(  # several steps: far more than one screen of cards
            lambda: sum(1 for m in messages(rt, target, every=True) if m.get("toolCalls")) >= 6,
            "six tool rounds",
        )
        term.keys("Escape")
        term.until("the stopped turn in the header", lambda s: "redirect" in header(s))
        term.keys(REDIRECT, literal=True)
        term.keys("Enter")
        answer: list[str] = []

        def answered() -> bool:
            last = messages(rt, target, full=True)[-1]
            answer[:] = [text_of(last)] if last.get("role") == "assistant" else []
            return bool(answer) and answer[0].startswith("You said: 'Change of plan")

        poll(answered, "the answer to the redirect")
        tail = flat(answer[0])[-60:]
        screen = term.until("the end of the answer on screen", lambda s: tail in transcript(s))
        assert transcript(screen).endswith(tail), screen  # the answer is the last thing shown
        bar = key_bar(screen)
        assert "pgup" in bar and "pgdn" in bar and "end" in bar, bar

        term.keys("PPage")
        term.until("PageUp to leave the end", lambda s: tail not in transcript(s))
        term.keys("End")
        term.until("End to come back to it", lambda s: transcript(s).endswith(tail))
        term.keys("C-q")
        assert term.exit_status() == 0


def test_text_streamed_before_esc_is_marked_interrupted(tmp_path: Path, rt: Path) -> None:
    """Issue 16 §2: what the model streamed before the interrupt never enters the
    conversation (A9); the console says so on the line instead of leaving it as said."""
    with serving(rt, "--agent", "agents:attach_agent"):
        target = only_execution(rt)
        argv = [sys.executable, "-m", "agent_channel_acp", "attach", target]
        with terminal(tmp_path, argv, rt) as term:
            term.until("the bind", lambda s: "driver" in header(s))
            term.keys("hang", literal=True)
            term.keys("Enter")
            term.until("the streamed text", lambda s: "thinking about it" in transcript(s))
            term.keys("Escape")
            screen = term.until("the stopped turn", lambda s: "redirect" in header(s))
            said = [m for m in messages(rt, target, full=True) if m.get("role") == "assistant"]
            assert not said, said  # the text is not in the conversation...
            line = re.search(r"agent ▸ .*thinking about it.*", screen)
            assert line and "interrupted" in line.group(0), screen  # ...and the screen says so
            term.keys("C-q")
            assert term.exit_status() == 0


def test_an_interrupt_before_any_text_marks_nothing(tmp_path: Path, rt: Path) -> None:
    """A model call interrupted before it streamed anything: the answer before it is in the
    conversation and must not be marked (the completion marker names no older message)."""
    with serving(rt, "--agent", "agents:attach_agent"):
        target = only_execution(rt)
        argv = [sys.executable, "-m", "agent_channel_acp", "attach", target]
        with terminal(tmp_path, argv, rt) as term:
            term.until("the bind", lambda s: "driver" in header(s))
            term.keys("hello", literal=True)
            term.keys("Enter")
            term.until("the answer", lambda s: "echo: hello" in transcript(s))
            term.keys("stall", literal=True)
            term.keys("Enter")
            term.until("the model call", lambda s: "turn started" in header(s))
            term.keys("Escape")
            screen = term.until("the stopped turn", lambda s: "redirect" in header(s))
            said = [m for m in messages(rt, target, full=True) if m.get("role") == "assistant"]
            assert [text_of(m) for m in said] == ["echo: hello"]  # in the conversation...
            line = re.search(r"agent ▸ echo: hello.*", screen)
            assert line and "interrupted" not in line.group(0), screen  # ...and shown as said
            term.keys("C-q")
            assert term.exit_status() == 0


def test_a24_a_failed_execution_says_failed_and_the_console_exits_non_zero(
    tmp_path: Path, rt: Path
) -> None:
    """Issue 16 §2: a model that raises ends the execution with an error: the console says
    failed (not "ended (finished)"), `ls` says failed, and quitting exits 1."""
    with serving(rt, "--agent", "agents:attach_agent"):
        target = only_execution(rt)
        argv = [sys.executable, "-m", "agent_channel_acp", "attach", target]
        with terminal(tmp_path, argv, rt) as term:
            term.until("the bind", lambda s: "driver" in header(s))
            term.keys("crash", literal=True)
            term.keys("Enter")
            screen = term.until("the end", lambda s: "scripted crash" in transcript(s))
            assert "failed" in header(screen), header(screen)
            assert "The execution failed" in transcript(screen), screen
            assert "(finished)" not in transcript(screen), screen
            (listed,) = executions(rt)
            assert listed["status"] == "failed", listed
            term.keys("C-q")
            assert term.exit_status() == 1
            after = term.everything()  # the console closed; one line says why the exit is 1
            assert "agent-channel-acp: attach: the execution failed: " in after, after


def test_the_demo_console_with_an_unreachable_model_says_failed_and_exits_non_zero(
    tmp_path: Path, rt: Path
) -> None:
    """Issue 16 §2, as a new user meets it: ``demo --model`` with a model server that cannot
    be reached. The console says failed, and the demo exits 1 once the operator quits."""
    unreachable = {"OPENAI_BASE_URL": "http://127.0.0.1:9", "OPENAI_API_KEY": "x"}
    with terminal(tmp_path, demo_argv("--model", "x"), rt, **unreachable) as term:
        screen = term.until("the failure", lambda s: "failed" in header(s))
        assert "The execution failed: " in transcript(screen), screen
        assert "cannot reach the model server" in transcript(screen), screen
        term.keys("C-q")
        assert term.exit_status() == 1
        assert "agent-channel-acp: demo: the execution failed: " in term.everything()
