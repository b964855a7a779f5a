"""A small, believable workspace for a newcomer: two agents, a few people, channels and
conversations. Idempotent: running it again changes nothing. Later capabilities extend it."""

from django.core.management.base import BaseCommand
from django.db import transaction

from knowledge import services
from knowledge.models import Agent, Channel, Conversation
from knowledge.principals import Principal

AGENTS = [
    (
        "copilot",
        False,
        "You are the support copilot. Answer customers' IT questions precisely and cite tickets.",
    ),
    ("scribe", True, "You keep the team's notes: decisions, owners and dates. Be brief."),
]
PEOPLE = [("alice", "Alice Martin"), ("bob", "Bob Okafor"), ("carol", "Carol Nguyen")]
CHANNELS = [
    ("general", Channel.KIND_SHARED, None, Channel.SCOPE_SHARED),
    ("vpn-support", Channel.KIND_SHARED, None, Channel.SCOPE_CHANNEL),
    ("dm-alice", Channel.KIND_DM, "alice", Channel.SCOPE_SHARED),
]


class Command(BaseCommand):
    help = "Create (or complete) the demo workspace. Safe to run any number of times."

    def handle(self, *args, **options):
        actor = Principal.system("seed_demo")
        with transaction.atomic():
            agents = {}
            for name, trusted, instructions in AGENTS:
                agent = Agent.objects.filter(name=name).first()
                if agent is None:
                    agent = services.agent_create(
                        actor=actor, name=name, trusted=trusted, instructions=instructions
                    )
                    self.stdout.write(f"agent {name}")
                agents[name] = agent
            people = {
                name: services.person_get_or_create(actor=actor, name=name, display_name=display)
                for name, display in PEOPLE
            }
            channels = {}
            for name, kind, person, scope in CHANNELS:
                channel = Channel.objects.filter(name=name).first()
                if channel is None:
                    channel = services.channel_create(
                        actor=actor, name=name, kind=kind, person=people.get(person), memory_scope=scope
                    )
                    self.stdout.write(f"channel {name}")
                channels[name] = channel
            for agent_name, channel_name in [
                ("copilot", "general"),
                ("copilot", "vpn-support"),
                ("copilot", "dm-alice"),
                ("scribe", "general"),
            ]:
                agent, channel = agents[agent_name], channels[channel_name]
                if not Conversation.objects.filter(agent=agent, channel=channel).exists():
                    services.conversation_start(actor=actor, agent=agent, channel=channel)
                    self.stdout.write(f"conversation {agent_name} in {channel_name}")
            self.extend(actor=actor, agents=agents, people=people, channels=channels)
        self.stdout.write("Demo workspace ready.")

    def extend(self, *, actor, agents, people, channels):
        """Later capabilities add their demo data here."""
        from curation.demo_conversations import seed_conversations

        stored = seed_conversations(actor=actor, agents=agents, channels=channels)
        if stored:
            self.stdout.write(f"{stored} demo messages (the worker embeds them)")
