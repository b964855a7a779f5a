"""The one access module's helpers (scope_for, memory_get_for, another agent's conversation),
the console's one mapping of domain errors (knowledge.web.console_error) and the paging helper."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import Client, RequestFactory

from knowledge import access, names
from knowledge.errors import Conflict, Gone, Invalid, NotFound, Refused
from knowledge.models import Conversation
from knowledge.principal import ADMIN, REVIEWER, Principal
from knowledge.web import console_error, limit_offset
from tests import factory


def test_scope_for_names_every_unknown_name_at_once(world):
    with pytest.raises(Invalid) as caught:
        names.scope_for(Principal.for_user(world.reviewer), agent="nobody", channel="nowhere")
    assert caught.value.fields == {
        "agent": ["Unknown agent nobody."],
        "channel": ["Unknown channel nowhere."],
    }


def test_scope_for_names_the_field_the_request_used(world):
    with pytest.raises(Invalid) as caught:
        names.scope_for(Principal.for_user(world.reviewer), agent="nobody", agent_field="owner")
    assert caught.value.fields == {"owner": ["Unknown agent nobody."]}


def test_scope_for_an_unknown_conversation_is_not_found(world):
    with pytest.raises(NotFound):
        names.scope_for(Principal.for_user(world.reviewer), agent="copilot", conversation=987654)


def test_scope_for_gives_an_agent_its_own_row_and_its_conversation(world, django_assert_num_queries):
    conversation = factory.make_conversation(world.copilot, world.general)
    principal = Principal.for_agent(world.copilot)
    with django_assert_num_queries(0):
        assert names.scope_for(principal, agent="copilot").agent is world.copilot
    named = names.scope_for(principal, agent="copilot", conversation=conversation.pk, channel="general")
    assert named.conversation.pk == conversation.pk and named.conversation.agent is world.copilot
    assert named.channel.pk == world.general.pk


def test_scope_for_reads_a_conversation_and_its_channel_as_the_orm_does(world, django_assert_num_queries):
    conversation = factory.make_conversation(world.copilot, world.general)
    conversation.finished_at = conversation.started_at
    conversation.save()
    orm = Conversation.objects.select_related("channel").get(pk=conversation.pk)
    with django_assert_num_queries(1):
        named = names.scope_for(
            Principal.for_agent(world.copilot), agent="copilot", conversation=conversation.pk
        )
        assert named.conversation.channel.name == "general"

    def fields(obj):
        return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}

    assert fields(named.conversation) == fields(orm) and fields(named.conversation.channel) == fields(
        orm.channel
    )
    assert named.conversation.read_stores == orm.read_stores and isinstance(
        named.conversation.read_stores, list
    )


def test_another_agents_conversation_is_refused_in_one_sentence(world):
    conversation = factory.make_conversation(world.copilot, world.general)
    with pytest.raises(Refused) as caught:
        access.conversation_get_for(Principal.for_agent(world.scribe), conversation.pk)
    assert caught.value.message == "That conversation belongs to another agent."
    assert access.conversation_get_for(Principal.for_agent(world.copilot), conversation.pk) == conversation
    with pytest.raises(NotFound):
        access.conversation_get_for(Principal.for_agent(world.copilot), 987654)


def test_require_role_is_the_one_role_gate(world):
    reviewer, admin = Principal.for_user(world.reviewer), Principal.for_user(world.admin)
    agent, job = Principal.for_agent(world.copilot), Principal.system("dreaming")
    assert [access.has_role(p, ADMIN) for p in (reviewer, admin, agent, job)] == [False, True, False, True]
    assert [access.has_role(p, REVIEWER) for p in (reviewer, admin, agent, job)] == [True, True, False, True]
    assert access.has_role(job, ADMIN, person=True) is False
    access.require_role(admin, ADMIN)
    with pytest.raises(Refused, match="^Admins only.$"):
        access.require_role(reviewer, ADMIN)
    with pytest.raises(Refused, match="^Only admins restore.$"):
        access.require_role(job, ADMIN, "Only admins restore.", person=True)
    with pytest.raises(ValueError):
        access.has_role(admin, "owner")


def test_the_role_gates_answer_alike_in_the_console_and_the_api(world):
    """The console decorator and the DRF permission class are built on require_role: a
    reviewer gets the 403 page from an admin page and a 403 JSON from an admin API."""
    console = Client()
    console.force_login(world.reviewer)
    assert console.get("/people/").status_code == 403
    assert world.client("reviewer").post("/api/skills", {"name": "x"}, format="json").status_code == 403


def test_memory_get_for_refuses_or_hides_an_unreadable_memory(world):
    memory = factory.make_memory_row(world.copilot, "copilot's own note", store="self")
    scribe = Principal.for_agent(world.scribe)
    with pytest.raises(Refused):
        access.memory_get_for(scribe, memory.pk)
    with pytest.raises(NotFound):
        access.memory_get_for(scribe, memory.pk, hidden=True)
    with pytest.raises(NotFound):
        access.memory_get_for(scribe, 987654)
    assert access.memory_get_for(Principal.for_agent(world.copilot), memory.pk, hidden=True) == memory


def test_a_console_page_answers_the_access_layers_not_found_with_the_404_page(world):
    client = Client()
    client.force_login(world.reviewer)
    response = client.get("/knowledge/materials/987654/")
    assert response.status_code == 404
    assert "404.html" in [t.name for t in response.templates]


def _console_request():
    request = RequestFactory().get("/knowledge/")
    request.user = AnonymousUser()
    return request


@pytest.mark.parametrize(
    ("exc", "status", "text"),
    [
        (Gone("The stored original is missing."), 410, "The stored original is missing."),
        (Conflict("Changed since you loaded it."), 409, "Changed since you loaded it."),
        (Invalid({"title": ["A title is required."]}), 400, "title: A title is required."),
    ],
)
def test_console_error_answers_what_no_form_showed_as_text(db, exc, status, text):
    response = console_error(_console_request(), exc)
    assert (response.status_code, response.content.decode()) == (status, text)


def test_console_error_answers_refused_with_the_403_page(db):
    response = console_error(_console_request(), Refused("Only admins edit curation guides."))
    assert response.status_code == 403
    assert b"Not allowed" in response.content


def test_limit_offset_clamps_the_limit_and_refuses_what_postgres_cannot_take():
    assert limit_offset({}) == (50, 0)
    assert limit_offset({"limit": "5000", "offset": "7"}, default=50, most=200) == (200, 7)
    assert limit_offset({"limit": "0"}) == (1, 0)
    with pytest.raises(Invalid) as caught:
        limit_offset({"limit": "ten"})
    assert caught.value.fields == {"limit": ["limit and offset must be integers."]}
    with pytest.raises(Invalid) as caught:
        limit_offset({"offset": str(10**20)})
    assert list(caught.value.fields) == ["offset"]
