"""brain_client against a live test server: every agent-callable operation of the OpenAPI
schema is reachable, answers parse into the typed models, errors are typed, pages iterate."""

import re

import httpx
import pytest
from brain_client import (
    OPERATIONS,
    BadRequest,
    Brain,
    Conflict,
    Forbidden,
    Me,
    Memory,
    NotFound,
    RateLimited,
    Unauthorized,
)
from brain_client.models import (
    CompiledContext,
    Conversation,
    Memo,
    MessagesStored,
    MessageStored,
    SearchResults,
)
from django.urls import resolve

from knowledge.models import Channel
from knowledge.models import Memory as MemoryRow
from knowledge.principal import Principal
from memory.skills import services as skill_services
from tests import factory

pytestmark = pytest.mark.django_db(transaction=True)
ADMIN = Principal(kind="person", name="tests", role="admin")

# Operations whose permission class lets an agent in but whose view refuses agents (admins or
# people only). The test below checks that each really answers an agent 403.
PEOPLE_ONLY = {
    ("PUT", "/api/agents/{}/memo"): "/api/agents/copilot/memo",
    ("POST", "/api/skills"): "/api/skills",
    ("PATCH", "/api/skills/{}"): "/api/skills/triage",
    ("PUT", "/api/agents/{}/skills/{}"): "/api/agents/copilot/skills/triage",
    ("PUT", "/api/guides/{}"): "/api/guides/copilot",
}


def shape(path: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", path)


def _schema(url: str) -> dict:
    return httpx.get(f"{url}/api/schema/", params={"format": "json"}).json()


def _agent_callable(schema: dict, agent) -> set[tuple[str, str]]:
    """Operations whose view's permission classes admit an agent token."""
    principal = Principal.for_agent(agent)
    out = set()
    for path, ops in schema["paths"].items():
        if path in ("/api/schema/", "/api/docs/"):
            continue
        concrete = re.sub(r"\{[^}]*\}", "1", path)
        view = resolve(concrete).func
        permissions = getattr(getattr(view, "cls", None), "permission_classes", [])
        for method in ops:
            if method.upper() not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                continue
            request = type("Request", (), {"user": principal, "method": method.upper()})()
            if all(p().has_permission(request, None) for p in permissions):
                out.add((method.upper(), shape(path)))
    return out


def test_every_operation_an_agent_may_call_is_in_the_client(live_server, world):
    callable_ = _agent_callable(_schema(live_server.url), world.copilot)
    assert ("POST", "/api/memory") in callable_ and ("POST", "/api/memory/{}/approve") not in callable_
    client_ops = {(m, shape(p)) for m, p in OPERATIONS}
    assert callable_ - set(PEOPLE_ONLY) - client_ops == set()
    # The client calls nothing the schema does not describe.
    assert client_ops - callable_ == set()
    # The people-only ones really refuse an agent.
    skill_services.skill_create(actor=ADMIN, name="triage", title="Triage")
    headers = {"Authorization": f"Bearer {world.tokens['copilot']}"}
    for (method, _), concrete in PEOPLE_ONLY.items():
        answer = httpx.request(method, f"{live_server.url}{concrete}", json={}, headers=headers)
        assert answer.status_code == 403, (method, concrete, answer.status_code)


def test_the_typed_models_match_the_schema(live_server):
    schema = _schema(live_server.url)
    components = schema["components"]["schemas"]

    def response(method, path, status="200"):
        for p, ops in schema["paths"].items():
            if shape(p) == shape(path):
                body = ops[method.lower()]["responses"][status]["content"]["application/json"]["schema"]
                if "$ref" in body:
                    body = components[body["$ref"].rsplit("/", 1)[-1]]
                return body
        raise AssertionError(path)

    for model, method, path, status in [
        (Me, "GET", "/api/me", "200"),
        (Memory, "POST", "/api/memory", "201"),
        (Conversation, "POST", "/api/conversations", "201"),
        (SearchResults, "POST", "/api/memory/search", "200"),
        (CompiledContext, "POST", "/api/agents/{agent}/context", "200"),
        (Memo, "GET", "/api/agents/{agent}/memo", "200"),
    ]:
        # Every field the schema documents is typed (the live answers, checked in the journey
        # below, may carry more than the schema says).
        properties = set(response(method, path, status).get("properties", {}))
        assert properties <= model.field_names(), (model.__name__, properties - model.field_names())


def _strict(model, answer) -> None:
    """The live answer has no field the model does not know."""
    assert answer.extra.keys() <= {"versions", "reranker", "embedding_ms"}, (
        type(answer).__name__,
        answer.extra,
    )


def test_an_agent_does_its_whole_job_through_the_client(live_server, world):
    skill = skill_services.skill_create(actor=ADMIN, name="triage", title="Triage", instructions="Ask first.")
    skill_services.skill_enable(actor=ADMIN, agent=world.copilot, skill=skill, enabled=True)
    brain = Brain(live_server.url, world.tokens["copilot"])

    me = brain.me()
    assert (me.kind, me.name) == ("agent", "copilot") and brain.agent == "copilot"
    conversation = brain.conversations.open("general")
    _strict(Conversation, conversation)
    assert conversation.status == "open" and brain.conversations.get(conversation.id).id == conversation.id

    one = brain.messages.post("general", "alice", "VPN error E4012 again", external_id="m-1")
    assert isinstance(one, MessageStored) and not one.duplicate
    assert brain.messages.post("general", "alice", "VPN error E4012 again", external_id="m-1").duplicate
    many = brain.messages.post_many(
        [{"channel": "general", "speaker": "bob", "text": "me too", "external_id": "m-2"}]
    )
    assert isinstance(many, MessagesStored) and many.stored == 1 and many.messages[0].id

    memory = brain.memory.write(
        "VPN error E4012 is fixed by client 5.2.1",
        scope="shared",
        sources=[{"kind": "kb", "ref": "KB-7"}],
        conversation=conversation.id,
    )
    _strict(Memory, memory)
    assert memory.status == "queued" and memory.sources == [{"kind": "kb", "ref": "KB-7"}]
    fetched = brain.memory.get(memory.id)
    assert fetched.text == memory.text and fetched.extra["versions"]
    for n in range(4):
        brain.memory.write(f"note number {n}", scope="agent")
    page = brain.memory.list(page_size=2)
    assert page.count >= 5 and page.pages >= 3 and len(page.results) == 2
    assert len(list(brain.memory.iter(page_size=2))) == page.count
    assert brain.memory.provenance(memory.id)
    assert "results" in brain.memory.stale() or brain.memory.stale() is not None

    found = brain.memory.search("E4012", conversation=conversation.id, k=5)
    _strict(SearchResults, found)
    assert any("E4012" in r.get("text", "") for r in found.results)
    assert brain.memory.browse("conversation", conversation.id)["kind"] == "conversation"
    context = brain.context(conversation=conversation.id, q="VPN", budget_tokens=600)
    _strict(CompiledContext, context)
    assert context.total_tokens <= 600 and "Triage" in context.text
    assert brain.memory.memo().agent == "copilot"

    assert [s["name"] for s in brain.skills.list()] == ["triage"]
    assert brain.skills.get("triage")["name"] == "triage"
    assert brain.skills.mine()[0]["enabled"] is True
    assert brain.skills.load("triage")["skill"] == "triage"
    outcome = brain.skills.outcome(
        "triage", "fix VPN", "success", conversation=conversation.id, external_id="t-1"
    )
    assert brain.skills.outcome("triage", "fix VPN", "success", external_id="t-1")["id"] == outcome["id"]
    assert [o["id"] for o in brain.skills.outcomes(skill="triage")] == [outcome["id"]]
    lesson = brain.skills.experience(
        "triage",
        "Ask for the VPN client version first.",
        sources=[{"kind": "task_outcome", "ref": str(outcome["id"])}],
    )
    assert lesson["status"] == "queued"

    entry = brain.entries.create(
        "VPN client", type="system", scope="shared", summary="The office VPN client."
    )
    other = brain.entries.create("Office network", scope="shared")
    assert brain.entries.get(entry["id"])["name"] == "VPN client"
    brain.entries.update(entry["id"], summary="The office VPN client (5.x).", version=entry["version"])
    block = brain.entries.block_add(
        entry["id"], "Version 5.2.1 fixes E4012.", sources=[{"kind": "kb", "ref": "KB-7"}]
    )
    brain.entries.block_update(entry["id"], block["id"], position=0)
    relation = brain.entries.relation_add(
        entry["id"], "part_of", other["id"], sources=[{"kind": "kb", "ref": "KB-7"}]
    )
    assert "VPN client" in brain.entries.projection(entry["id"])["markdown"]
    brain.entries.relation_remove(entry["id"], relation["id"], reason="test")
    brain.entries.block_remove(entry["id"], block["id"], reason="test")
    assert {e["id"] for e in brain.entries.iter(page_size=1)} >= {entry["id"], other["id"]}
    brain.entries.delete(other["id"], reason="test")
    assert brain.entries.guide()["owner"] == "copilot"

    assert brain.runs.finish("run-1")["cleared"] == 0
    assert "alerts" in brain.status()
    finished = brain.conversations.finish(conversation.id)
    assert finished.status == "finished"
    with pytest.raises(Conflict) as refused:
        brain.conversations.finish(conversation.id)
    assert refused.value.status == 409 and refused.value.message


def test_refusals_are_typed_exceptions_with_the_apis_message(live_server, world, settings):
    factory.make_channel("dm-bob", kind=Channel.KIND_DM, person=world.bob, agent=world.scribe)
    brain = Brain(live_server.url, world.tokens["copilot"])
    with pytest.raises(Forbidden) as forbidden:
        brain.conversations.open("dm-bob")
    assert forbidden.value.message and forbidden.value.body["error"] == forbidden.value.message

    before = MemoryRow.objects.count()
    with pytest.raises(BadRequest) as bad:
        brain.memory.write("x", teir="working")
    assert bad.value.fields == {"teir": ["Unknown field."]} and "teir" in bad.value.message
    assert MemoryRow.objects.count() == before
    with pytest.raises(NotFound):
        brain.memory.get(999_999)
    with pytest.raises(Unauthorized):
        Brain(live_server.url, "not-a-token", retries=0).me()

    settings.BRAIN_API_BAD_TOKENS_PER_MINUTE = 0
    with pytest.raises(RateLimited) as limited:
        Brain(live_server.url, "still-not-a-token", retries=0).me()
    assert limited.value.status == 429 and limited.value.retry_after is not None


def test_it_retries_429_and_503_honouring_retry_after_and_5xx_only_when_safe():
    """The retry policy, on a scripted transport (the server cannot be made to fail on cue)."""
    answers = []

    def handler(request):
        answers.append(request.method)
        script = {1: (429, {"Retry-After": "0"}), 2: (503, {"Retry-After": "0"})}
        status, headers = script.get(len(answers), (200, {}))
        body = {"kind": "agent", "name": "copilot", "role": None} if status == 200 else {"error": "busy"}
        return httpx.Response(status, json=body, headers=headers)

    brain = Brain("http://brain.test", "t", transport=httpx.MockTransport(handler), backoff=0)
    assert brain.me().name == "copilot" and answers == ["GET"] * 3

    posts = []

    def failing(request):
        posts.append(request.method)
        return httpx.Response(500, json={"error": "boom"})

    brain = Brain(
        "http://brain.test", "t", agent="copilot", transport=httpx.MockTransport(failing), backoff=0
    )
    with pytest.raises(Exception) as failed:
        brain.memory.write("x")
    assert failed.value.status == 500 and failed.value.message == "boom" and posts == ["POST"]


def test_an_agent_asks_itself_to_learn_a_file_and_gets_the_original_back(live_server, world):
    from tests.knowledge.materials.documents import pdf_bytes

    brain = Brain(live_server.url, world.tokens["copilot"])
    data = pdf_bytes(["Refunds are paid within 30 days."])
    stored = brain.materials.learn_file(data, "refunds.pdf", scope="agent")["material"]
    assert stored["version"]["media_type"] == "application/pdf" and stored["store"] == "self"
    assert brain.materials.original(stored["id"]) == data
    detail = brain.materials.get(stored["id"])
    assert detail["material"]["state"] == "learned"  # the test settings run jobs inline
    assert [e["blocks"] for e in detail["entries"]] == [1]
    pasted = brain.materials.learn_text("Lunch", text="Lunch is at noon.")
    assert pasted["entry"] and pasted["material"]["kind"] == "text"
    assert {m["id"] for m in brain.materials.list()} == {stored["id"], pasted["material"]["id"]}
