"""Demo memories for `seed_demo`: a realistic review queue and memories in every state, all
written through the real services (so the audit trail is real too). Idempotent."""

import datetime

from django.utils import timezone

from knowledge.models import Memory
from knowledge.principal import Principal
from memory.lifecycle import common, expiry, operate, review
from memory.lifecycle.write import WriteRequest, memory_write

MARKER = "demo:"


def seed_memories(*, actor: Principal, agents: dict, write=None) -> int:
    """Write the demo memories unless they exist. Returns how many memories were written."""
    if Memory.objects.filter(event_id__startswith=MARKER).exists():
        return 0
    copilot, scribe = agents["copilot"], agents["scribe"]
    copilot_actor, scribe_actor = Principal.for_agent(copilot), Principal.for_agent(scribe)
    rita = Principal(kind="person", name="demo-reviewer", role="reviewer")
    now = timezone.now()
    n = [0]

    def mem(who, owner, text, now=None, **fields):
        n[0] += 1
        request = WriteRequest(owner=owner, text=text, event_id=f"{MARKER}{n[0]}", **fields)
        return memory_write(actor=who, request=request, now=now)

    # Active long-term memories, some with sources, one pinned.
    vpn_old = mem(
        scribe_actor,
        scribe,
        "VPN-4012 (client cannot connect after sleep) is fixed by client 5.2.0.",
        store="shared",
        category="workspace note",
        sources=[{"kind": "kb", "ref": "KB-7"}],
    )
    mem(
        scribe_actor,
        scribe,
        "When a VPN client fails after sleep: check the client version, then reinstall 5.2.x.",
        store="shared",
        tier="procedural",
        category="procedure",
        sources=[{"kind": "memory", "ref": str(vpn_old.pk)}],
    )
    operate.memory_pin(
        actor=rita,
        memory_id=mem(
            scribe_actor,
            scribe,
            "Production deploys are frozen every Friday after 14:00.",
            store="shared",
            category="policy",
            confidence=1.0,
        ).pk,
    )
    mem(
        scribe_actor,
        scribe,
        "Acme prefers to be contacted on Slack, Pacific time.",
        store="self",
        key="customer.acme.preferences",
        value={"preferredChannel": "slack", "timezone": "PT"},
        confidence=0.95,
        category="preference",
    )
    bbq = mem(
        scribe_actor,
        scribe,
        "Alice likes barbecue for team lunches.",
        store="shared",
        category="fact about a person",
        valid_from=now - datetime.timedelta(days=700),
        sources=[{"kind": "record", "ref": "chat/conversation/demo-2024"}],
    )
    mem(
        scribe_actor,
        scribe,
        "Book the Smokehouse for Alice's birthday lunch.",
        store="shared",
        category="lesson",
        sources=[{"kind": "memory", "ref": str(bbq.pk)}],
    )
    # Supersession: time, not overwrite — the old fact is closed, the lesson citing it goes stale.
    mem(
        scribe_actor,
        scribe,
        "Alice is vegetarian (since last month); pick vegetarian-friendly places.",
        store="shared",
        category="fact about a person",
        supersedes=bbq,
        sources=[{"kind": "record", "ref": "chat/conversation/demo-2026"}],
    )

    # The review queue: a new fact, a proposed successor with a diff, a contradiction, a
    # requeued memory, a merge and a gate hold.
    mem(
        copilot_actor,
        copilot,
        "Bob Okafor is the owner of the billing service.",
        store="shared",
        category="fact about a person",
        sources=[{"kind": "ticket", "ref": "INC-311"}],
    )
    mem(
        copilot_actor,
        copilot,
        "VPN-4012 (client cannot connect after sleep) is fixed by client 5.2.1.",
        store="shared",
        category="workspace note",
        supersedes=vpn_old,
        sources=[{"kind": "kb", "ref": "KB-7"}, {"kind": "ticket", "ref": "INC-12"}],
        run_id="run-88",
        turn=4,
    )
    mem(
        rita,
        copilot,
        "Acme prefers Slack for support updates.",
        store="shared",
        key="customer.acme.contact",
        value={"preferredChannel": "slack"},
        confidence=0.8,
        category="preference",
    )
    memory_write(
        actor=Principal.system("distiller"),
        request=WriteRequest(
            owner=copilot,
            store="shared",
            text="Acme wants support updates by e-mail only from now on.",
            key="customer.acme.contact",
            value={"preferredChannel": "email"},
            sources=[{"kind": "record", "ref": "chat/conversation/demo-311"}],
            event_id=f"{MARKER}distilled",
        ),
        route="distiller",
    )
    requeued = mem(
        scribe_actor,
        scribe,
        "INC-12 was caused by the expired certificate on vpn-gw-2.",
        store="shared",
        sources=[{"kind": "ticket", "ref": "INC-12"}],
    )
    review.memory_requeue(
        actor=Principal.system("provenance check"),
        memory_id=requeued.pk,
        reason="re-check: its source ticket:INC-12 changed",
    )
    merged = mem(
        scribe_actor,
        scribe,
        "Carol Nguyen runs the Monday release review and wants notes in the team doc.",
        store="shared",
        category="fact about a person",
    )
    review.memory_requeue(
        actor=Principal.system("consolidation"),
        memory_id=merged.pk,
        queue_reason=common.QUEUE_MERGE,
        reason="merged from 3 near-duplicate memories",
    )
    gated = mem(
        scribe_actor,
        scribe,
        "Tell customers that client 5.1.0 fixes the VPN sleep issue.",
        store="shared",
        tier="procedural",
        category="procedure",
    )
    review.memory_requeue(
        actor=Principal.system("eval gate"),
        memory_id=gated.pk,
        queue_reason=common.QUEUE_GATE,
        reason="eval gate: case vpn-sleep-fix regressed",
    )

    # Decided ones: rejected, revoked, expired, cleared.
    wrong = mem(copilot_actor, copilot, "The office Wi-Fi password is on the fridge.", store="self")
    review.memory_reject(actor=rita, memory_id=wrong.pk, reason="not something to remember")
    revoked = mem(scribe_actor, scribe, "Support hours end at 16:00.", store="shared", confidence=0.6)
    operate.memory_revoke(actor=rita, memory_id=revoked.pk, reason="support hours end at 18:00 now")
    mem(
        scribe_actor,
        scribe,
        "Alice asked about the VPN outage this morning.",
        store="shared",
        tier="episodic",
        now=now - datetime.timedelta(hours=80),
    )
    expiry.memory_expire_due(now=now)
    mem(
        copilot_actor,
        copilot,
        "Scratch: ticket INC-12 needs a follow-up.",
        store="self",
        tier="working",
        run_id="run-87",
    )
    expiry.memory_clear_working(actor=copilot_actor, run_id="run-87", owner=copilot)
    # Short-term memory still alive.
    mem(
        copilot_actor,
        copilot,
        "Currently helping alice with INC-12.",
        store="self",
        tier="working",
        run_id="run-88",
    )
    return n[0] + 1
