"""Demo data for provenance: tickets, KB articles and records behind some memories, and one
memory that went stale because its ticket was resolved differently."""

from django.db import transaction

from knowledge.memories.activation import memory_row_create
from knowledge.models import Memory, SourceState
from memory.provenance.services import provenance_check, source_push

TICKETS = {
    "INC-12": {
        "title": "VPN drops every 10 minutes",
        "description": "Client 5.1.0 on macOS loses the tunnel.",
        "status": "resolved",
        "resolution": "Upgrade the VPN client to 5.2.1",
        "category": "network",
        "assignee": "bob",
    },
    "INC-31": {
        "title": "Printer on floor 3 offline",
        "description": "Jams after every job.",
        "status": "open",
        "resolution": "",
        "category": "hardware",
        "assignee": "carol",
    },
}
KB = {"KB-7": {"text": "VPN-4012 is fixed by client 5.2.1.", "resolution": "upgrade"}}
RECORDS = {"crm/account/42": {"name": "Acme Corp", "plan": "gold", "seats": 40, "region": "EU"}}
MEMORIES = [
    ("VPN-4012 is fixed by client 5.2.1", [("kb", "KB-7"), ("ticket", "INC-12")]),
    ("The floor-3 printer jams after every job; a technician is booked", [("ticket", "INC-31")]),
    ("Acme Corp is on the gold plan with 40 seats", [("record", "crm/account/42")]),
]


def seed(*, actor, agents) -> None:
    if SourceState.objects.filter(kind="ticket", ref="INC-12").exists():
        return
    for ref, fields in TICKETS.items():
        source_push(actor=actor, kind="ticket", ref=ref, fields=fields)
    for ref, fields in KB.items():
        source_push(actor=actor, kind="kb", ref=ref, fields=fields)
    for ref, fields in RECORDS.items():
        source_push(actor=actor, kind="record", ref=ref, fields=fields)
    with transaction.atomic():
        for text, sources in MEMORIES:
            memory_row_create(
                owner=agents["copilot"],
                store="shared",
                text=text,
                author_kind="agent",
                author_name="copilot",
                status=Memory.ACTIVE,
                category="workspace note",
                sources=[{"kind": k, "ref": r} for k, r in sources],
            )
    # The printer ticket is closed with a different outcome: that memory goes stale.
    source_push(
        actor=actor,
        kind="ticket",
        ref="INC-31",
        fields={**TICKETS["INC-31"], "status": "closed", "resolution": "Printer replaced"},
    )
    provenance_check(actor=actor)
