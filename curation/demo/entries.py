"""Demo knowledge for `seed_demo`: a few dozen entries of several types with blocks, sources and
relations, curation guides, one entry whose blocks were corrected with reasons and one deleted
entry. Idempotent: entries that exist (deleted or not) are left alone."""

from knowledge.entries import services as entries
from knowledge.entries.guides import guide_update
from knowledge.models import CurationGuide, Entry
from knowledge.principal import Principal


def _src(*refs):
    return [{"kind": kind, "ref": ref} for kind, ref in (r.split(":", 1) for r in refs)]


# (owner, store, name, type, aliases, summary, properties, blocks [(text, sources)]). The chat
# messages behind them are cited as the chat system's records (record:slack/message/…): the demo
# holds no such messages, and an agent may cite only internal sources it can read.
ENTRIES = [
    (
        "copilot",
        "shared",
        "Alice Martin",
        "person",
        ["Alice", "A. Martin"],
        "Head of IT operations.",
        {"team": "IT", "location": "Lyon"},
        [
            ("Leads the IT operations team since 2024-03.", "record:slack/message/general-1042"),
            ("Approves VPN exceptions for contractors.", "ticket:INC-2211"),
        ],
    ),
    (
        "copilot",
        "shared",
        "Bob Okafor",
        "person",
        ["Bob"],
        "Finance controller.",
        {"team": "Finance"},
        [
            ("Owns the monthly payroll run.", "record:slack/message/general-1107"),
            (
                "Prefers tickets over direct messages for access requests.",
                "record:slack/message/general-1188 record:slack/message/general-1203",
            ),
        ],
    ),
    (
        "copilot",
        "shared",
        "Carol Nguyen",
        "person",
        ["Carol"],
        "Project manager for the laptop refresh.",
        {},
        [("Runs the 2026 laptop refresh.", "record:slack/message/general-1290")],
    ),
    (
        "copilot",
        "shared",
        "IT operations team",
        "organization",
        ["IT", "IT ops"],
        "Runs the workplace IT.",
        {"on_call": "weekdays 8-18"},
        [
            ("Handles P1 incidents within 30 minutes.", "kb:KB-12"),
            ("Weekend incidents go to the on-call phone.", "kb:KB-12"),
        ],
    ),
    (
        "copilot",
        "shared",
        "Finance department",
        "organization",
        ["Finance"],
        "Payroll, expenses, budgets.",
        {},
        [("Closes the books on the 3rd working day.", "kb:KB-40")],
    ),
    (
        "copilot",
        "shared",
        "Acme Networks",
        "organization",
        ["Acme"],
        "VPN and firewall vendor.",
        {"contract_until": "2027-06-30"},
        [("Support line answers within 4 hours.", "record:vendor-acme")],
    ),
    (
        "copilot",
        "shared",
        "VPN client",
        "system",
        ["GlobalProtect", "GP", "vpn"],
        "The company VPN client on every laptop.",
        {"vendor": "Acme Networks"},
        [
            ("Client 5.2.1 fixes the VPN-4012 disconnect loop.", "kb:KB-101 ticket:VPN-4012"),
            ("Needs local admin rights to install.", "kb:KB-101"),
            ("Tokens expire every 90 days.", "kb:KB-102"),
        ],
    ),
    (
        "copilot",
        "shared",
        "Kubernetes cluster",
        "system",
        ["k8s", "kube"],
        "Where the internal services run.",
        {"nodes": 3, "region": "eu-central"},
        [
            ("Three worker nodes in Frankfurt.", "record:infra-k8s"),
            ("Upgrades happen on the first Tuesday of the month.", "kb:KB-230"),
        ],
    ),
    (
        "copilot",
        "shared",
        "Payroll system",
        "system",
        ["Paylane"],
        "Salaries are paid on the 25th.",
        {},
        [("Payslips appear in the portal on the 23rd.", "kb:KB-41")],
    ),
    (
        "copilot",
        "shared",
        "Okta SSO",
        "system",
        ["SSO", "single sign-on"],
        "Single sign-on for all web apps.",
        {},
        [
            ("MFA is mandatory since 2025-01.", "kb:KB-7"),
            ("Locked accounts unlock after 15 minutes.", "kb:KB-8"),
        ],
    ),
    (
        "copilot",
        "shared",
        "Jira service desk",
        "system",
        ["Jira", "service desk"],
        "Where tickets live.",
        {},
        [("P1 tickets page the on-call engineer.", "kb:KB-12")],
    ),
    (
        "copilot",
        "shared",
        "Printer on the third floor",
        "system",
        ["3F printer", "HP M479"],
        "",
        {},
        [("Toner is in the cupboard next to it.", "record:slack/message/general-980")],
    ),
    (
        "copilot",
        "shared",
        "Guest Wi-Fi",
        "system",
        ["guest wifi"],
        "Visitors' network.",
        {},
        [("The password rotates every Monday.", "kb:KB-55")],
    ),
    (
        "copilot",
        "shared",
        "Laptop refresh 2026",
        "project",
        ["laptop refresh"],
        "Replace laptops older than 4 years.",
        {"budget_eur": 180000},
        [("Pilot group gets new laptops in March.", "record:slack/message/general-1301")],
    ),
    (
        "copilot",
        "shared",
        "VPN migration",
        "project",
        ["GlobalProtect 6 rollout"],
        "Move everyone to client 6.",
        {},
        [("Blocked until Acme ships 6.0.3.", "ticket:VPN-4102")],
    ),
    (
        "copilot",
        "shared",
        "SSO rollout",
        "project",
        [],
        "Put the remaining apps behind Okta.",
        {},
        [("Payroll system is the last app left.", "record:slack/message/general-1330")],
    ),
    (
        "copilot",
        "shared",
        "Password policy",
        "policy",
        ["passwords"],
        "Minimum length 14, no rotation.",
        {},
        [("Passwords are never sent by chat or email.", "kb:KB-3")],
    ),
    (
        "copilot",
        "shared",
        "Remote work policy",
        "policy",
        ["WFH policy"],
        "Up to three days a week.",
        {},
        [("VPN is required for internal tools from home.", "kb:KB-4")],
    ),
    (
        "copilot",
        "shared",
        "Travel expenses policy",
        "policy",
        ["expenses"],
        "Claims within 30 days.",
        {},
        [("Receipts above 25 EUR are required.", "kb:KB-42")],
    ),
    (
        "copilot",
        "shared",
        "Resetting a VPN token",
        "procedure",
        ["vpn token reset"],
        "",
        {},
        [
            (
                "1. Check the user is locked out in Okta. 2. Reset the token in the GP portal. 3. Ask for a reconnect.",
                "kb:KB-102 ticket:INC-2290",
            )
        ],
    ),
    (
        "copilot",
        "shared",
        "Escalating a P1 incident",
        "procedure",
        ["P1 escalation"],
        "",
        {},
        [("Page on-call, open a bridge, post updates every 30 minutes.", "kb:KB-12")],
    ),
    (
        "copilot",
        "self",
        "Lessons from VPN tickets",
        "lesson",
        [],
        "Working lessons for VPN support.",
        {},
        [
            (
                "Ask for the client version first: most loops are fixed by upgrading.",
                "ticket:VPN-4012 ticket:INC-2290",
            )
        ],
    ),
    (
        "copilot",
        "private:alice",
        "Alice's preferences",
        "person",
        [],
        "What Alice told the copilot directly.",
        {},
        [
            (
                "Prefers short answers with the ticket number first.",
                "record:slack/message/dm-alice-17 record:slack/message/dm-alice-31",
            )
        ],
    ),
    (
        "scribe",
        "shared",
        "Weekly IT sync",
        "project",
        ["IT sync"],
        "Mondays 10:00.",
        {},
        [("Decisions are written to the wiki the same day.", "record:slack/message/general-1400")],
    ),
    (
        "scribe",
        "shared",
        "Q3 budget decision",
        "decision",
        [],
        "IT budget frozen until October.",
        {},
        [("Decided by Bob and Alice on 2026-07-02.", "record:slack/message/general-1411")],
    ),
    (
        "scribe",
        "shared",
        "Office move",
        "project",
        ["new office"],
        "Moving to the Part-Dieu building.",
        {},
        [("Move date is 2026-12-15.", "record:slack/message/general-1420")],
    ),
    (
        "scribe",
        "self",
        "Scribe's meeting template",
        "procedure",
        [],
        "",
        {},
        [("Decision, owner, date — one line each.", "record:slack/message/general-1400")],
    ),
    (
        "scribe",
        "shared",
        "Old fax machine",
        "system",
        ["fax"],
        "The fax in the basement.",
        {},
        [("Used only by Finance for bank forms.", "record:slack/message/general-700")],
    ),
]

# (owner, source name, predicate, target name, sources, valid_from)
RELATIONS = [
    (
        "copilot",
        "Alice Martin",
        "member of",
        "IT operations team",
        "record:slack/message/general-1042",
        "2024-03-01",
    ),
    ("copilot", "Bob Okafor", "member of", "Finance department", "record:slack/message/general-1107", None),
    ("copilot", "Carol Nguyen", "leads", "Laptop refresh 2026", "record:slack/message/general-1290", None),
    ("copilot", "VPN client", "made by", "Acme Networks", "kb:KB-101", None),
    ("copilot", "VPN client", "signs in through", "Okta SSO", "kb:KB-7", None),
    ("copilot", "Payroll system", "owned by", "Finance department", "kb:KB-41", None),
    ("copilot", "VPN migration", "affected by", "Remote work policy", "kb:KB-4", None),
    ("copilot", "VPN migration", "depends on", "Acme Networks", "ticket:VPN-4102", None),
    ("copilot", "SSO rollout", "includes", "Payroll system", "record:slack/message/general-1330", None),
    ("copilot", "Jira service desk", "run by", "IT operations team", "kb:KB-12", None),
    ("copilot", "Resetting a VPN token", "applies to", "VPN client", "kb:KB-102", None),
    ("scribe", "Office move", "affects", "Guest Wi-Fi", "record:slack/message/general-1420", None),
]

CORRECTIONS = [
    (
        "VPN client",
        0,
        "Client 5.2.2 fixes the VPN-4012 disconnect loop; 5.2.1 was withdrawn.",
        "Acme withdrew 5.2.1 (KB-112); 5.2.2 is the fixed build.",
    ),
    ("VPN client", 2, "Tokens expire every 60 days.", "Policy changed in September (KB-102 v3)."),
]
DELETED = [("Old fax machine", "Decommissioned in 2026-10; nothing uses it any more.")]


def seed_entries(*, agents) -> int:
    """Create the demo entries that do not exist yet; returns how many were created."""
    system = Principal.system("seed_demo")
    person = Principal(kind="person", name="admin", role="admin")
    created = {}
    for owner, store, name, type_, aliases, summary, properties, blocks in ENTRIES:
        agent = agents[owner]
        if Entry.all_objects.filter(owner=agent, name=name).exists():
            continue
        actor = Principal.for_agent(agent) if owner == "scribe" else system
        created[name] = entries.entry_create(
            actor=actor,
            owner=agent,
            store=store,
            name=name,
            type=type_,
            aliases=aliases,
            summary=summary,
            properties=properties,
            blocks=[{"text": text, "sources": _src(*refs.split())} for text, refs in blocks],
        )
    by_name = {
        (e.owner.name, e.name): e
        for e in Entry.objects.filter(owner__in=agents.values()).select_related("owner")
    }
    for owner, source, predicate, target, refs, valid_from in RELATIONS:
        if source not in created or (owner, target) not in by_name:
            continue
        entries.relation_add(
            actor=system,
            entry_id=by_name[(owner, source)].pk,
            predicate=predicate,
            target_id=by_name[(owner, target)].pk,
            sources=_src(*refs.split()),
            valid_from=valid_from,
        )
    for name, index, text, reason in CORRECTIONS:
        if name in created:
            block = created[name].created_blocks[index]
            entries.block_correct(
                actor=person, entry_id=created[name].pk, block_id=block.pk, text=text, reason=reason
            )
    for name, reason in DELETED:
        if name in created:
            entries.entry_delete(actor=person, entry_id=created[name].pk, reason=reason)
    if created and not CurationGuide.objects.filter(owner=agents["copilot"]).exists():
        guide_update(
            actor=person,
            owner=agents["copilot"],
            domain_types=["person", "organization", "project", "policy", "system", "procedure", "lesson"],
            taxonomy="People belong to teams; systems are owned by teams; policies affect projects and systems.",
            page_thresholds={"min_mentions_for_entry": 2, "min_evidence_for_induction": 2, "max_blocks": 40},
            update_rules=CurationGuide.DEFAULT_UPDATE_RULES,
        )
    return len(created)
