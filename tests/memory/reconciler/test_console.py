"""The reconciler from outside: POST /api/agents/{agent}/reconcile, "Reconcile now" on the agent
page, the last run per agent on Status, its change sets on the consolidation page, links on
the memory page."""

import numpy as np

from knowledge.models import Memory
from memory.models import ConsolidationPlan, MemoryLink, ReconcilerRun
from tests import factory
from tests.memory.consolidation.test_consolidation import remember
from tests.memory.reconciler.test_reconciler import set_vector, unit


def two_duplicates(agent):
    a = remember(agent, "Bob is allergic to peanuts.", confidence=0.9)
    b = remember(agent, "Bob has a peanut allergy.", confidence=0.4)
    set_vector(a, unit(1))
    set_vector(b, unit(0.99, float(np.sqrt(1 - 0.99**2))))
    return a, b


def test_reviewers_reconcile_an_agent_through_the_api(world, settings):
    settings.BRAIN_MEMORY_CONSOLIDATION = "apply"
    a, b = two_duplicates(world.copilot)
    job = factory.queued_run(world.client("reviewer"), "/api/agents/copilot/reconcile")
    assert job["state"] == "done" and job["kind"] == "reconciler.run"
    run = ReconcilerRun.objects.get(pk=job["result"]["reconciler_run"])
    body = {"plan": run.plan_id}
    assert (run.agent.name, run.trigger, run.state, run.plan.state) == (
        "copilot",
        "manual",
        "done",
        "applied",
    )
    assert run.counts["vector_duplicates_folded"] == 1
    b.refresh_from_db()
    assert (b.status, b.superseded_by_id) == (Memory.SUPERSEDED, a.pk)
    plan = world.client("reviewer").get(f"/api/memory-consolidations/{body['plan']}").json()
    assert plan["created_by"] == "system:reconciler" and plan["groups"][0]["kind"] == "vector_duplicate"


def test_reconcile_refuses_clearly_and_writes_nothing(world, settings):
    assert world.client("reviewer").post("/api/agents/nobody/reconcile").status_code == 404
    assert world.client("copilot").post("/api/agents/copilot/reconcile").status_code == 403
    response = world.client("reviewer").post(
        "/api/agents/copilot/reconcile", {"mode": "apply"}, format="json"
    )
    assert response.status_code == 400 and "mode" in response.json()["fields"]
    settings.BRAIN_MEMORY_CONSOLIDATION = "off"
    response = world.client("reviewer").post("/api/agents/copilot/reconcile")
    assert response.status_code == 409 and "off" in response.json()["error"]
    assert not ConsolidationPlan.objects.exists()


def test_reconcile_now_on_the_agent_page_and_the_last_run_on_status(client, world, settings):
    settings.BRAIN_MEMORY_CONSOLIDATION = "propose"
    two_duplicates(world.copilot)
    client.force_login(world.reviewer)
    page = client.get("/agents/copilot/").content.decode()
    assert 'hx-get="/agents/copilot/reconcile"' in page and "Reconcile now" in page
    response = client.post("/agents/copilot/reconcile")
    assert response.status_code == 302 and response["Location"].startswith("/models/jobs/")
    factory.run_queued_jobs()
    run = ReconcilerRun.objects.get()
    assert run.plan.state == ConsolidationPlan.PROPOSED
    panel = client.get("/agents/copilot/reconcile", HTTP_HX_REQUEST="true").content.decode()
    assert f"plan #{run.plan_id}" in panel and "proposed" in panel
    status = client.get("/knowledge/status/").content.decode()
    assert 'id="reconciler-runs"' in status and f'href="/consolidation/{run.plan_id}/"' in status
    detail = client.get(f"/consolidation/{run.plan_id}/").content.decode()
    assert "vector-duplicate" in detail and "1 vector duplicates folded" in detail
    api = world.client("reviewer").get("/api/status").json()
    copilot = next(a for a in api["reconciler"]["agents"] if a["agent"] == "copilot")
    assert copilot["last_run"]["plan"] == run.plan_id
    queued = client.post("/agents/copilot/reconcile", HTTP_HX_REQUEST="true").content.decode()
    assert "every 2s" in queued and "<html" not in queued  # the panel polls the job


def test_the_memory_page_lists_links(client, world, settings):
    settings.BRAIN_MEMORY_CONSOLIDATION = "apply"
    a = remember(world.copilot, "The VPN gateway vpn-gw-2 uses port 1194.")
    b = remember(world.copilot, "VPN clients connect through gateway vpn-gw-2.")
    set_vector(a, unit(1))
    set_vector(b, unit(0.7, 0.714))
    factory.queued_run(world.client("reviewer"), "/api/agents/copilot/reconcile")
    assert MemoryLink.objects.count() == 2
    client.force_login(world.reviewer)
    page = client.get(f"/memories/{a.pk}/").content.decode()
    assert 'id="links"' in page and f'href="/memories/{b.pk}/"' in page
