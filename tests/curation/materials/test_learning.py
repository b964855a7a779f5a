"""Learning a material with the model (the loopback stub): Dreaming stage B's operations and
rules on the material's sections; good, invalid and failing replies."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.materials.learning import material_learn
from knowledge.models import Entry, EntryRelation, Material, Memory
from tests.knowledge.materials.documents import docx_bytes, pdf_bytes

pytestmark = pytest.mark.django_db

DOCS = {
    "policy.pdf": pdf_bytes(["Refunds are paid within 30 days.", "Acme is a supplier of Globex."]),
    "policy.docx": docx_bytes(
        [("Refunds", "Refunds are paid within 30 days."), ("Acme", "Acme is a supplier of Globex.")]
    ),
    "notes.md": b"# Refunds\nRefunds are paid within 30 days.\n\n# Acme\nAcme is a supplier of Globex.",
    "page.html": b"<h1>Refunds</h1><p>Refunds are paid within 30 days.</p><h1>Acme</h1><p>Acme is a supplier of Globex.</p>",
    "notes.txt": b"# Refunds\nRefunds are paid within 30 days.\n\n# Acme\nAcme is a supplier of Globex.",
}

GOOD = [
    {"op": "create_entry", "name": "Refund policy", "type": "policy", "summary": "How refunds work."},
    {
        "op": "add_block",
        "entry": "Refund policy",
        "text": "Refunds are paid within 30 days.",
        "kind": "observation",
        "sources": [{"kind": "section", "ref": 1}],
    },
    {"op": "create_entry", "name": "Acme", "type": "organization"},
    {"op": "create_entry", "name": "Globex", "type": "organization"},
    {
        "op": "add_block",
        "entry": "Acme",
        "text": "Acme supplies Globex.",
        "kind": "observation",
        "sources": [{"kind": "section", "ref": 2}],
    },
    {
        "op": "add_relation",
        "entry": "Acme",
        "predicate": "supplies",
        "target": "Globex",
        "sources": [{"kind": "section", "ref": 2}],
        "quote": "Acme is a supplier of Globex",
    },
    # dropped by the rules: an inferred relation, a block citing a section that does not exist
    {
        "op": "add_relation",
        "entry": "Globex",
        "predicate": "owns",
        "target": "Acme",
        "sources": [{"kind": "section", "ref": 2}],
        "quote": "Globex owns Acme",
    },
    {
        "op": "add_block",
        "entry": "Acme",
        "text": "Acme is large.",
        "sources": [{"kind": "section", "ref": 9}],
    },
]


def _upload(world, name):
    response = world.client("admin").post(
        "/api/materials",
        {"file": SimpleUploadedFile(name, DOCS[name]), "agent": "copilot", "scope": "shared"},
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    return response.json()["material"]["id"]


@pytest.mark.parametrize("name", list(DOCS))
def test_a_good_reply_writes_focused_entries_citing_sections_and_only_stated_relations(
    world, model_stub, name
):
    material_id = _upload(world, name)
    model_stub.reply_json({"operations": GOOD})
    assert material_learn(material_id) == "learned with a model"
    material = Material.objects.get(pk=material_id)
    assert material.state == Material.LEARNED and material.learned_with == "material-learn/1"
    assert "2 dropped" in material.reason
    assert set(Entry.objects.values_list("name", flat=True)) == {"Refund policy", "Acme", "Globex"}
    block = Memory.objects.get(entry__name="Refund policy")
    assert list(block.sources.values_list("kind", "ref")) == [("material", f"{material_id}#1")]
    relations = list(EntryRelation.objects.values_list("source__name", "predicate", "target__name"))
    assert relations == [("Acme", "supplies", "Globex")]
    assert "Refunds are paid within 30 days." in model_stub.prompt(model_stub.chat_requests()[-1])


def test_an_invalid_reply_is_repaired_once_then_the_material_is_learned_plainly(world, model_stub):
    material_id = _upload(world, "notes.md")
    bad = {"operations": [{"op": "rewrite_memo", "text": "x"}]}  # not a learning operation
    model_stub.reply_json(bad)
    model_stub.reply_json(bad)  # the repair, with the schema error quoted back, is refused too
    assert material_learn(material_id) == "learned with a model"
    assert "That reply was refused" in model_stub.prompt(model_stub.chat_requests()[1])
    material = Material.objects.get(pk=material_id)
    assert material.state == Material.LEARNED and material.learned_with == "plain/1"
    assert material.reason.startswith("learned without a model (the model failed: invalid model output")
    assert list(Entry.objects.values_list("type", flat=True)) == ["document"]  # no model-made entry


def test_a_reply_that_passes_no_rule_fails_and_writes_nothing(world, model_stub):
    material_id = _upload(world, "notes.md")
    model_stub.reply_json({"operations": [GOOD[0], {**GOOD[1], "sources": [{"kind": "section", "ref": 7}]}]})
    assert material_learn(material_id).startswith("failed")
    assert "taught nothing that passes the rules" in Material.objects.get(pk=material_id).reason
    assert not Entry.objects.exists()


def test_a_failing_model_falls_back_to_plain_learning_and_says_so(world, model_stub):
    material_id = _upload(world, "policy.pdf")
    model_stub.reply_error(401, "invalid api key")  # the request's fault, not an outage
    material_learn(material_id)
    material = Material.objects.get(pk=material_id)
    assert material.state == Material.LEARNED and material.learned_with == "plain/1"
    assert "the model failed: failing: HTTP 401" in material.reason
    assert Entry.objects.get().type == "document"
    model_stub.reset()
    assert (
        world.client("admin")
        .post(f"/api/materials/{material_id}/retry", {"again": True}, format="json")
        .status_code
        == 200
    )
    model_stub.reply_json({"operations": GOOD[:2]})
    assert material_learn(material_id) == "learned with a model"
    assert Material.objects.get(pk=material_id).learned_with == "material-learn/1"


def test_an_outage_defers_learning_until_the_server_answers_never_plain(world, model_stub, settings):
    """Issue 52: a 503 or a server the background check finds down is an outage: the material
    is not learned plainly nor failed; it is queued again (the attempt not counted) and learned
    with the model once the server answers."""
    from tests.deferred import deferred, run_deferred, server_down

    settings.BRAIN_MODEL_MAX_RETRIES = 0
    material_id = _upload(world, "policy.pdf")
    model_stub.reply_error(503, "loading model")
    assert material_learn(material_id).startswith("deferred: failing: HTTP 503")
    material = Material.objects.get(pk=material_id)
    assert (material.state, material.attempts) == (Material.QUEUED, 0)
    assert material.reason.startswith("deferred: failing: HTTP 503")
    assert not Entry.objects.exists()
    (again,) = deferred("knowledge.materials.tasks.material_learn")

    server_down()
    calls = len(model_stub.chat_requests())
    assert run_deferred(again).startswith("deferred: unreachable")
    assert len(model_stub.chat_requests()) == calls and not Entry.objects.exists()
    (again,) = deferred("knowledge.materials.tasks.material_learn")

    server_down(down=False)
    model_stub.reply_json({"operations": GOOD[:2]})
    assert run_deferred(again) == "learned with a model"
    material = Material.objects.get(pk=material_id)
    assert (material.state, material.learned_with, material.attempts) == (
        Material.LEARNED,
        "material-learn/1",
        1,
    )


def test_a_long_material_is_fitted_to_the_context(world, model_stub):
    from knowledge.llm import model_profile_save
    from tests.factory import SYSTEM

    model_profile_save(actor=SYSTEM, name="light", context_tokens=2500)
    model_stub.context_tokens = 2500
    material_id = _upload(world, "notes.md")
    model_stub.reply_json({"operations": GOOD[:2]})
    assert material_learn(material_id) == "learned with a model"
    sent = model_stub.chat_requests()
    assert len(sent) == 1 and sent[0]["max_tokens"] == 1250  # half the context, not 6,000
    assert model_stub.schema_sent(sent[0]) is not None


def test_learning_again_with_the_model_reuses_its_entries_and_replaces_their_blocks(world, model_stub):
    material_id = _upload(world, "notes.md")
    model_stub.reply_json({"operations": GOOD[:2]})
    material_learn(material_id)
    entry = Entry.objects.get()
    assert (
        world.client("admin")
        .post(f"/api/materials/{material_id}/retry", {"again": True}, format="json")
        .status_code
        == 200
    )
    model_stub.reply_json({"operations": [GOOD[0], {**GOOD[1], "text": "Refunds take at most 30 days."}]})
    assert material_learn(material_id) == "learned with a model"
    assert list(Entry.objects.values_list("pk", flat=True)) == [entry.pk]
    live = list(Memory.objects.filter(entry=entry, status="active").values_list("text", flat=True))
    assert live == ["Refunds take at most 30 days."]
