"""An orchestrator's children from the web console (K11, K12), as the terminal console offers
them: the page lists the bound execution's children, opens one's conversation
(``_agent_channel/messages`` with ``childId``), steers it (``steer_child``) and stops another
(``stop_child``); each is seen on the page. The body is the suite's ``orchestrator_agent``
under a real ``serve --ws``: its researchers wait for a steer with "finish" in it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from browser import browser, ids, page, page_url
from serving import serving

__all__ = ["browser", "page"]  # the fixtures

AGENT = ("--agent", "agents:orchestrator_agent", "--input", "spawn alpha beta")


def test_page_opens_steers_and_stops_children(tmp_path: Path, page: Any) -> None:
    from playwright.sync_api import expect

    with serving(tmp_path, *AGENT, "--ws", "0") as s:
        (execution_id,) = ids(s, 1)
        page.goto(page_url(s.announced))
        expect(page.get_by_test_id("execution-view")).to_have_attribute("data-id", execution_id)
        children = page.get_by_test_id("children")
        alpha = children.locator('[data-testid="child-row"][data-name="alpha"]')
        beta = children.locator('[data-testid="child-row"][data-name="beta"]')
        expect(alpha).to_contain_text("waiting")
        expect(beta).to_contain_text("waiting")

        alpha.get_by_test_id("open-child").click()
        child = page.get_by_test_id("child-view")
        expect(child).to_have_attribute("data-name", "alpha")
        expect(child.get_by_test_id("child-message").first).to_contain_text("research alpha")

        child.get_by_test_id("steer").fill("finish now")
        child.get_by_test_id("steer-send").click()
        expect(page.get_by_test_id("notice")).to_contain_text("steer for child alpha: delivered")
        expect(child.get_by_test_id("child-message").last).to_contain_text("alpha: done")
        expect(alpha).to_contain_text("ended")
        expect(beta).to_contain_text("waiting")

        beta.get_by_test_id("stop-child").click()
        expect(page.get_by_test_id("notice")).to_contain_text("stopped child beta")
        expect(beta).to_contain_text("killed")
        conversation = page.get_by_test_id("conversation")
        said = conversation.locator('[data-kind="agent"]')  # the parent read the operator's note
        expect(said.filter(has_text="seen: The operator stopped child beta")).to_have_count(1)

        # the fleet's child rows open a child too
        page.locator('[data-testid="child"][data-name="beta"]').click()
        expect(child).to_have_attribute("data-name", "beta")
        expect(child.get_by_test_id("child-message").first).to_contain_text("research beta")
        # and so do their cards in the conversation
        card = conversation.locator('[data-kind="tool"]').filter(has_text="Child agent alpha")
        card.get_by_test_id("open-child").click()
        expect(child).to_have_attribute("data-name", "alpha")
        expect(child.get_by_test_id("child-message").last).to_contain_text("alpha: done")
        expect(card.get_by_test_id("cancel-tool")).to_have_count(0)
