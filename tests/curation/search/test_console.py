"""The header search: one word finds each kind, the lists' access rules and the owner selector
apply, and nothing is shown to a user without a role."""

from django.contrib.auth.models import User
from django.test import Client

from curation.search.selectors import PER_KIND, site_search
from knowledge.materials import services as materials
from knowledge.principal import Principal
from memory.lifecycle.review import memory_reject
from memory.skills import services as skills
from tests import factory


def _console(username):
    client = Client()
    client.force_login(User.objects.get(username=username))
    return client


def _kinds(response):
    return [g.kind for g in response.context["groups"]]


def test_one_word_finds_a_memory_an_entry_a_material_a_skill_and_an_audit_event(world):
    memory = factory.make_memory(world.copilot, "The Zanzibar printer needs a badge tap.", store="shared")
    entry = factory.make_entry(world.copilot, name="Zanzibar office", blocks=["Opened in 2024."])
    material = materials.material_upload(
        actor=factory.SYSTEM,
        owner=world.copilot,
        store="shared",
        filename="zanzibar.txt",
        data=b"Floor plan.",
    )
    skill = skills.skill_create(
        actor=Principal.for_user(world.admin), name="zanzibar-desk", title="Zanzibar desk"
    )
    queued = factory.make_queued_memory(world.copilot, "Nothing to do with the island.", store="shared")
    memory_reject(actor=Principal.for_user(world.reviewer), memory_id=queued.pk, reason="not Zanzibar")

    response = _console("rita").get("/search/", {"q": "zanzibar"})
    assert response.status_code == 200
    assert _kinds(response) == ["memories", "entries", "materials", "skills", "audit"]
    groups = {g.kind: g for g in response.context["groups"]}
    assert [m.pk for m in groups["memories"].items] == [memory.pk]
    assert [e.pk for e in groups["entries"].items] == [entry.pk]
    assert [m.pk for m in groups["materials"].items] == [material.pk]
    assert [s.pk for s in groups["skills"].items] == [skill.pk]
    # Audit events hold no text: the word is found in a rejection's reason.
    assert [e.action for e in groups["audit"].items] == ["memory.rejected"]
    html = response.content.decode()
    assert f'href="/memories/{memory.pk}/"' in html and f'href="/knowledge/entries/{entry.pk}/"' in html


def test_the_owner_selector_narrows_the_search_as_it_narrows_the_lists(world):
    mine = factory.make_memory(world.copilot, "Quokka facts for the copilot.", store="shared")
    factory.make_memory(world.scribe, "Quokka facts for the scribe.", store="shared")
    client = _console("rita")
    both = client.get("/search/", {"q": "quokka"}).context["groups"][0]
    assert len(both.items) == 2
    client.post("/owner", {"owner": "copilot", "next": "/"})
    narrowed = client.get("/search/", {"q": "quokka"}).context["groups"][0]
    assert [m.pk for m in narrowed.items] == [mine.pk]


def test_an_agent_principal_sees_only_its_own_stores(world):
    factory.make_memory(world.scribe, "Walrus note kept by the scribe alone.", store="self")
    shared = factory.make_memory(world.scribe, "Walrus note for everyone.", store="shared")
    groups = site_search(Principal.for_agent(world.copilot), "walrus")
    assert [m.pk for m in groups[0].items] == [shared.pk]


def test_each_kind_shows_the_first_few_and_says_there_are_more(world):
    for i in range(PER_KIND + 2):
        factory.make_memory(world.copilot, f"Okapi sighting number {i}.", store="shared")
    response = _console("rita").get("/search/", {"q": "okapi"})
    group = response.context["groups"][0]
    assert len(group.items) == PER_KIND and group.more
    assert "All matching memories" in response.content.decode()


def test_an_empty_query_searches_nothing_and_a_user_without_a_role_is_refused(world):
    assert _console("rita").get("/search/", {"q": "  "}).context["groups"] == []
    User.objects.create_user("nora", password="correct-horse-9")
    assert _console("nora").get("/search/", {"q": "x"}).status_code == 403
    assert Client().get("/search/", {"q": "x"}).status_code == 302


def test_htmx_gets_the_results_only(world):
    factory.make_memory(world.copilot, "Capybara", store="shared")
    response = _console("rita").get(
        "/search/", {"q": "capybara"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="search-results"
    )
    html = response.content.decode()
    assert "Capybara" in html and "<header" not in html


def test_memories_are_found_by_their_words_stemmed_as_the_entries_are(world):
    # The header search reads memories through their stored tsvector (its GIN index), so a word
    # finds its other forms; the memory list's own filter still matches any part of the text.
    plural = factory.make_memory(world.copilot, "Both invoices were paid late.", store="shared")
    verb = factory.make_memory(world.copilot, "The invoicing desk moved.", store="shared")
    factory.make_memory(world.copilot, "Nothing about bills here.", store="shared")
    memories = next(
        g for g in site_search(Principal.for_user(world.reviewer), "invoice") if g.kind == "memories"
    )
    assert sorted(m.pk for m in memories.items) == sorted([plural.pk, verb.pk])
