import pytest

from curation.models import DreamingRun
from tests.browser.conftest import login
from tests.curation.dreaming.test_stage_a import CHAT, good_reply, post

pytestmark = pytest.mark.browser


def test_an_admin_runs_stage_a_from_status_and_the_channel_lag_drops(page, world, model_stub):
    ids = post(world.general, CHAT)
    model_stub.reply_json(good_reply(ids))
    login(page, "adam")
    page.goto("/knowledge/status/")
    row = page.locator('#stage-a-channels tr[data-channel="general"]')
    assert row.locator(".lag-messages").inner_text() == "6"
    assert row.locator("text=never").is_visible()
    row.locator("text=Run stage A now").click()
    page.wait_for_url("**/models/jobs/*")  # the run's progress, polled until done
    page.locator("main >> text=Stage A run").wait_for()
    page.locator("text=See the result").click()
    page.wait_for_url("**/knowledge/status/")
    row = page.locator('#stage-a-channels tr[data-channel="general"]')
    assert row.locator(".lag-messages").inner_text() == "0"
    assert row.locator(".badge", has_text="done").is_visible()
    run = DreamingRun.objects.get()
    assert (run.state, run.trigger, run.episodes) == ("done", "manual", 2)
    # The run's link opens the Audit tab filtered by the run.
    row.locator(f"text=run {run.pk}").click()
    page.wait_for_url(f"**/audit/**dreaming_run={run.pk}*")
    assert page.locator("text=dreaming.episodes_written").first.is_visible()


def test_without_a_model_status_explains_the_gap(page, world):
    post(world.general, CHAT)
    login(page, "rita")
    page.goto("/knowledge/status/")
    assert "not configured" in page.locator("#stage-a-unavailable").inner_text()
    assert page.locator("text=Run stage A now").count() == 0  # reviewers do not run it
