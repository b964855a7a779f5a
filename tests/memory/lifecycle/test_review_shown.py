"""A decision on many queued memories acts on what was shown (issue 58.3), over the API: the dry
run names the memories and a snapshot token; the decision takes the ids or the token, never a
filter, so a memory that arrives in between is not decided unseen."""

from knowledge.models import AuditEvent, Memory
from knowledge.principal import Principal
from memory.lifecycle import operate, review
from tests import factory
from tests.openapi import response_schema, validate


def mem0(world, text, person="alice"):
    from memory.lifecycle.write import WriteRequest, memory_write

    return memory_write(
        actor=Principal.system("import_mem0"),
        request=WriteRequest(
            owner=world.copilot,
            store=f"private:{person}",
            text=text,
            category="mem0",
            sources=[{"kind": "record", "ref": f"mem0:{abs(hash(text))}"}],
        ),
        route="import",
    )


def test_the_dry_run_names_the_ids_and_the_snapshot_decides_exactly_them(world):
    shown = [mem0(world, f"Alice fact {i}") for i in range(3)]
    mem0(world, "Bob likes tea", person="bob")
    client = world.client("reviewer")
    dry = client.get("/api/memory/review?import=mem0&store=private:alice")
    assert dry.status_code == 200, dry.content
    body = dry.json()
    validate(response_schema("/api/memory/review", "get", 200), body)
    assert body["ids"] == [m.pk for m in shown] and body["count"] == 3 and not body["capped"]
    assert Memory.objects.filter(status=Memory.ACTIVE).count() == 0  # a dry run decides nothing

    review.memory_reject(actor=Principal.system("other reviewer"), memory_id=shown[0].pk, reason="no")
    late = mem0(world, "Alice's card number is 4242")  # the filter matches 3 again
    operate.memory_revise(actor=factory.SYSTEM, memory_id=shown[1].pk, text="Alice's PIN is 1234", reason="x")
    decided = client.post(
        "/api/memory/review", {"action": "approve", "snapshot": body["snapshot"]}, format="json"
    )
    assert decided.status_code == 200, decided.content
    out = decided.json()
    validate(response_schema("/api/memory/review", "post", 200), out)
    assert out["done"] == [shown[2].pk] and out["changed"] == [shown[1].pk]
    assert set(out["failed"]) == {str(shown[0].pk), str(shown[1].pk)}
    assert "rejected" in out["failed"][str(shown[0].pk)]
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert statuses[late.pk] == statuses[shown[1].pk] == Memory.QUEUED
    assert AuditEvent.objects.get(action="memory.approved").batch_id.hex == out["batch"].replace("-", "")


def test_a_decision_by_ids_decides_those_ids_only(world):
    a, b, c = (mem0(world, f"Alice fact {i}") for i in range(3))
    client = world.client("reviewer")
    out = client.post(
        "/api/memory/review", {"action": "reject", "reason": "not facts", "ids": [a.pk, c.pk]}, format="json"
    ).json()
    assert out["done"] == [a.pk, c.pk] and out["changed"] == []
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert [statuses[m.pk] for m in (a, b, c)] == [Memory.REJECTED, Memory.QUEUED, Memory.REJECTED]


def test_the_decision_refuses_a_filter_a_forged_snapshot_and_non_reviewers(world):
    memory = mem0(world, "Alice fact 1")
    client = world.client("reviewer")
    for body, field in [
        ({"action": "approve", "store": "private:alice"}, "store"),  # no decision by filter
        ({"action": "approve"}, "ids"),
        ({"action": "approve", "ids": [memory.pk], "snapshot": "x"}, "ids"),
        ({"action": "reject", "ids": [memory.pk]}, "reason"),
        ({"action": "approve", "snapshot": "forged"}, "snapshot"),
    ]:
        answer = client.post("/api/memory/review", body, format="json")
        assert answer.status_code == 400 and field in answer.json()["fields"], (body, answer.json())
    assert world.client("copilot").get("/api/memory/review").status_code == 403
    assert world.client("copilot").post("/api/memory/review", {}, format="json").status_code == 403
    assert Memory.objects.get(pk=memory.pk).status == Memory.QUEUED
