"""The example support agent, end to end: a live Brain, the loopback model stub."""

import json

import pytest
from brain_client import Brain

from examples.support_agent import SYSTEM, Model, handle
from knowledge.models import Conversation, Memory, Message, TaskOutcome
from knowledge.principal import Principal
from memory.skills import services as skill_services
from tests import factory

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_support_agent_runs_the_whole_cycle(live_server, world, model_stub):
    admin = Principal(kind="person", name="tests", role="admin")
    skill = skill_services.skill_create(
        actor=admin, name="vpn", title="VPN support", instructions="Check versions."
    )
    skill_services.skill_enable(actor=admin, agent=world.copilot, skill=skill, enabled=True)
    factory.make_memory(world.copilot, "VPN error E4012 is fixed by client 5.2.1", store="channel:support")

    def answer(request):
        if SYSTEM not in model_stub.prompt(request):  # Brain's own model work (the distiller)
            return {"status": 500, "message": "not scripted"}
        return json.dumps(
            {
                "answer": "Update your VPN client to 5.2.1.",
                "remember": "alice uses VPN client 5.1",
                "solved": True,
            }
        )

    model_stub.respond_with(answer)
    brain = Brain(live_server.url, world.tokens["copilot"])
    turn = handle(
        brain,
        Model(model_stub.url, "stub-model"),
        channel="support",
        customer="alice",
        question="I get VPN error E4012, what now? I'm on 5.1.",
        ticket="T-1",
        skill="vpn",
    )

    assert turn.answer == "Update your VPN client to 5.2.1."
    (prompt,) = [r for r in model_stub.chat_requests() if SYSTEM in model_stub.prompt(r)]
    system = prompt["messages"][0]["content"]
    assert "5.2.1" in system and "Check versions." in system  # recalled memory and the skill
    conversation = Conversation.objects.get(pk=turn.conversation)
    assert conversation.status == "finished" and conversation.agent == world.copilot
    assert list(
        Message.objects.filter(channel__name="support").order_by("id").values_list("text", flat=True)
    ) == [
        "I get VPN error E4012, what now? I'm on 5.1.",
        "Update your VPN client to 5.2.1.",
    ]
    memory = Memory.objects.get(pk=turn.memory)
    assert memory.text == "alice uses VPN client 5.1" and memory.store == "channel:support"
    assert [(s.kind, s.ref) for s in memory.sources.all()] == [("conversation", str(conversation.pk))]
    assert TaskOutcome.objects.get(pk=turn.outcome).result == "success"
