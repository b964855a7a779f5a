"""The model's part of the relation finder (issue 51): a pair the rules leave undecided goes to
the light model in the background step after a trusted write, through the governed client (the
loopback stub here), and a reply failing the schema or the code check records nothing."""

from knowledge.models import AuditEvent, Memory, MemoryContradiction, ModelUsage
from memory.lifecycle.conflicts import contradictions_marked
from memory.matching.relation_model import SCHEMA, VERSION, reply_breach
from memory.matching.relations import UNDECIDED, classify
from tests import factory

OLD = "Olaf Berg is single and lives alone."
NEW = "Olaf Berg got married in May."


def pair(world):
    old = factory.make_memory(world.scribe, OLD, store="shared")
    new = factory.make_memory(world.scribe, NEW, store="shared")
    return old, new


def test_the_rules_leave_the_pair_undecided():
    assert classify(OLD, NEW).kind == UNDECIDED


def test_an_undecided_pair_goes_to_the_model_and_a_checked_contradiction_is_recorded(world, model_stub):
    old, new = pair(world)
    model_stub.reply_json(
        {"relation": "contradiction", "reason": "married, not single", "spans": ["single", "got married"]}
    )
    assert contradictions_marked(new.pk) == ([old.pk], "")
    request = model_stub.chat_requests()[0]
    sent = model_stub.schema_sent(request)  # the governed client sent the schema
    assert sent["required"] == SCHEMA["required"]
    assert sent["properties"]["relation"] == SCHEMA["properties"]["relation"]
    assert OLD in model_stub.prompt(request) and NEW in model_stub.prompt(request)
    mark = MemoryContradiction.objects.get()
    assert (mark.memory_id, mark.other_id) == (new.pk, old.pk)
    assert mark.why.startswith(f"model ({VERSION}): married, not single")
    assert ModelUsage.objects.filter(purpose="relations.pair").exists()
    assert AuditEvent.objects.filter(action="memory.contradictions_marked").count() == 1
    assert Memory.objects.get(pk=old.pk).status == Memory.objects.get(pk=new.pk).status == "active"


def test_a_reply_quoting_what_neither_says_records_nothing(world, model_stub):
    _, new = pair(world)
    invalid = {"relation": "contradiction", "reason": "divorced", "spans": ["divorced in June"]}
    model_stub.reply_json(invalid)
    model_stub.reply_json(invalid)  # the one repair is refused too
    assert contradictions_marked(new.pk) == ([], "")
    assert len(model_stub.chat_requests()) == 2
    assert not MemoryContradiction.objects.exists()
    assert not AuditEvent.objects.filter(action="memory.contradictions_marked").exists()


def test_a_reply_that_is_not_the_schema_records_nothing(world, model_stub):
    _, new = pair(world)
    model_stub.reply_text("They contradict.")
    model_stub.reply_text("Still not JSON.")
    assert contradictions_marked(new.pk) == ([], "")
    assert not MemoryContradiction.objects.exists()


def test_without_a_model_nothing_is_asked(world):
    _, new = pair(world)
    assert contradictions_marked(new.pk) == ([], "")
    assert not ModelUsage.objects.exists()


def test_reply_breach():
    assert reply_breach({"relation": "neither", "reason": "", "spans": []}, OLD, NEW) == ""
    assert "needs a reason" in reply_breach(
        {"relation": "duplicate", "reason": " ", "spans": ["x"]}, OLD, NEW
    )
    assert "spans" in reply_breach({"relation": "contradiction", "reason": "r", "spans": []}, OLD, NEW)
    ok = {"relation": "contradiction", "reason": "r", "spans": ["LIVES  alone", "married in May"]}
    assert reply_breach(ok, OLD, NEW) == ""
