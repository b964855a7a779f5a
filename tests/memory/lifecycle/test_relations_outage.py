"""Issue 52: the relation finder's sweep is a model-backed job like the others, and the rules
never wait on the model. When a pair it must put to the light model meets an outage, what the
rules find is recorded at once, and the memories whose model pairs wait are asked again by one
deferred task (knowledge.llm.outage) once the server answers; no pair is skipped, none recorded
twice."""

from knowledge.models import AuditEvent, Memory, MemoryContradiction
from memory.lifecycle.conflicts import RECHECK, contradictions_sweep
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


def test_an_outage_keeps_the_pair_for_the_model_and_the_deferral_comes_back_for_it(
    world, model_stub, settings
):
    settings.BRAIN_MODEL_MAX_RETRIES = 0
    old = factory.make_memory(world.scribe, OLD, store="shared")
    new = trusted_write(world, NEW)
    model_stub.reply_error(503, "loading model")
    assert contradictions_sweep() == 2  # the factory's write goes through the same path
    assert len(model_stub.chat_requests()) == 1
    assert not MemoryContradiction.objects.exists()  # the pair waits for the model
    (waiting,) = deferred(RECHECK)
    assert waiting.args == repr(([new],))

    server_down()  # the deferral comes back while the background check finds the server down
    assert run_deferred(waiting) == 0
    assert len(model_stub.chat_requests()) == 1 and not MemoryContradiction.objects.exists()
    (waiting,) = deferred(RECHECK)
    assert (waiting.args, waiting.kwargs) == (repr(([new],)), repr({"deferrals": 2}))

    server_down(down=False)
    model_stub.reply_json(CONTRADICTION)
    assert run_deferred(waiting) == 1
    mark = MemoryContradiction.objects.get()
    assert (mark.memory_id, mark.other_id) == (new, old.pk) and "married, not single" in mark.why
    assert Memory.objects.filter(pk__in=[old.pk, new], status=Memory.ACTIVE).count() == 2
    assert deferred(RECHECK) == []
    assert contradictions_sweep() == 0  # nothing new since


def test_in_an_outage_what_the_rules_find_is_recorded_at_once_and_only_once(world, model_stub, settings):
    """A write the rules call a contradiction is marked by the sweep although the model server
    is down (recall shows the pair from then on); the model's pairs of the same memory wait, and
    when they are asked the rules' pair is not recorded or audited a second time."""
    settings.BRAIN_MODEL_MAX_RETRIES = 0
    frozen = factory.make_memory(
        world.scribe, "Deploys are prohibited every Friday after 14:00", store="shared"
    )
    single = factory.make_memory(world.scribe, OLD, store="shared")
    friday = trusted_write(world, "Deploys are allowed on Fridays.")
    married = trusted_write(world, NEW)
    server_down()
    assert contradictions_sweep() == 4
    assert model_stub.chat_requests() == []  # a server found down is not called
    assert list(MemoryContradiction.objects.values_list("memory_id", "other_id")) == [(friday, frozen.pk)]
    (waiting,) = deferred(RECHECK)
    assert waiting.args == repr(([married],))

    server_down(down=False)
    model_stub.reply_json(CONTRADICTION)
    assert run_deferred(waiting) == 1
    pairs = set(MemoryContradiction.objects.values_list("memory_id", "other_id"))
    assert pairs == {(friday, frozen.pk), (married, single.pk)}
    marked = AuditEvent.objects.filter(action="memory.contradictions_marked").values_list("data", flat=True)
    assert sorted((d["memory"], d["conflict_with"]) for d in marked) == [
        (friday, [frozen.pk]),
        (married, [single.pk]),
    ]
