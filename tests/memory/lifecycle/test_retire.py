"""DELETE /api/memory/{id}: an agent retires its own memory — out of recall at once, reversible
(restorable from the audit trail), erasable by an admin; never another agent's."""

from knowledge.models import AuditEvent, Memory
from knowledge.principal import Principal
from knowledge.restore.services import audit_restore
from tests import factory

ADMIN = Principal(kind="person", name="adam", role="admin")


def _search(world, conv, q):
    body = {"agent": "copilot", "conversation": conv.pk, "q": q}
    results = world.client("copilot").post("/api/memory/search", body, format="json").json()["results"]
    return [r["id"] for r in results if r["kind"] == "memory"]


def test_an_agent_retires_its_own_memory_out_of_recall_at_once(world):
    conv = factory.make_conversation(world.copilot, world.general)
    memory = factory.make_memory(world.copilot, "The staging database is db-stage-4", store="shared")
    assert memory.pk in _search(world, conv, "staging database")

    response = world.client("copilot").delete(f"/api/memory/{memory.pk}?reason=wrong host")

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "invalidated"
    assert memory.pk not in _search(world, conv, "staging database")
    retired = Memory.objects.get(pk=memory.pk)
    assert (retired.text, retired.status_reason) == ("The staging database is db-stage-4", "wrong host")


def test_a_retirement_is_restorable_from_the_audit_trail(world):
    memory = factory.make_memory(world.copilot, "Deploys happen on Tuesdays", store="shared")
    world.client("copilot").delete(f"/api/memory/{memory.pk}")
    event = AuditEvent.objects.get(action="memory.revoked", object_ids=[str(memory.pk)])

    audit_restore(actor=ADMIN, event_ids=[event.pk], preview=False)

    assert Memory.objects.get(pk=memory.pk).status == "active"


def test_an_agent_may_not_retire_another_agents_memory(world):
    memory = factory.make_memory(world.scribe, "Scribe's shared note", store="shared")

    response = world.client("copilot").delete(f"/api/memory/{memory.pk}")

    assert response.status_code == 403, response.content
    assert Memory.objects.get(pk=memory.pk).status == "active"


def test_retiring_twice_is_a_conflict_and_an_unknown_id_is_404(world):
    memory = factory.make_memory(world.copilot, "Once only", store="shared")
    client = world.client("copilot")
    assert client.delete(f"/api/memory/{memory.pk}").status_code == 200

    assert client.delete(f"/api/memory/{memory.pk}").status_code == 409
    assert client.delete("/api/memory/999999999").status_code == 404
    assert world.client("integration").delete(f"/api/memory/{memory.pk}").status_code == 403


def test_the_mcp_tool_retires_the_agents_own_memory(world):
    from unittest import mock

    from memory.mcp.tools import ToolRefused, call_tool

    own = factory.make_memory(world.copilot, "Mine to retire", store="shared")
    other = factory.make_memory(world.scribe, "Not mine", store="shared")
    agent = Principal.for_agent(world.copilot)
    with mock.patch("memory.mcp.tools.close_old_connections"):
        out = call_tool(agent, "memory_retire", {"memory": own.pk, "reason": "outdated"})
        try:
            call_tool(agent, "memory_retire", {"memory": other.pk})
            refused = None
        except ToolRefused as exc:
            refused = exc

    assert out["status"] == "invalidated"
    assert refused is not None and refused.status == 403
    assert Memory.objects.get(pk=other.pk).status == "active"
