"""Consolidation through the API and the console."""

import threading

import pytest
from django.db import close_old_connections, connection

from knowledge.models import AuditEvent, Memory, MemorySource, ModelJob
from memory.models import ConsolidationPlan
from tests import factory
from tests.memory.consolidation.test_consolidation import FACT, active_ids, full_state, remember, ten_copies


def run_plan(client, data=None):
    """POST a run (202 with its job), let the worker run it, and read the plan it wrote."""
    job = factory.queued_run(client, "/api/memory-consolidations/run", data)
    assert job["state"] == "done", job
    return client.get(f"/api/memory-consolidations/{job['result']['plan']}").json()


def test_reviewers_run_list_read_apply_and_revert_plans(world):
    copies = ten_copies(world.copilot)
    api = world.client("reviewer")
    before = full_state([c.pk for c in copies])

    plan = run_plan(api)
    assert plan["state"] == "proposed" and plan["mode"] == "propose"
    (group,) = plan["groups"]
    assert group["kind"] == "duplicate" and group["target"] == copies[-1].pk
    assert sorted(m["id"] for m in group["before"]) == sorted(c.pk for c in copies)
    kept = next(m for m in group["after"] if m["role"] == "keep")
    assert len(kept["sources"]) == 10  # what applying would do: all sources on the kept memory
    assert "not configured" in plan["model_note"]

    listing = api.get("/api/memory-consolidations?state=proposed").json()
    assert listing["count"] == 1 and listing["results"][0]["id"] == plan["id"]
    assert api.get(f"/api/memory-consolidations/{plan['id']}").json()["groups"] == plan["groups"]

    applied = api.post(f"/api/memory-consolidations/{plan['id']}/apply")
    assert applied.status_code == 200 and applied.json()["state"] == "applied"
    assert active_ids() == {copies[-1].pk}
    again = api.post(f"/api/memory-consolidations/{plan['id']}/apply")
    assert again.status_code == 409
    assert again.json() == {
        "error": f"Plan {plan['id']} is applied; only a proposed plan can be applied.",
        "state": "applied",
    }

    reverted = world.client("admin").post(f"/api/memory-consolidations/{plan['id']}/revert")
    assert reverted.status_code == 200 and reverted.json()["state"] == "reverted"
    assert full_state([c.pk for c in copies]) == before
    assert world.client("admin").post(f"/api/memory-consolidations/{plan['id']}/revert").status_code == 409


def test_agents_and_integrations_may_not_touch_plans(world):
    ten_copies(world.copilot)
    for who in ("copilot", "scribe", "integration"):
        assert world.client(who).post("/api/memory-consolidations/run", {}, format="json").status_code == 403
        assert world.client(who).get("/api/memory-consolidations").status_code == 403
    assert world.client(None).get("/api/memory-consolidations").status_code == 401
    assert ConsolidationPlan.objects.count() == 0


def test_bad_input_and_unknown_plans(world):
    api = world.client("reviewer")
    response = api.post(
        "/api/memory-consolidations/run", {"owner": "nobody", "scope": "nowhere"}, format="json"
    )
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"owner", "scope"}
    assert api.get("/api/memory-consolidations?state=bogus").status_code == 400
    assert api.get("/api/memory-consolidations/999").status_code == 404
    assert api.post("/api/memory-consolidations/999/apply").status_code == 404
    assert ConsolidationPlan.objects.count() == 0


def test_a_run_can_be_limited_to_one_owner_and_store(world):
    ten_copies(world.copilot)
    ten_copies(world.scribe)
    ten_copies(world.copilot, store="self")
    plan = run_plan(world.client("reviewer"), {"owner": "copilot", "scope": "shared"})
    assert (plan["owner"], plan["store"]) == ("copilot", "shared")
    assert [(g["owner"], g["store"]) for g in plan["groups"]] == [("copilot", "shared")]


def test_off_mode_refuses_a_run_with_409(world, settings):
    settings.BRAIN_MEMORY_CONSOLIDATION = "off"
    response = world.client("admin").post("/api/memory-consolidations/run", {}, format="json")
    assert response.status_code == 409
    assert "off" in response.json()["error"]


def test_apply_mode_runs_apply_their_own_plan(world, settings):
    settings.BRAIN_MEMORY_CONSOLIDATION = "apply"
    copies = ten_copies(world.copilot)
    plan = run_plan(world.client("admin"))
    assert plan["state"] == "applied"
    assert active_ids() == {copies[-1].pk}


def test_the_scheduled_task_runs_consolidation(world):
    from curation.tasks import consolidation_scheduled

    ten_copies(world.copilot)
    assert consolidation_scheduled().endswith("proposed")
    assert AuditEvent.objects.get(action="memory.consolidation.run").actor_name == "consolidation"


def test_the_schema_describes_the_consolidation_api(world):
    schema = world.client("admin").get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for path in (
        "/api/memory-consolidations/run",
        "/api/memory-consolidations",
        "/api/memory-consolidations/{plan_id}",
        "/api/memory-consolidations/{plan_id}/apply",
        "/api/memory-consolidations/{plan_id}/revert",
    ):
        assert path in schema["paths"], path


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_applying_at_once_apply_it_exactly_once(world):
    copies = ten_copies(world.copilot)
    world.client("reviewer").post("/api/memory-consolidations/run", {}, format="json")
    factory.run_queued_jobs()  # (a transactional test runs it at commit already)
    plan = {"id": ConsolidationPlan.objects.get().pk}
    barrier, results = threading.Barrier(2), []

    def apply(who):
        try:
            barrier.wait()
            results.append(
                world.client(who).post(f"/api/memory-consolidations/{plan['id']}/apply").status_code
            )
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=apply, args=(who,)) for who in ("reviewer", "admin")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200, 409]
    assert AuditEvent.objects.filter(action="memory.consolidation.apply").count() == 1
    kept = Memory.objects.get(pk=copies[-1].pk)
    assert MemorySource.objects.filter(memory=kept).count() == 10  # sources merged once


# --- console --------------------------------------------------------------------------------


def test_the_plan_page_shows_before_and_after_and_applies(client, world, model_stub):
    remember(world.copilot, "Alice prefers e-mail over phone calls for ticket updates")
    remember(world.copilot, "Alice prefers e-mail over phone calls, except for outages")
    ten_copies(world.copilot)
    # a merge keeps every claim of both (memory.matching.kept): "for ticket updates" too
    model_stub.reply_json(
        {"text": "Alice prefers e-mail over <b>phone</b> calls for ticket updates, except for outages"}
    )
    client.force_login(world.reviewer)
    response = client.post("/consolidation/run")
    assert model_stub.chat_requests() == [] and not ConsolidationPlan.objects.exists()  # queued only
    job = ModelJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/models/jobs/{job.pk}"
    assert "every 2s" in client.get(response["Location"]).content.decode()  # polled while queued
    factory.run_queued_jobs()
    plan = ConsolidationPlan.objects.get()
    panel = client.get(f"/models/jobs/{job.pk}", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in panel and "every 2s" not in panel and f"/consolidation/{plan.pk}/" in panel
    page = client.get(f"/consolidation/{plan.pk}/").content.decode()
    assert "near-duplicate" in page and "duplicate" in page
    assert "Alice prefers e-mail over &lt;b&gt;phone&lt;/b&gt; calls" in page  # the model's text, escaped
    assert "except for outages" in page and FACT.upper() in page
    assert f'action="/consolidation/{plan.pk}/apply"' in page

    fragment = client.post(f"/consolidation/{plan.pk}/apply", HTTP_HX_REQUEST="true")
    body = fragment.content.decode()
    assert "<html" not in body and "applied" in body
    plan.refresh_from_db()
    assert plan.state == "applied"
    again = client.post(f"/consolidation/{plan.pk}/apply", HTTP_HX_REQUEST="true").content.decode()
    assert "only a proposed plan can be applied" in again
    client.post(f"/consolidation/{plan.pk}/revert")  # no JavaScript: a plain form post
    plan.refresh_from_db()
    assert plan.state == "reverted"


def test_the_plan_list_filters_by_state(client, world):
    ten_copies(world.copilot)
    client.force_login(world.admin)
    client.post("/consolidation/run")
    factory.run_queued_jobs()
    page = client.get("/consolidation/?state=proposed")
    assert page.status_code == 200 and len(page.context["plans"]) == 1
    assert len(client.get("/consolidation/?state=applied").context["plans"]) == 0
    fragment = client.get("/consolidation/?state=proposed", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="plans")
    assert b"<html" not in fragment.content and b"proposed" in fragment.content


def test_console_users_without_a_role_may_not_see_plans(client, world):
    from django.contrib.auth import get_user_model

    nobody = get_user_model().objects.create_user("nobody", password="x-very-long-1")
    client.force_login(nobody)
    assert client.get("/consolidation/").status_code == 403
    assert client.post("/consolidation/run").status_code == 403


def test_the_plan_list_follows_the_owner_selector(client, world):
    from memory.consolidation import consolidation_run

    ten_copies(world.copilot)
    ten_copies(world.scribe)
    mine = consolidation_run(actor=factory.SYSTEM, owner=world.copilot)
    theirs = consolidation_run(actor=factory.SYSTEM, owner=world.scribe)
    everyone = consolidation_run(actor=factory.SYSTEM)
    client.force_login(world.reviewer)
    assert {p.pk for p in client.get("/consolidation/").context["plans"]} == {mine.pk, theirs.pk, everyone.pk}
    session = client.session
    session["owner"] = "copilot"
    session.save()
    page = client.get("/consolidation/")
    assert {p.pk for p in page.context["plans"]} == {mine.pk, everyone.pk}
    assert "Owner principal: copilot" in page.content.decode()
