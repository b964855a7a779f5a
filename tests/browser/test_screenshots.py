"""Screenshots of the console for the README (docs/screenshots/): the review queue, an entry, Status
and the header search, at a laptop's and a phone's size, over the demo workspace. Run on demand:
BRAIN_SCREENSHOTS=1 .venv/bin/python -m pytest tests/browser/test_screenshots.py"""

import os
from pathlib import Path

import pytest
from django.core.management import call_command

from knowledge.models import Entry
from tests import factory
from tests.browser.conftest import login

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.environ.get("BRAIN_SCREENSHOTS"), reason="set BRAIN_SCREENSHOTS=1 to retake them"
    ),
]

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SIZES = {"laptop": (1280, 800), "phone": (390, 844)}


def test_take_the_readme_screenshots(page, live_server):
    call_command("seed_demo", verbosity=0)
    factory.make_user("adam", role="admin")
    login(page, "adam")
    entry = Entry.objects.order_by("-block_count", "id").first()
    pages = {
        "queue": "/review/",
        "entry": f"/knowledge/entries/{entry.pk}/",
        "status": "/knowledge/status/",
        "search": "/search/?q=printer",
    }
    OUT.mkdir(parents=True, exist_ok=True)
    for size, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        for name, href in pages.items():
            page.goto(href)
            if name == "status":
                page.locator("#trends").scroll_into_view_if_needed()
                page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(OUT / f"{name}-{size}.png"))
            assert (OUT / f"{name}-{size}.png").stat().st_size > 1000
