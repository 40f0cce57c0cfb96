"""The web console keeps up with what the server says (issue 29, item 10), in headless
chromium against a real ``serve --ws`` subprocess: a question an interrupt voided leaves the
page, the "queued as" notice goes once the agent read the message, the conversation follows
its live end until the operator scrolls up, and a first load's header agrees with the table.

Waiting is Playwright's polling of the page (or ``wait_for_function``) under the suite's hang
guard; nothing sleeps to synchronise and nothing asserts a duration.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from browser import browser, ids, page, page_url
from conftest import GUARD
from serving import ctl, serving

LONG_TOOLS = {"AGENT_CHANNEL_DEMO_TOOL_SECONDS": "60"}
"""Demo tools that outlast a test: a tool is running, a message stays queued."""
ASKING = ("--agent", "question_agents:asking_agent")

__all__ = ["browser", "page"]  # the fixtures

AT_END = """() => {
  const c = document.querySelector('[data-testid="conversation"]');
  return c !== null && c.scrollHeight > c.clientHeight
    && c.scrollTop + c.clientHeight >= c.scrollHeight - 2;
}"""
"""The conversation overflows its pane and shows its end."""


def test_an_interrupt_that_voids_the_question_takes_its_box_away(tmp_path: Path, page: Any) -> None:
    from playwright.sync_api import expect

    with serving(tmp_path, *ASKING, "--input", "choose", "--ws", "0") as s:
        ids(s, 1)
        page.goto(page_url(s.announced))
        box = page.get_by_test_id("approval")
        expect(box).to_contain_text("Which colour?")
        page.get_by_test_id("interrupt").click()
        expect(page.get_by_test_id("state")).to_contain_text("turn cancelled")
        expect(box).to_have_count(0)  # no live buttons for a question no one asks


def test_the_queued_notice_goes_once_the_agent_read_the_message(tmp_path: Path, page: Any) -> None:
    from playwright.sync_api import expect

    with serving(tmp_path, "--demo", "--ws", "0", **LONG_TOOLS) as s:
        (target,) = ids(s, 1)
        page.goto(page_url(s.announced))
        conversation = page.get_by_test_id("conversation")
        expect(conversation.locator('[data-kind="tool"][data-status="in_progress"]')).to_have_count(
            1
        )
        page.get_by_test_id("message").fill("Change of plan: brief me on pricing instead.")
        page.get_by_test_id("send").click()
        notice = page.get_by_test_id("notice")
        expect(notice).to_contain_text("queued as")
        assert ctl(tmp_path, "cancel", target).returncode == 0  # another client: the agent reads it
        expect(conversation.locator('[data-kind="operator"]')).to_contain_text("pricing")
        expect(page.get_by_test_id("queued")).to_have_count(0)
        expect(notice).to_have_count(0)  # the note went with the message


def test_the_conversation_follows_its_end_until_the_operator_scrolls_up(
    tmp_path: Path, page: Any
) -> None:
    from playwright.sync_api import expect

    page.set_viewport_size({"width": 1200, "height": 420})
    with serving(tmp_path, *ASKING, "--input", "hello", "--ws", "0") as s:
        (target,) = ids(s, 1)
        page.goto(page_url(s.announced))
        conversation = page.get_by_test_id("conversation")
        agent = conversation.locator('[data-kind="agent"]')
        expect(agent.last).to_contain_text("echo: hello")

        def say(n: int) -> None:
            assert ctl(tmp_path, "send", target, f"line {n}").returncode == 0
            expect(agent.last).to_contain_text(f"echo: line {n}")

        n = 0
        while conversation.evaluate("c => c.scrollHeight <= c.clientHeight"):
            n += 1  # the premise: more than the pane holds
            say(n)
        n += 1
        say(n)
        page.wait_for_function(AT_END, timeout=GUARD * 1000)  # it followed the live end

        conversation.evaluate("c => { c.scrollTop = 0; }")  # the operator scrolls up
        expect(conversation).to_have_attribute("data-follow", "false")
        n += 1
        say(n)
        assert conversation.evaluate("c => c.scrollTop") == 0  # left where they are

        conversation.evaluate("c => { c.scrollTop = c.scrollHeight; }")  # back to the end
        expect(conversation).to_have_attribute("data-follow", "true")
        n += 1
        say(n)
        page.wait_for_function(AT_END, timeout=GUARD * 1000)  # following again


def test_a_first_load_shows_the_listed_state_before_the_replay(tmp_path: Path, page: Any) -> None:
    """The page's session/load is held on its way to the server (Playwright's WebSocket
    route): until the replay comes, the header says what the table says, not "turn idle"."""
    from playwright.sync_api import expect

    held: list[tuple[Any, Any]] = []

    def route(ws: Any) -> None:
        server = ws.connect_to_server()

        def to_server(message: Any) -> None:
            if isinstance(message, str) and '"session/load"' in message and not held:
                held.append((server, message))
                return
            server.send(message)

        ws.on_message(to_server)

    with serving(tmp_path, "--demo", "--ws", "0", **LONG_TOOLS) as s:
        (target,) = ids(s, 1)
        page.route_web_socket(re.compile(r".*/acp$"), route)
        page.goto(page_url(s.announced))
        deadline = time.monotonic() + GUARD
        while not held:  # the premise: the bind is held (the route runs inside page calls)
            assert time.monotonic() < deadline, "the page never sent its session/load"
            page.evaluate("() => 0")
        row = page.locator(f'[data-testid="execution"][data-id="{target}"]')
        expect(row).to_contain_text("running")
        expect(page.get_by_test_id("execution-view")).to_have_attribute("data-id", target)
        state = page.get_by_test_id("state")
        expect(state).to_contain_text("running")
        expect(state).not_to_contain_text("turn idle")
        server, message = held[0]
        server.send(message)
        conversation = page.get_by_test_id("conversation")
        expect(conversation.locator('[data-kind="tool"][data-status="in_progress"]')).to_have_count(
            1
        )
        expect(state).to_contain_text("running · turn started")
