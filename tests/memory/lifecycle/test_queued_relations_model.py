"""A queued memory's pairs the rules leave undecided go to the model in the background (issue
51): the write queues the finder's sweep, the sweep asks the light model, a contradiction it
names is recorded, shown in the memory's `related` and needs a decision at approval. Without a
model nothing is asked and nothing recorded."""

from knowledge.models import AuditEvent, Memory, MemoryContradiction
from memory.lifecycle.conflicts import contradictions_sweep
from tests import factory

OLD = "Jonas drives his car to the office every day."
NEW = "Jonas cycles to the office every day since he sold his car."


def untrusted_write(world, capture):
    body = {"scope": "shared", "text": NEW, "sources": [{"kind": "kb", "ref": "KB-1"}]}
    with capture(execute=True) as callbacks:
        written = world.client("copilot").post("/api/memory", body, format="json").json()
    assert written["status"] == "queued" and callbacks  # the sweep was queued after the commit
    contradictions_sweep()
    return written


def test_the_model_finds_a_contradiction_the_rules_cannot(
    world, model_stub, django_capture_on_commit_callbacks
):
    old = factory.make_memory(world.scribe, OLD, store="shared")
    model_stub.reply_json(
        {
            "relation": "contradiction",
            "reason": "he no longer drives",
            "spans": ["drives his car", "sold his car"],
        }
    )
    new = untrusted_write(world, django_capture_on_commit_callbacks)
    assert len(model_stub.chat_requests()) == 1
    assert MemoryContradiction.objects.filter(memory_id=new["id"], other=old).exists()
    assert Memory.objects.get(pk=new["id"]).queue_reason == "conflict"  # queued for a conflict now
    event = AuditEvent.objects.get(action="memory.contradictions_marked")
    assert event.data == {"memory": new["id"], "conflict_with": [old.pk]}

    related = world.client("copilot").get(f"/api/memory/{new['id']}").json()["related"]
    assert [(r["memory"], r["relation"]) for r in related] == [(old.pk, "contradiction")]
    assert "he no longer drives" in related[0]["why"]

    reviewer = world.client("reviewer")
    refused = reviewer.post(f"/api/memory/{new['id']}/approve", {}, format="json")
    assert refused.status_code == 409 and refused.json()["conflicts_with"] == [old.pk]
    done = reviewer.post(f"/api/memory/{new['id']}/approve", {"decision": "replace"}, format="json")
    assert done.status_code == 200, done.json()
    old.refresh_from_db()
    assert old.status == "superseded"


def test_without_a_model_nothing_is_asked_or_recorded(world, django_capture_on_commit_callbacks):
    factory.make_memory(world.scribe, OLD, store="shared")
    new = untrusted_write(world, django_capture_on_commit_callbacks)
    assert not MemoryContradiction.objects.exists()
    assert world.client("copilot").get(f"/api/memory/{new['id']}").json()["related"] == []
    approved = world.client("reviewer").post(f"/api/memory/{new['id']}/approve", {}, format="json")
    assert approved.status_code == 200
