"""Decisions say what they touch: a supersede names every memory it retires and the entry a
block belongs to; a lesson card names its skill and agent; the entry's "changed by" is the
person or agent who made the change."""

from knowledge.models import Entry, Memory
from knowledge.principal import Principal
from memory.skills import outcomes
from memory.skills import services as skills
from tests import factory

ADMIN = Principal(kind="person", name="adam", role="admin")


def test_superseding_another_agents_block_names_the_entry_and_credits_the_reviewer(client, world):
    entry = factory.make_entry(
        world.scribe, name="VPN client", store="shared", blocks=["Use 5.2.0", "Use 5.2.1"]
    )
    block = entry.created_blocks[1]
    memory = factory.make_queued_memory(world.copilot, "Use 5.2.2", store="shared", supersedes=block)
    client.force_login(world.reviewer)
    card = client.get("/review/").content.decode().split(f'id="memory-{memory.pk}"')[1].split("</article>")[0]
    assert f"#{block.pk} (block 2 of entry VPN client, agent scribe)" in card
    response = client.post(f"/review/{memory.pk}/approve", {}, follow=True)
    assert f"Retired #{block.pk} (block 2 of entry VPN client, agent scribe)." in response.content.decode()
    assert Memory.objects.get(pk=block.pk).status == "superseded"
    entry = Entry.objects.get(pk=entry.pk)
    assert (entry.author_kind, entry.author_name) == ("person", "rita")
    listing = client.get("/knowledge/entries/").content.decode()
    assert "person rita" in listing


def test_a_lesson_card_names_its_skill_and_agent(client, world):
    skill = skills.skill_create(actor=ADMIN, name="triage", title="Ticket triage")
    skills.skill_enable(actor=ADMIN, agent=world.copilot, skill=skill, enabled=True)
    outcome, _ = outcomes.outcome_record(
        actor=Principal.for_agent(world.copilot), agent=world.copilot, skill=skill, task="t", result="success"
    )
    lesson = skills.lesson_add(
        actor=Principal.for_agent(world.copilot),
        agent=world.copilot,
        skill=skill,
        text="Ask for the ticket id first.",
        sources=[{"kind": "task_outcome", "ref": str(outcome.pk)}],
    )
    assert lesson.status == "queued"
    client.force_login(world.reviewer)
    card = client.get("/review/").content.decode().split(f'id="memory-{lesson.pk}"')[1].split("</article>")[0]
    assert "lesson of skill triage for agent copilot" in card
