"""The review queue at volume (issue 53): filters in the URL, facet counts, pages, and a decision
on everything a filter matches — confirmed with its count, each memory through the review
service, one audit batch."""

import re

import pytest

from knowledge.models import AuditEvent, Memory
from knowledge.principal import Principal
from tests import factory

HX = {"HTTP_HX_REQUEST": "true"}
FACETS = {"reason", "agent", "store", "tier", "category", "source", "import", "author", "age"}


@pytest.fixture
def rita(client, world):
    client.force_login(world.reviewer)
    return client


def mem0(world, text, person="alice"):
    """A memory as the Mem0 import writes it for an untrusted agent: queued, in the person's
    private store, category mem0, citing its Mem0 record, authored by the importer."""
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


def shown(body: str) -> set[int]:
    return {int(i) for i in re.findall(r'<article class="card qitem" id="memory-(\d+)"', body)}


def test_each_filter_narrows_the_queue_and_stays_in_the_url(rita, world):
    alice = [mem0(world, f"Alice fact {i}") for i in range(2)]
    bob = mem0(world, "Bob likes tea", person="bob")
    ticket = factory.make_queued_memory(
        world.copilot, "VPN-4012 is fixed", category="fact", sources=[{"kind": "ticket", "ref": "INC-1"}]
    )
    scribe = factory.make_queued_memory(world.scribe, "scribe proposes a procedure", category="procedure")
    everyone = {*(m.pk for m in alice), bob.pk, ticket.pk, scribe.pk}
    assert shown(rita.get("/review/?size=25").content.decode()) == everyone
    cases = {
        "agent=scribe": {scribe.pk},
        "store=private:alice": {m.pk for m in alice},
        "category=fact": {ticket.pk},
        "source=ticket": {ticket.pk},
        "source=record": {*(m.pk for m in alice), bob.pk},
        "import=mem0": {*(m.pk for m in alice), bob.pk},
        "import=mem0&store=private:bob": {bob.pk},
        "q=vpn-4012": {ticket.pk},
        "reason=new&agent=copilot": everyone - {scribe.pk},
    }
    for query, expected in cases.items():
        assert shown(rita.get(f"/review/?{query}").content.decode()) == expected, query
    # The reason tabs keep the rest of the filter, and an unknown value is dropped, not refused.
    body = rita.get("/review/?agent=scribe").content.decode()
    assert "/review/?agent=scribe&amp;reason=merge" in body
    assert shown(rita.get("/review/?source=nonsense&order=sideways").content.decode()) == everyone
    # htmx gets the queue fragment, with the facet counts under the rest of the filter.
    fragment = rita.get("/review/?store=private:alice", **HX).content.decode()
    assert "<html" not in fragment and 'id="queue-filters"' in fragment
    assert '<option value="copilot">copilot (2)</option>' in fragment
    assert '<option value="private:bob">private:bob (1)</option>' in fragment


def test_the_queue_pages_in_either_order(rita, world):
    memories = [factory.make_queued_memory(world.copilot, f"waiting {i}") for i in range(12)]
    first = rita.get("/review/").content.decode()
    assert shown(first) == {m.pk for m in memories[:10]}
    assert (
        "page 1 of 2 · 12 matches" in first and f'rel="next" href="/review/?after={memories[9].pk}"' in first
    )
    assert shown(rita.get("/review/?page=2").content.decode()) == {m.pk for m in memories[10:]}
    newest = rita.get("/review/?order=newest&size=25").content.decode()
    ids = [int(i) for i in re.findall(r'<article class="card qitem" id="memory-(\d+)"', newest)]
    assert ids == [m.pk for m in reversed(memories)]
    assert shown(rita.get("/review/?page=99").content.decode()) == {m.pk for m in memories[10:]}


def test_the_next_page_after_decisions_still_leads_back_to_the_memories_before_it(rita, world):
    memories = [factory.make_queued_memory(world.copilot, f"waiting {i}") for i in range(15)]
    factory.set_state([m.pk for m in memories[:4]], status="active")  # decided
    second = rita.get(f"/review/?after={memories[9].pk}").content.decode()
    assert shown(second) == {m.pk for m in memories[10:]}  # the 7th to 11th still queued
    assert "page 2 of 2 · 11 matches" in second and 'rel="prev" href="/review/"' in second
    assert shown(rita.get("/review/").content.decode()) == {m.pk for m in memories[4:14]}


def test_a_page_of_fifty_takes_a_bounded_number_of_queries(rita, world, django_assert_max_num_queries):
    old = factory.make_memory(world.copilot, "old", key="k", value=-1)
    for i in range(50):
        factory.make_queued_memory(
            world.copilot,
            f"q{i}",
            sources=[{"kind": "kb", "ref": f"KB-{i}"}],
            key="k",
            value=i,
            supersedes=old if i % 2 else None,
            category="fact" if i % 3 else "mem0",
        )
    with django_assert_max_num_queries(26):
        body = rita.get("/review/?size=50&source=kb&q=q").content.decode()
    assert len(shown(body)) == 50


def snapshot_of(rita, query: str, action: str = "approve", **headers) -> str:
    """The snapshot token the confirmation of a decision on `query`'s matches carries."""
    ask = rita.get(f"/review/all?{query}&action={action}", **headers).content.decode()
    return re.search(r'name="snapshot" value="([^"]+)"', ask).group(1)


def test_approve_everything_a_filter_matches_after_confirming_its_count(rita, world):
    alice = [mem0(world, f"Alice fact {i}") for i in range(3)]
    bob = mem0(world, "Bob likes tea", person="bob")
    other = factory.make_queued_memory(world.copilot, "not from the import")
    query = "import=mem0&store=private:alice"
    ask = rita.get(f"/review/all?{query}&action=approve").content.decode()
    assert "Approve 3 memories?" in ask and 'name="snapshot"' in ask
    response = rita.post(
        f"/review/all?{query}", {"action": "approve", "snapshot": snapshot_of(rita, query)}, follow=True
    )
    assert response.redirect_chain[-1][0] == "/review/?store=private:alice&import=mem0"
    assert "Approved 3 memories matching the filter" in response.content.decode()
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert {statuses[m.pk] for m in alice} == {Memory.ACTIVE}
    assert statuses[bob.pk] == statuses[other.pk] == Memory.QUEUED
    events = AuditEvent.objects.filter(action="memory.approved")
    assert events.count() == 3 and len({e.batch_id for e in events}) == 1
    assert {e.actor_name for e in events} == {"rita"}


def test_a_memory_queued_between_confirmation_and_submit_is_not_approved(rita, world):
    """Issue 58.3: the count stays 3 because one left as another arrived; the decision acts on
    the three shown, reports the one that left, and leaves the newcomer queued, unseen."""
    shown = [mem0(world, f"Alice fact {i}") for i in range(3)]
    query = "import=mem0&store=private:alice"
    token = snapshot_of(rita, query)
    from memory.lifecycle import review

    review.memory_reject(actor=Principal.system("other reviewer"), memory_id=shown[0].pk, reason="wrong")
    late = mem0(world, "Alice's card number is 4242")  # arrives: the filter matches 3 again
    body = rita.post(f"/review/all?{query}", {"action": "approve", "snapshot": token}, follow=True)
    text = body.content.decode()
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert statuses[late.pk] == Memory.QUEUED
    assert [statuses[m.pk] for m in shown] == [Memory.REJECTED, Memory.ACTIVE, Memory.ACTIVE]
    assert "Approved 2 memories matching the filter" in text
    assert f"Memory {shown[0].pk} is rejected now (rejected by other reviewer)" in text
    assert "1 memory that came to match the filter after you confirmed was not decided." in text


def test_a_memory_changed_since_the_confirmation_is_left_queued_and_named(rita, world):
    first, second = mem0(world, "Alice fact 1"), mem0(world, "Alice fact 2")
    query = "import=mem0&store=private:alice"
    token = snapshot_of(rita, query)
    from memory.lifecycle import operate

    operate.memory_revise(actor=factory.SYSTEM, memory_id=second.pk, text="Alice's PIN is 1234", reason="x")
    text = rita.post(f"/review/all?{query}", {"action": "approve", "snapshot": token}, follow=True)
    text = text.content.decode()
    assert "Approved 1 memory matching the filter" in text
    assert f"Left queued, changed since you were shown it: #{second.pk}." in text
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert (statuses[first.pk], statuses[second.pk]) == (Memory.ACTIVE, Memory.QUEUED)


def test_a_confirmation_that_was_not_given_decides_nothing(rita, world):
    memory = mem0(world, "Alice fact 1")
    query = "import=mem0&store=private:alice"
    token = snapshot_of(rita, query)
    for bad in ("", "made-up", token[:-2] + ("AA" if not token.endswith("AA") else "BB")):
        body = rita.post(f"/review/all?{query}", {"action": "approve", "snapshot": bad}).content.decode()
        assert "Not a confirmation this Brain gave: confirm again." in body
    assert Memory.objects.get(pk=memory.pk).status == Memory.QUEUED


def test_reject_everything_matching_needs_a_reason_and_htmx_swaps_the_queue(rita, world):
    tickets = [
        factory.make_queued_memory(
            world.copilot, f"ticket {i}", sources=[{"kind": "ticket", "ref": f"I-{i}"}]
        )
        for i in range(2)
    ]
    keep = factory.make_queued_memory(world.copilot, "no source")
    ask = rita.get("/review/all?source=ticket&action=reject", **HX)
    assert ask["HX-Retarget"] == "#bulk-confirm" and "Reject 2 memories?" in ask.content.decode()
    token = snapshot_of(rita, "source=ticket", "reject", **HX)
    refused = rita.post("/review/all?source=ticket", {"action": "reject", "snapshot": token}, **HX)
    assert "Say why the memories are rejected." in refused.content.decode()
    done = rita.post(
        "/review/all?source=ticket",
        {"action": "reject", "snapshot": token, "reason": "tickets are not facts"},
        HTTP_HX_CURRENT_URL="http://testserver/review/?source=ticket",
        **HX,
    ).content.decode()
    assert "Rejected 2 memories matching the filter" in done and 'id="queue-count"' in done
    assert "Nothing waiting matches this filter." in done
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert [statuses[m.pk] for m in [*tickets, keep]] == [Memory.REJECTED, Memory.REJECTED, Memory.QUEUED]
    reasons = set(AuditEvent.objects.filter(action="memory.rejected").values_list("reason", flat=True))
    assert reasons == {"tickets are not facts"}


def test_a_decision_on_a_filter_is_for_reviewers_only(client, world):
    mem0(world, "Alice fact")
    assert client.get("/review/all?import=mem0").status_code == 302
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_user("nobody", password="x" * 12))
    assert client.post("/review/all?import=mem0", {"action": "approve", "expected": "1"}).status_code == 403
    assert Memory.objects.get().status == Memory.QUEUED


# --- the same filters on GET /api/memory?status=queued -------------------------------------------


def test_the_api_filters_the_queue_as_the_console_does(world):
    alice = [mem0(world, f"Alice fact {i}") for i in range(3)]
    bob = mem0(world, "Bob likes tea", person="bob")
    ticket = factory.make_queued_memory(
        world.copilot, "VPN-4012 is fixed", category="fact", sources=[{"kind": "ticket", "ref": "INC-1"}]
    )
    scribe = factory.make_queued_memory(world.scribe, "scribe proposes a procedure", category="procedure")
    factory.make_memory(world.copilot, "Alice fact active", store="private:alice", category="mem0")
    conflict = factory.make_queued_memory(world.copilot, "Acme prefers e-mail")
    Memory.objects.filter(pk=conflict.pk).update(queue_reason="conflict")
    client = world.client("reviewer")

    def ids(query: str) -> list[int]:
        response = client.get(f"/api/memory?status=queued&{query}")
        assert response.status_code == 200, response.json()
        return [m["id"] for m in response.json()["results"]]

    cases = {
        "agent=scribe": [scribe.pk],
        "import=mem0&store=private:alice": [m.pk for m in reversed(alice)],
        "import=mem0&store=private:bob": [bob.pk],
        "source=ticket": [ticket.pk],
        "category=fact": [ticket.pk],
        "reason=conflict": [conflict.pk],
        "q=vpn-4012": [ticket.pk],
    }
    for query, expected in cases.items():
        assert ids(query) == expected, query
    assert ids("import=mem0&store=private:alice&order=oldest") == [m.pk for m in alice]
    page = client.get("/api/memory?status=queued&import=mem0&order=oldest&page_size=2&page=2").json()
    assert (page["count"], page["pages"], [m["id"] for m in page["results"]]) == (4, 2, [alice[2].pk, bob.pk])


def test_the_api_and_the_console_queue_match_the_same_memories(world, rita):
    for i in range(3):
        mem0(world, f"Alice fact {i}")
    mem0(world, "Bob likes tea", person="bob")
    factory.make_queued_memory(world.copilot, "Alice's ticket", sources=[{"kind": "ticket", "ref": "INC-2"}])
    client = world.client("reviewer")
    for query in ("import=mem0&store=private:alice", "source=ticket", "q=alice", "source=record&q=tea"):
        api = {
            m["id"] for m in client.get(f"/api/memory?status=queued&page_size=200&{query}").json()["results"]
        }
        assert api and api == shown(rita.get(f"/review/?size=100&{query}").content.decode()), query


def test_an_unknown_filter_value_is_a_400_naming_the_values_and_reason_needs_the_queue(world):
    client = world.client("reviewer")
    answer = client.get("/api/memory?status=queued&reason=bored")
    assert answer.status_code == 400
    assert answer.json()["fields"]["reason"] == [
        'Unknown value "bored"; one of: new, conflict, requeued, merge, gate, supersedes.'
    ]
    assert list(client.get("/api/memory?status=queued&import=csv").json()["fields"]) == ["import"]
    assert list(client.get("/api/memory?status=queued&source=carrier-pigeon").json()["fields"]) == ["source"]
    assert list(client.get("/api/memory?status=queued&order=random").json()["fields"]) == ["order"]
    assert client.get("/api/memory?reason=new").json()["fields"] == {
        "reason": ["A reason filters the review queue: add status=queued."]
    }


def test_the_schema_documents_the_queue_filters():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    parameters = {p["name"]: p for p in schema["paths"]["/api/memory"]["get"]["parameters"]}
    assert {
        "status",
        "agent",
        "store",
        "category",
        "reason",
        "source",
        "import",
        "q",
        "order",
        "page",
        "tier",
        "author",
        "age",
        "facets",
    } <= set(parameters)
    assert parameters["age"]["schema"]["enum"] == ["day", "week", "month", "older"]
    page = schema["paths"]["/api/memory"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    name = page["$ref"].rsplit("/", 1)[1]
    facets = schema["components"]["schemas"][name]["properties"]["facets"]
    listed = schema["components"]["schemas"][facets["allOf"][0]["$ref"].rsplit("/", 1)[1]]["properties"]
    assert set(listed) == FACETS
    assert parameters["reason"]["schema"]["enum"] == [
        "new",
        "conflict",
        "requeued",
        "merge",
        "gate",
        "supersedes",
    ]
    assert parameters["import"]["schema"]["enum"] == ["mem0"]


# --- tier, author and age; facet counts in the API -------------------------------------------------


def _aged(memory, days: float):
    import datetime

    from django.utils import timezone

    Memory.objects.filter(pk=memory.pk).update(created_at=timezone.now() - datetime.timedelta(days=days))
    return memory


def _tier_author_age_world(world):
    """Five queued memories that differ in tier, author and how long they have waited."""
    fresh = mem0(world, "Alice likes green tea")  # semantic, by import_mem0, today
    # by copilot; a working note in its own store would be scratch, active at once
    working = factory.make_queued_memory(world.copilot, "step 3 of the run", tier="working", store="shared")
    episode = _aged(factory.make_queued_memory(world.copilot, "the call went well", tier="episodic"), 3)
    month = _aged(factory.make_queued_memory(world.copilot, "VPN-4012 needs client 5.2"), 12)
    ancient = _aged(mem0(world, "Bob moved to Oslo", person="bob"), 45)
    return fresh, working, episode, month, ancient


def test_tier_author_and_age_narrow_the_queue_with_their_counts(rita, world):
    fresh, working, episode, month, ancient = _tier_author_age_world(world)
    cases = {
        "tier=working": {working.pk},
        "tier=semantic": {fresh.pk, month.pk, ancient.pk},
        "author=import_mem0": {fresh.pk, ancient.pk},
        "author=copilot&tier=episodic": {episode.pk},
        "age=day": {fresh.pk, working.pk},
        "age=week": {episode.pk},
        "age=month": {month.pk},
        "age=older": {ancient.pk},
        "age=older&author=copilot": set(),
    }
    for query, expected in cases.items():
        assert shown(rita.get(f"/review/?{query}").content.decode()) == expected, query
    body = rita.get("/review/?author=copilot").content.decode()
    # each facet counts under the rest of the filter: the tiers and ages of copilot's three,
    # the authors under no author filter
    assert '<option value="working">working (1)</option>' in body
    assert '<option value="semantic">semantic (1)</option>' in body
    assert '<option value="import_mem0">import_mem0 (2)</option>' in body
    assert '<option value="copilot" selected>copilot (3)</option>' in body
    assert '<option value="day">under a day (1)</option>' in body
    assert '<option value="older">over 30 days (0)</option>' in body
    # the confirmation names the filter in words, and approves exactly what it matched
    ask = rita.get("/review/all?author=import_mem0&age=older&action=approve").content.decode()
    assert "Approve 1 memory?" in ask and "over 30 days" in ask
    rita.post(
        "/review/all?author=import_mem0&age=older",
        {"action": "approve", "snapshot": snapshot_of(rita, "author=import_mem0&age=older")},
    )
    assert Memory.objects.get(pk=ancient.pk).status == Memory.ACTIVE
    assert Memory.objects.filter(status=Memory.QUEUED).count() == 4


def test_the_api_filters_by_tier_author_and_age_and_counts_facets_when_asked(world):
    fresh, working, episode, month, ancient = _tier_author_age_world(world)
    client = world.client("reviewer")

    def get(query: str) -> dict:
        response = client.get(f"/api/memory?status=queued&order=oldest&{query}")
        assert response.status_code == 200, response.json()
        return response.json()

    assert [m["id"] for m in get("tier=working")["results"]] == [working.pk]
    assert {m["id"] for m in get("author=import_mem0")["results"]} == {fresh.pk, ancient.pk}
    assert [m["id"] for m in get("age=week")["results"]] == [episode.pk]
    assert "facets" not in get("tier=working")
    page = get("author=copilot&facets=true&page_size=1")
    assert page["count"] == 3 and len(page["results"]) == 1
    facets = page["facets"]
    assert facets["author"] == {"copilot": 3, "import_mem0": 2}  # under the rest: no author filter
    assert facets["tier"] == {"episodic": 1, "semantic": 1, "working": 1}
    assert facets["age"] == {"day": 1, "week": 1, "month": 1, "older": 0}
    assert facets["import"] == {"mem0": 0} and facets["agent"] == {"copilot": 3}
    assert facets["reason"] == {
        "new": 3,
        "conflict": 0,
        "requeued": 0,
        "merge": 0,
        "gate": 0,
        "supersedes": 0,
    }
    assert set(facets) == FACETS
    # the API's facets and the console's agree
    console = world.client("reviewer")
    assert get("facets=true&store=private:alice")["facets"]["author"] == {"import_mem0": 1}
    assert console.get("/api/memory?status=queued&facets=true&age=older").json()["facets"]["store"] == {
        "private:bob": 1
    }


def test_facets_and_new_filters_refuse_bad_input_with_a_400(world):
    client = world.client("reviewer")
    assert client.get("/api/memory?facets=true").json()["fields"] == {
        "facets": ["Facets count the review queue: add status=queued."]
    }
    answer = client.get("/api/memory?status=queued&age=ancient")
    assert answer.status_code == 400
    assert answer.json()["fields"]["age"] == ['Unknown value "ancient"; one of: day, week, month, older.']
    assert list(client.get("/api/memory?status=queued&tier=eternal").json()["fields"]) == ["tier"]
    assert list(client.get("/api/memory?status=queued&facets=maybe").json()["fields"]) == ["facets"]


def test_an_agent_sees_facets_of_what_it_may_read_only(world):
    mine = factory.make_queued_memory(world.copilot, "copilot's own note")
    factory.make_queued_memory(world.scribe, "scribe's own note")  # in scribe's own store
    agent = world.client("copilot")
    page = agent.get("/api/memory?status=queued&facets=true").json()
    assert [m["id"] for m in page["results"]] == [mine.pk]
    assert page["facets"]["agent"] == {"copilot": 1}


def test_the_facets_the_filter_leaves_open_are_counted_in_one_statement(world, django_assert_num_queries):
    from memory.lifecycle import queue

    _tier_author_age_world(world)
    # open facets: one grouped statement; sources and imports one each
    with django_assert_num_queries(3):
        everything = queue.queue_facets(queue.QueueFilter())
    assert everything["author"] == {"copilot": 3, "import_mem0": 2}
    assert everything["age"] == {"day": 2, "week": 1, "month": 1, "older": 1}
    # each facet the filter sets is counted under the rest of the filter: one statement more each
    with django_assert_num_queries(5):
        narrowed = queue.queue_facets(queue.QueueFilter(author="copilot", age="day"))
    assert narrowed["age"] == {"day": 1, "week": 1, "month": 1, "older": 0}
    assert narrowed["author"] == {"copilot": 1, "import_mem0": 1}
    assert narrowed["tier"] == {"working": 1}


def test_approving_everything_a_filter_matches_costs_the_same_statements_per_memory(rita, world):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def approve_all(person: str, n: int) -> int:
        for i in range(n):
            mem0(
                world, f"{person.title()} reported a printer problem, ticket SUP-{person}-{i}", person=person
            )
        query = f"import=mem0&store=private:{person}"
        token = snapshot_of(rita, query)
        with CaptureQueriesContext(connection) as done:
            rita.post(f"/review/all?{query}", {"action": "approve", "snapshot": token})
        assert Memory.objects.filter(store=f"private:{person}", status=Memory.ACTIVE).count() == n
        return len([q for q in done.captured_queries if "SAVEPOINT" not in q["sql"]])

    approve_all("carol", 1)  # the session's first visit stores its console preferences
    three, six = approve_all("alice", 3), approve_all("bob", 6)
    # each memory: its lock, the relation finder (its statement and the stores its agent reads;
    # here no candidate to fetch), the row's update, its audit event and the activation's checks
    # — nothing that grows with the batch
    assert (six - three) / 3 <= 7, (three, six)
