"""Headless Debian chromium driven by Playwright, and the page's address for a ``serve --ws``.

Playwright's own browser download is not reachable here, so the suite launches the system's
``/usr/bin/chromium`` (``apt-get install chromium``, as ``.ci/run`` does) and skips with a
reason when it is missing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def need_chromium() -> None:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="the dev group's playwright is missing")


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless browser for the block."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


CSP_WATCH = """document.addEventListener("securitypolicyviolation", (e) =>
  console.log(`CSP refused ${e.violatedDirective} ${e.blockedURI} ${e.sample}`));"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium for a test module (a fixture: import it into the module)."""
    need_chromium()
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page; the test fails on any page error or CSP violation the page reports."""
    from conftest import GUARD
    from playwright.sync_api import expect

    expect.set_options(timeout=GUARD * 1000)
    context = browser.new_context()
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.add_init_script(CSP_WATCH)
    p.on("console", lambda m: errors.append(m.text) if m.text.startswith("CSP ") else None)
    yield p
    context.close()
    assert not errors, errors  # no exception, and nothing the page's CSP had to refuse


def page_url(announced: dict[str, Any], token: str | None = "record") -> str:
    """The page of the server ``serve --json`` announced: with the record's token, another
    token, or none (``token=None``)."""
    record = json.loads(Path(announced["record"]).read_text())
    ws = record["ws"]
    base = str(ws["url"]).replace("ws://", "http://").removesuffix("/acp") + "/"
    if token is None:
        return base
    return base + "#token=" + (ws["token"] if token == "record" else token)


def ids(serving: Any, count: int = 1) -> list[str]:
    """``serving.ids(count)`` on a thread of its own: Playwright's sync API keeps an event
    loop running on this one, and the suite's helpers start their own."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(serving.ids, count).result()
