"""Real-browser tests: Python Playwright driving Debian's chromium against a live server."""

import os
import shutil

import pytest

# Playwright's sync API runs an event loop in this thread; the live server and the ORM calls in
# the test itself are ordinary synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("BRAIN_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
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


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"chromium not found at {CHROMIUM}: run `apt-get install -y chromium` (make test does)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server):
    """A page on the live server. Any Content-Security-Policy violation (an inline script or
    style, an eval) fails the test: the console must work under the policy it is served with."""
    context = browser.new_context(base_url=live_server.url)
    page = context.new_page()
    page.set_default_timeout(10_000)
    violations = []
    page.on(
        "console",
        lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    yield page
    context.close()
    assert not violations, violations


def login(page, username, password="correct-horse-9"):
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)


def nav(page, text):
    """Follow a main-navigation link the way a person does: open the phone menu when it is
    folded, open the link's group, click the link."""
    if page.locator(".menu-button").is_visible() and not page.locator("#menu-toggle").is_checked():
        page.click(".menu-button")
    group = page.locator("details[data-navgroup]", has=page.locator(".navlinks a", has_text=text))
    link = group.locator(".navlinks a", has_text=text).first
    if not group.evaluate("g => g.open"):
        group.locator("summary").click()
    with page.expect_navigation():  # what the caller reads next is on the new page, not the old
        link.click()
