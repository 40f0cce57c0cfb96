"""The web console gets its connections back by itself: ``serve --ws PORT --store`` is killed
and started again on the same port with the same token (``--token-file``); the page says it
is reconnecting, then lists the executions again, binds the one it showed again, shows its
conversation once (the replay is not added to what it drew), and drives it again.
"""

from __future__ import annotations

import signal
import socket
from pathlib import Path
from typing import Any

from browser import browser, ids, page, page_url
from conftest import GUARD
from serving import serving

__all__ = ["browser", "page"]  # the fixtures

QUICK_TOOLS = {"AGENT_CHANNEL_DEMO_TOOL_SECONDS": "0.3"}
"""Demo steps short enough that a message is folded in soon."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_page_reconnects_after_the_server_restarts(tmp_path: Path, page: Any) -> None:
    from playwright.sync_api import expect

    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    token = tmp_path / "token"
    token.write_text("a-token-that-survives-the-restart\n")
    token.chmod(0o600)
    args = ("--demo", "--ws", str(free_port()), "--token-file", str(token))
    args += ("--store", str(tmp_path / "store.db"))
    connection = page.get_by_test_id("connection")
    conversation = page.get_by_test_id("conversation")
    operator = conversation.locator('[data-kind="operator"]')

    with serving(rt, *args, **QUICK_TOOLS) as s:
        (execution_id,) = ids(s, 1)
        page.goto(page_url(s.announced))
        expect(page.get_by_test_id("execution-view")).to_have_attribute("data-id", execution_id)
        expect(conversation.locator('[data-kind="user"]')).to_contain_text("Prepare a briefing")
        page.get_by_test_id("message").fill("before the restart")
        page.get_by_test_id("send").click()
        expect(operator).to_contain_text("before the restart")
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(GUARD)
        expect(connection).to_contain_text("reconnecting")

    with serving(rt, *args, **QUICK_TOOLS) as s:
        assert ids(s, 1) == [execution_id]  # restored from the store
        expect(connection).to_have_text("connected")
        expect(page.get_by_test_id("execution")).to_have_count(1)
        expect(page.get_by_test_id("execution-view")).to_have_attribute("data-id", execution_id)
        expect(page.get_by_test_id("state")).to_contain_text("driver")
        page.get_by_test_id("message").fill("after the restart")
        page.get_by_test_id("send").click()
        expect(operator.filter(has_text="after the restart")).to_have_count(1)
        # what the page showed before the restart is there once: the replay replaced it
        expect(conversation.locator('[data-kind="user"]')).to_have_count(1)
        expect(operator.filter(has_text="before the restart")).to_have_count(1)
        keys = conversation.locator('[data-testid="entry"]').evaluate_all(
            "els => els.map(e => e.dataset.key)"
        )
        assert len(keys) == len(set(keys)), keys


def test_page_says_so_when_the_restarted_server_refuses_its_token(
    tmp_path: Path, page: Any
) -> None:
    """Started again with another token, the server refuses the page: one line saying so
    (open the address `agent-channel-acp web` prints), and no more tries."""
    from playwright.sync_api import expect

    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    port = str(free_port())
    for name in ("first", "second"):
        (tmp_path / name).write_text(f"the {name} token\n")
        (tmp_path / name).chmod(0o600)
    with serving(rt, "--demo", "--ws", port, "--token-file", str(tmp_path / "first")) as s:
        ids(s, 1)
        page.goto(page_url(s.announced))
        expect(page.get_by_test_id("connection")).to_have_text("connected")
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(GUARD)
        expect(page.get_by_test_id("connection")).to_contain_text("reconnecting")
    with serving(rt, "--demo", "--ws", port, "--token-file", str(tmp_path / "second")) as s:
        ids(s, 1)
        error = page.get_by_test_id("error")
        expect(error).to_contain_text("refused this page's token")
        expect(error).to_contain_text("agent-channel-acp web")
