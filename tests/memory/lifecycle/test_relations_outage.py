"""Issue 52: the relation finder's sweep is a model-backed job like the others. When a pair it
must put to the light model meets an outage, nothing is recorded for that memory, the sweep's
cursor stays before it, and the sweep comes back through its deferral (knowledge.llm.outage);
the sweeps later writes start meanwhile leave the work to that deferral."""

from knowledge.models import AuditEvent, Memory, MemoryContradiction
from memory.lifecycle.conflicts import SWEEP, contradictions_sweep
from tests import factory
from tests.deferred import deferred, run_deferred, server_down

OLD = "Olaf Berg is single and lives alone."
NEW = "Olaf Berg got married in May."
CONTRADICTION = {
    "relation": "contradiction",
    "reason": "married, not single",
    "spans": ["single", "got married"],
}


def trusted_write(world, text: str) -> int:
    body = {"scope": "shared", "text": text, "sources": [{"kind": "kb", "ref": "KB-1"}]}
    response = world.client("scribe").post("/api/memory", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def test_an_outage_keeps_the_pair_for_the_model_and_the_sweep_comes_back_for_it(world, model_stub, settings):
    settings.BRAIN_MODEL_MAX_RETRIES = 0
    old = factory.make_memory(world.scribe, OLD, store="shared")
    new = trusted_write(world, NEW)
    model_stub.reply_error(503, "loading model")
    assert contradictions_sweep() == 1  # the older write only: the new one waits for the model
    assert len(model_stub.chat_requests()) == 1
    assert not MemoryContradiction.objects.exists()
    assert not AuditEvent.objects.filter(action="memory.contradictions_marked").exists()
    (waiting,) = deferred(SWEEP)

    # a later write's sweep leaves the work to the deferral: no call, no second deferral
    trusted_write(world, "The cafeteria on floor two opens at eight.")
    assert contradictions_sweep() == 0
    assert len(model_stub.chat_requests()) == 1 and len(deferred(SWEEP)) == 1

    server_down()  # the deferral comes back while the background check finds the server down
    assert run_deferred(waiting) == 0
    assert len(model_stub.chat_requests()) == 1 and not MemoryContradiction.objects.exists()
    (waiting,) = deferred(SWEEP)
    assert waiting.kwargs == repr({"deferrals": 2})

    server_down(down=False)
    model_stub.reply_json(CONTRADICTION)
    assert run_deferred(waiting) == 2  # both writes, the waiting one first
    mark = MemoryContradiction.objects.get()
    assert (mark.memory_id, mark.other_id) == (new, old.pk) and "married, not single" in mark.why
    assert Memory.objects.filter(pk__in=[old.pk, new], status=Memory.ACTIVE).count() == 2
    assert deferred(SWEEP) == []
    assert contradictions_sweep() == 0  # nothing new since
