"""Headless Chromium (Debian's ``chromium``, driven by Playwright; Playwright's own browsers are
never downloaded) against real gateway and worker processes over loopback.

Screenshots of the main pages go to ``docs/screenshots/`` when ``JOBGATE_SCREENSHOTS=1``, so a
normal run leaves the tree alone.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from tests.e2e.conftest import ADMIN, ROOT, Cluster

CHROMIUM = os.environ.get("JOBGATE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
READER = "browser-reader-key-0123"
KEYS = json.dumps(
    [
        {"key": ADMIN, "scopes": ["admin"], "name": "ops"},
        {"key": READER, "scopes": ["read"], "name": "viewer"},
    ]
)
SCREENSHOTS = ROOT / "docs" / "screenshots"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.browser


# Module scope, not session: while Playwright's sync API is open it holds an event loop in this
# thread, so asyncio.run() in tests after it would fail.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run 'make chromium' (apt-get install chromium)")
    launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    yield launched
    launched.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    made = browser.new_context(viewport={"width": 1280, "height": 800})
    made.set_default_timeout(15_000)
    yield made
    made.close()


@pytest.fixture
def page(context: BrowserContext) -> Iterator[Page]:
    """A page that fails the test on any Content-Security-Policy violation or script error."""
    made = context.new_page()
    problems: list[str] = []
    made.on(
        "console",
        lambda m: (
            problems.append(m.text)
            if m.type == "error" and "Content Security Policy" in m.text
            else None
        ),
    )
    made.on("pageerror", lambda e: problems.append(str(e)))
    made.on("dialog", lambda d: d.accept())  # data-confirm forms ask first
    yield made
    assert not problems, problems


@pytest.fixture
def cluster(redis_url: str, tmp_path: Path) -> Iterator[Cluster]:
    found = Cluster(redis_url, tmp_path)
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture
def gateway(cluster: Cluster) -> str:
    return cluster.gateway(JOBGATE_API_KEYS=KEYS)


@pytest.fixture
def client(gateway: str) -> Iterator[httpx.Client]:
    """The JSON API of the gateway, as admin."""
    with httpx.Client(
        base_url=gateway, headers={"authorization": f"Bearer {ADMIN}"}, timeout=30
    ) as made:
        yield made


def sign_in(page: Page, gateway: str, key: str = ADMIN, start: str = "/admin/queues") -> None:
    page.goto(gateway + start)
    page.fill("input[name=api_key]", key)
    page.click("button[type=submit]")
    page.wait_for_url(f"{gateway}{start}")


def screenshot(page: Page, name: str) -> None:
    """Write docs/screenshots/<name>.png (a name may hold a folder) when JOBGATE_SCREENSHOTS=1."""
    if os.environ.get("JOBGATE_SCREENSHOTS") == "1":
        path = SCREENSHOTS / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), full_page=True)
