"""Regenerate docs/web-console.png: the web console on two demo executions, one waiting on an
approval, in headless Debian chromium (Playwright; ``apt-get install chromium``).

    uv run python scripts/screenshot_web.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/acp/web"))

from browser import chromium, page_url  # noqa: E402  (the tests' launcher)

OUT = ROOT / "docs/web-console.png"


def main() -> None:
    rt = Path(tempfile.mkdtemp(prefix="web-shot-"))
    os.chmod(rt, 0o700)
    env = dict(os.environ, AGENT_CHANNEL_RUNTIME_DIR=str(rt), AGENT_CHANNEL_DEMO_TOOL_SECONDS="60")
    args = ["serve", "--json", "--demo", "--ws", "0", "--count", "3", "--approve"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_channel_acp", *args],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        announced = json.loads(proc.stdout.readline())
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 560})
            page.goto(page_url(announced))
            page.get_by_test_id("approval").wait_for()
            page.locator('[data-option="allow_once"]').click()
            page.locator('[data-kind="tool"][data-status="in_progress"]').wait_for()
            page.get_by_test_id("message").fill("Keep the interrupts section short")
            page.get_by_test_id("send").click()
            page.get_by_test_id("queued").wait_for()
            page.get_by_test_id("execution").nth(2).get_by_text("approval pending").wait_for()
            page.screenshot(path=str(OUT))
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
