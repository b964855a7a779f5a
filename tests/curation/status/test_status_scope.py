"""GET /api/status for agents and integrations: every count, and only their own listed items —
no titles of other agents' failed or stuck materials, no other agent's memo, Dreaming or
reconciler row, no channel they take no part in (`curation.status.selectors.status_for`)."""

import pytest
from django.utils import timezone

from knowledge.materials import services as materials
from knowledge.materials.learning import material_learn
from knowledge.models import Material
from knowledge.principal import Principal
from memory.recall.memo import memo_update
from tests import factory

ADMIN = Principal(kind="person", name="tests", role="admin")


@pytest.fixture
def failing(world):
    """A failed and a stuck material of copilot's (private, titled with a secret) and a failed
    one of scribe's; a pinned memo for each agent."""
    for owner, title in ((world.copilot, "PRIVATE merger memo"), (world.scribe, "scribe's own handbook")):
        material = materials.material_upload(
            actor=ADMIN, owner=owner, store="self", filename="x.pdf", data=b"%PDF-1.4 broken", title=title
        )
        material_learn(material.pk)
    stuck = materials.material_upload(
        actor=ADMIN,
        owner=world.copilot,
        store="self",
        filename="y.txt",
        data=b"alpha",
        title="PRIVATE layoffs",
    )
    Material.objects.filter(pk=stuck.pk).update(
        state="learning", learning_started_at=timezone.now() - timezone.timedelta(hours=1)
    )
    for agent in (world.copilot, world.scribe):
        memo_update(actor=ADMIN, agent=agent, text=f"rules of {agent.name}")
    assert Material.objects.filter(state="failed").count() == 2


def _titles(body) -> set[str]:
    section = body["materials"]
    return {row["title"] for name in ("stuck", "failed", "withdrawn") for row in section[name]}


def test_an_agent_sees_every_count_and_only_its_own_materials(world, failing):
    response = world.client("scribe").get("/api/status")
    assert response.status_code == 200
    body = response.json()
    assert (body["materials"]["failed_count"], body["materials"]["stuck_count"]) == (2, 1)
    assert _titles(body) == {"scribe's own handbook"}
    assert [m["agent"] for m in body["pinned_memos"]] == ["scribe"]
    assert "PRIVATE" not in response.content.decode()
    assert "copilot" not in response.content.decode()


def test_an_integration_sees_counts_and_no_agents_items(world, failing):
    response = world.client("integration").get("/api/status")
    body = response.json()
    assert body["materials"]["failed_count"] == 2 and _titles(body) == set()
    assert body["pinned_memos"] == []
    assert "PRIVATE" not in response.content.decode()
    assert any("stuck in learning" in a["text"] for a in body["alerts"])  # alerts keep the counts


def test_people_with_a_role_see_every_item(world, failing):
    for who in ("reviewer", "admin"):
        body = world.client(who).get("/api/status").json()
        assert _titles(body) == {"PRIVATE merger memo", "scribe's own handbook", "PRIVATE layoffs"}
        assert {m["agent"] for m in body["pinned_memos"]} == {"copilot", "scribe"}


def test_stage_a_rows_are_only_of_channels_the_agent_takes_part_in(world, settings):
    factory.make_conversation(world.scribe, world.general)
    factory.post_messages(world.general, [{"speaker": "alice", "text": "shared news"}])
    factory.post_messages(world.dm_alice, [{"speaker": "alice", "text": "a secret"}])
    channels = {
        c["channel"] for c in world.client("scribe").get("/api/status").json()["dreaming_stage_a"]["channels"]
    }
    assert channels == {"general"}
    everyone = {
        c["channel"] for c in world.client("admin").get("/api/status").json()["dreaming_stage_a"]["channels"]
    }
    assert everyone == {"general", "dm-alice"}
    own = {
        c["channel"]
        for c in world.client("copilot").get("/api/status").json()["dreaming_stage_a"]["channels"]
    }
    assert own == {"dm-alice"}


def test_a_failed_distiller_run_leaves_status_answering_agents_and_integrations(world):
    """The report keeps the failure count for everyone but lists another agent's failed
    conversation to nobody without a role: the alert then says only how many (it read the first
    listed failure, and answered 500 to every agent and integration)."""
    from curation.models import DistillerRun

    conversation = factory.make_conversation(world.copilot, world.general)
    DistillerRun.objects.create(
        conversation=conversation, state=DistillerRun.FAILED, attempts=3, reason="no model is configured"
    )
    for who in ("copilot", "scribe", "integration", "reviewer"):
        response = world.client(who).get("/api/status")
        assert response.status_code == 200, who
        assert response["Content-Type"].startswith("application/json")
        assert response.json()["models"]["distiller_failed"] == 1
    listed = world.client("scribe").get("/api/status").json()["models"]["distiller_failures"]
    assert listed == []
    assert world.client("reviewer").get("/api/status").json()["models"]["distiller_failures"][0][
        "reason"
    ] == ("no model is configured")
