import pytest

from curation.models import DreamingRun
from knowledge.models import Entry, Memory
from tests import factory
from tests.browser.conftest import login
from tests.curation.dreaming.test_stage_b import NOW, post_one, script_b, stage_a_episode

pytestmark = pytest.mark.browser


def test_run_curation_now_shows_the_result_its_audit_and_restores_it(page, world, model_stub):
    from datetime import timedelta

    factory.make_conversation(world.copilot, world.general)
    mid = post_one(world.general, "alice", "I am vegetarian now", NOW - timedelta(days=2), "v")
    ep = stage_a_episode(model_stub, world.general, mid, "Alice's food")
    script_b(
        model_stub,
        episodes=[ep.pk],
        operations=[
            {"op": "create_entry", "name": "Alice", "type": "person", "store": "shared"},
            {
                "op": "add_block",
                "entry": "Alice",
                "text": "Alice is vegetarian.",
                "sources": [{"kind": "message", "ref": mid}],
            },
            {"op": "add_block", "entry": "Alice", "text": "Alice hates tofu."},  # no source: dropped
        ],
    )
    login(page, "adam")
    page.goto("/knowledge/dreaming/")
    page.select_option("#dreaming-agent-select", "copilot")  # data-autosubmit
    page.wait_for_url("**/knowledge/dreaming/?agent=copilot")
    page.locator("text=Run curation now").click()
    page.wait_for_url("**/models/jobs/*")  # the run's progress, polled until done
    page.locator("text=See the result").click()
    page.wait_for_url("**run=*")
    run = DreamingRun.objects.get(stage=DreamingRun.STAGE_B)
    result = page.locator("#dreaming-result")
    assert result.locator(".result-operations").inner_text() == "2"
    assert result.locator(".result-dropped").inner_text() == "1"
    assert "must cite at least one source" in result.locator(".dropped").inner_text()
    assert page.locator(f'#dreaming-runs tr[data-run="{run.pk}"]').is_visible()
    result.locator("#result-audit").click()
    page.wait_for_url(f"**/audit/**dreaming_run={run.pk}*")
    assert page.locator("text=entry.created").first.is_visible()
    page.go_back()
    page.once("dialog", lambda dialog: dialog.accept())  # data-confirm
    page.locator("#restore-run").click()
    page.wait_for_url("**run=*")
    assert f"Run {run.pk} restored" in page.locator(".messages").inner_text()
    assert not Entry.objects.filter(name="Alice").exists()
    assert not Memory.objects.filter(entry__isnull=False, status=Memory.ACTIVE).exists()
