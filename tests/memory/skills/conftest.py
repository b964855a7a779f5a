import pytest

from knowledge.models import Conversation
from knowledge.principal import Principal
from memory.skills import services
from tests import factory

ADMIN = Principal(kind="person", name="adam", role="admin")
BASE = "Open every reply with the ticket number. Link the KB article you used."


@pytest.fixture
def triage(world):
    """A skill enabled for both agents (copilot is untrusted, scribe trusted)."""
    skill = services.skill_create(actor=ADMIN, name="ticket-triage", title="Ticket triage", instructions=BASE)
    for agent in (world.copilot, world.scribe):
        services.skill_enable(actor=ADMIN, agent=agent, skill=skill, enabled=True)
    return skill


def outcome(world, who="scribe", skill="ticket-triage", **body):
    body = {"skill": skill, "task": "Triage INC-12", "result": "corrected", **body}
    response = world.client(who).post("/api/task-outcomes", body, format="json")
    assert response.status_code in (200, 201), response.json()
    return response.json()


def experience(world, text, *, who="scribe", skill="ticket-triage", sources=None, revises=None, status=201):
    if sources is None:
        sources = [{"kind": "task_outcome", "ref": str(outcome(world, who, skill)["id"])}]
    body = {"lesson": text, "sources": sources}
    if revises is not None:
        body["revises"] = revises
    response = world.client(who).post(f"/api/agents/{who}/skills/{skill}/experience", body, format="json")
    assert response.status_code == status, response.json()
    return response.json()


def context(world, who="scribe", q="ticket"):
    agent = getattr(world, who)
    conversation = Conversation.objects.filter(agent=agent, channel=world.general).first()
    conversation = conversation or factory.make_conversation(agent, world.general)
    response = world.client(who).post(
        f"/api/agents/{who}/context",
        {"conversation": conversation.pk, "q": q, "budget_tokens": 4000},
        format="json",
    )
    assert response.status_code == 200, response.json()
    return response.json()


def section(compiled, name):
    return next(s for s in compiled["sections"] if s["name"] == name)
