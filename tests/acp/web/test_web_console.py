"""The web console in headless chromium against a real ``serve --ws --demo`` subprocess.

Each test drives the page as an operator would (clicks and typing) and asserts what the page
then draws; waiting is Playwright's polling of the page under the suite's hang guard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser import browser, ids, page, page_url
from serving import serving

LONG_TOOLS = {"AGENT_CHANNEL_DEMO_TOOL_SECONDS": "60"}
"""Demo tools that outlast a test: a tool is running, a message stays queued."""

__all__ = ["browser", "page"]  # the fixtures


def test_page_shows_executions_and_drives_one(tmp_path: Path, page: Any) -> None:
    """Every execution at a glance; then message, withdraw, cancel one tool (the queued
    message is folded in at the next step), interrupt, and end, each seen on the page."""
    from playwright.sync_api import expect

    with serving(tmp_path, "--demo", "--ws", "0", "--count", "2", **LONG_TOOLS) as s:
        listed = ids(s, 2)
        page.goto(page_url(s.announced))
        rows = page.get_by_test_id("execution")
        expect(rows).to_have_count(2)
        for i in listed:
            expect(page.locator(f'[data-testid="execution"][data-id="{i}"]')).to_contain_text(
                "running"
            )
        page.locator(f'[data-testid="execution"][data-id="{listed[1]}"]').click()
        view = page.get_by_test_id("execution-view")
        expect(view).to_have_attribute("data-id", listed[1])
        expect(page.get_by_test_id("state")).to_contain_text("driver")
        conversation = page.get_by_test_id("conversation")
        expect(conversation.locator('[data-kind="user"]')).to_contain_text("Prepare a briefing")
        running = conversation.locator('[data-kind="tool"][data-status="in_progress"]')
        expect(running).to_have_count(1)

        page.get_by_test_id("message").fill("never mind this one")
        page.get_by_test_id("send").click()
        queued = page.get_by_test_id("queued")
        expect(queued).to_contain_text("never mind this one")
        queued.get_by_test_id("withdraw").click()
        expect(queued).to_have_count(0)
        expect(conversation.locator('[data-kind="note"]')).to_contain_text("withdrawn")

        page.get_by_test_id("message").fill("please fold this in")
        page.get_by_test_id("send").click()
        expect(page.get_by_test_id("queued")).to_contain_text("please fold this in")
        running.get_by_test_id("cancel-tool").click()
        expect(conversation.locator('[data-kind="tool"][data-status="cancelled"]')).to_have_count(1)
        expect(conversation.locator('[data-kind="operator"]')).to_contain_text(
            "please fold this in"
        )
        expect(page.get_by_test_id("queued")).to_have_count(0)
        expect(conversation.locator('[data-kind="operator"]')).not_to_contain_text(
            "never mind this one"
        )

        expect(conversation.locator('[data-kind="tool"][data-status="in_progress"]')).to_have_count(
            1
        )
        page.get_by_test_id("interrupt").click()
        expect(page.get_by_test_id("state")).to_contain_text("turn cancelled")
        expect(conversation.locator('[data-kind="tool"][data-status="in_progress"]')).to_have_count(
            0
        )

        page.get_by_test_id("end").click()
        expect(conversation.locator('[data-kind="note"]').last).to_contain_text(
            "The execution has ended"
        )
        expect(page.locator(f'[data-testid="execution"][data-id="{listed[1]}"]')).to_contain_text(
            "finished"
        )
        expect(page.locator(f'[data-testid="execution"][data-id="{listed[0]}"]')).to_contain_text(
            "running"
        )


def test_page_approves_a_pending_tool_call(tmp_path: Path, page: Any) -> None:
    """Under --approve the fleet says an approval is pending and the page answers it: the
    tool call then runs."""
    from playwright.sync_api import expect

    with serving(tmp_path, "--demo", "--ws", "0", "--approve", **LONG_TOOLS) as s:
        (execution_id,) = ids(s, 1)
        page.goto(page_url(s.announced))
        approval = page.get_by_test_id("approval")
        expect(approval).to_contain_text("Searching for")
        row = page.locator(f'[data-testid="execution"][data-id="{execution_id}"]')
        expect(row).to_contain_text("approval pending")
        conversation = page.get_by_test_id("conversation")
        expect(conversation.locator('[data-kind="tool"][data-status="in_progress"]')).to_have_count(
            0
        )
        approval.locator('[data-option="allow_once"]').click()
        expect(approval).to_have_count(0)
        expect(conversation.locator('[data-kind="tool"][data-status="in_progress"]')).to_have_count(
            1
        )
        expect(row).not_to_contain_text("approval pending")


@pytest.mark.parametrize("token", [None, "not-the-token"], ids=["missing", "wrong"])
def test_page_without_the_token_says_so(tmp_path: Path, page: Any, token: str | None) -> None:
    """No token in the fragment, or a wrong one: one clear line, and no execution shown."""
    from playwright.sync_api import expect

    with serving(tmp_path, "--demo", "--ws", "0") as s:
        ids(s, 1)
        page.goto(page_url(s.announced, token))
        error = page.get_by_test_id("error")
        expect(error).to_contain_text("token")
        expect(error).to_contain_text("agent-channel-acp web")
        expect(page.get_by_test_id("execution")).to_have_count(0)
