"""A small, believable workspace for a newcomer: two agents, a few people, channels and
conversations. Idempotent: running it again changes nothing. Later capabilities extend it."""

from django.core.management.base import BaseCommand
from django.db import transaction

from knowledge.conversations import services as conversations
from knowledge.models import Agent, Channel, Conversation
from knowledge.principal import Principal
from knowledge.principals import services

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
    ("dm-alice", Channel.KIND_DM, "alice", Channel.SCOPE_SHARED),  # copilot's direct message
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
                    channel = conversations.channel_create(
                        actor=actor,
                        name=name,
                        kind=kind,
                        person=people.get(person),
                        agent=agents["copilot"] if kind == Channel.KIND_DM else None,
                        memory_scope=scope,
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
                    conversations.conversation_start(actor=actor, agent=agent, channel=channel)
                    self.stdout.write(f"conversation {agent_name} in {channel_name}")
            self.extend(actor=actor, agents=agents, people=people, channels=channels)
        self.stdout.write("Demo workspace ready.")

    def extend(self, *, actor, agents, people, channels):
        """Later capabilities add their demo data here (one module each under curation/demo, or a
        method below)."""
        from curation.demo import provenance
        from curation.demo.memories import seed_memories

        if written := seed_memories(actor=actor, agents=agents):
            self.stdout.write(f"{written} demo memories (review queue, every lifecycle state)")
        provenance.seed(actor=actor, agents=agents)
        from curation.demo import gate

        if gate.seed(actor=actor):
            self.stdout.write("gate dataset memory-gate-copilot (3 cases)")
        from curation.demo.entries import seed_entries

        if created := seed_entries(agents=agents):
            self.stdout.write(f"{created} knowledge entries")
        from curation.demo import skills

        if skills.seed(agents=agents):
            self.stdout.write("skill meeting-notes, enabled for both agents, with the scribe's experience")
        from curation.demo.conversations import seed_conversations

        if stored := seed_conversations(actor=actor, agents=agents, channels=channels):
            self.stdout.write(f"{stored} demo messages (the worker embeds them)")
        self.extend_consolidation(actor=actor, agents=agents, people=people, channels=channels)
        from curation.demo import dreaming

        if note := dreaming.seed(channels=channels):
            self.stdout.write(note)

    def extend_consolidation(self, *, actor, agents, people, channels):
        """Issue 7: duplicate, near-duplicate and conflicting memories, and one proposed plan.
        Without a model configured the plan folds only the duplicates (and settles the conflict)."""
        from knowledge.memories.activation import memory_row_create
        from knowledge.models import Memory
        from memory.consolidation import consolidation_run
        from memory.models import ConsolidationPlan

        if Memory.objects.filter(run_id="demo-consolidation").exists():
            return
        copilot = agents["copilot"]
        dm = Conversation.objects.filter(agent=copilot, channel=channels["dm-alice"]).first()
        rows = [
            # the same fact told four times, with different case and spacing
            (
                "shared",
                "workspace_note",
                "The VPN client must be version 5.2.1 or later",
                [("ticket", "INC-101")],
            ),
            (
                "shared",
                "workspace_note",
                "the VPN client must be version 5.2.1 or later",
                [("ticket", "INC-117")],
            ),
            ("shared", "workspace_note", "The VPN  client must be version 5.2.1 or later ", [("kb", "KB-7")]),
            (
                "shared",
                "workspace_note",
                "THE VPN CLIENT MUST BE VERSION 5.2.1 OR LATER",
                [("ticket", "INC-130")],
            ),
            (
                "private:alice",
                "preference",
                "Alice prefers e-mail over phone calls",
                [("conversation", str(dm.pk))],
            ),
            (
                "private:alice",
                "preference",
                "alice prefers e-mail over phone calls",
                [("conversation", str(dm.pk))],
            ),
            # near-duplicates: the light model would merge them into one statement
            (
                "shared",
                "procedure",
                "The printer on floor 3 needs a PaperCut badge tap to release jobs",
                [("kb", "KB-12")],
            ),
            (
                "shared",
                "procedure",
                "Printer on floor 3 releases print jobs only after a PaperCut badge tap at the device",
                [("ticket", "INC-142")],
            ),
        ]
        with transaction.atomic():
            for store, category, text, sources in rows:
                memory_row_create(
                    owner=copilot,
                    store=store,
                    text=text,
                    author_kind="agent",
                    author_name=copilot.name,
                    status=Memory.ACTIVE,
                    sources=[{"kind": k, "ref": r} for k, r in sources],
                    tier=Memory.PROCEDURAL if category == "procedure" else Memory.SEMANTIC,
                    category=category,
                    run_id="demo-consolidation",
                )
            # same key, different values: recency × confidence × source weight picks one
            for value, sources, confidence in (
                ("9-17 CET", [("record", "crm/acme")], 0.7),
                ("8-18 CET", [], 0.9),
            ):
                memory_row_create(
                    owner=copilot,
                    store="shared",
                    text=f"Acme's support hours are {value}",
                    author_kind="agent",
                    author_name=copilot.name,
                    status=Memory.ACTIVE,
                    sources=[{"kind": k, "ref": r} for k, r in sources],
                    category="workspace_note",
                    key="acme.support_hours",
                    value=value,
                    confidence=confidence,
                    run_id="demo-consolidation",
                )
        self.stdout.write("memories for consolidation (duplicates, near-duplicates, a conflict)")
        if not ConsolidationPlan.objects.exists():
            plan = consolidation_run(actor=actor, mode="propose")
            self.stdout.write(f"consolidation plan {plan.pk} ({plan.state})")
