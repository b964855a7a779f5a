"""Entries at scale: 50,000 entries with 250,000 body blocks. Measures the server time of entry
search and entry list requests (API and console, as admin and as an agent) and a 100-record
batch restore."""

import datetime
import itertools
import random
import statistics
import time

from knowledge.memories.guard import writes_memory_rows as memory_rows_guarded

N_ENTRIES = 50_000
BLOCKS_PER_ENTRY = 5
SEARCHES = 200
LISTS = 200
RESTORE_RECORDS = 100
BATCH = 5_000

TYPES = ["person", "organization", "project", "policy", "system", "procedure", "lesson", "decision"]
REAL_WORDS = [
    "vpn",
    "client",
    "token",
    "laptop",
    "printer",
    "payroll",
    "password",
    "policy",
    "network",
    "server",
    "cluster",
    "backup",
    "email",
    "calendar",
    "invoice",
    "budget",
    "contract",
    "vendor",
    "office",
    "badge",
    "access",
    "account",
    "license",
    "ticket",
    "incident",
    "outage",
    "release",
    "deploy",
    "database",
    "firewall",
    "router",
    "wifi",
    "guest",
    "meeting",
    "report",
    "expense",
    "travel",
    "onboarding",
    "offboarding",
    "training",
    "security",
    "audit",
    "compliance",
    "storage",
    "monitor",
    "alert",
    "dashboard",
]


def _vocabulary(rng, n):
    syllables = [a + b for a in "bcdfghjklmnprstvz" for b in "aeiou"] + ["an", "er", "in", "on", "ex", "al"]
    words = set(REAL_WORDS)
    while len(words) < n:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def _zipf_picker(rng, words):
    cumulative = list(itertools.accumulate(1 / (i + 1) ** 0.9 for i in range(len(words))))
    shuffled = words[:]
    rng.shuffle(shuffled)

    def pick(k):
        return rng.choices(shuffled, cum_weights=cumulative, k=k)

    return pick


def _copy(cursor, table, columns, rows):
    """COPY rows into a table: the fast bulk path. Triggers run as for any insert (the memory
    triggers once per COPY, refreshing every entry whose body it touched)."""
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


@memory_rows_guarded  # seeding through the one writer's door (knowledge.memories.guard)
def seed(rng):
    """Bulk-load the entries, blocks, versions and sources with COPY; returns (agents, seconds,
    name vocabulary, body vocabulary)."""
    import json

    from django.db import connection, transaction
    from django.utils import timezone

    from knowledge.models import Agent, Memory

    agents = [Agent.objects.create(name=f"bench-agent-{i}", trusted=i == 0) for i in range(4)]
    names_vocab = _vocabulary(rng, 6_000)
    body_vocab = _vocabulary(rng, 12_000)
    name_words = _zipf_picker(rng, names_vocab)
    body_words = _zipf_picker(rng, body_vocab)
    now = timezone.now()
    authors = ["adam", "rita", "dreaming", "bench-agent-0", "bench-agent-1"]
    start = time.perf_counter()
    with transaction.atomic(), connection.cursor() as django_cursor:
        cursor = django_cursor.cursor  # psycopg's own cursor, for COPY
        cursor.execute("SELECT nextval('knowledge_entry_id_seq')")
        first_entry = cursor.fetchone()[0]
        entries = []
        for i in range(N_ENTRIES):
            name = " ".join(w.capitalize() for w in name_words(rng.randint(1, 3))) + f" {i}"
            aliases = [" ".join(name_words(rng.randint(1, 2))) for _ in range(rng.randint(0, 2))]
            owner = agents[i % len(agents)]
            entries.append(
                (
                    first_entry + i,
                    name,
                    rng.choice(TYPES),
                    aliases,
                    " ".join(body_words(rng.randint(6, 14))).capitalize() + ".",
                    json.dumps({}),
                    "shared" if i % 5 else "self",
                    owner.pk,
                    1,
                    "person",
                    rng.choice(authors),
                    now - datetime.timedelta(days=400),
                    now - datetime.timedelta(days=i % 365),  # change times spread over a year
                )
            )
        cursor.execute("SELECT setval('knowledge_entry_id_seq', %s)", [first_entry + N_ENTRIES])
        cursor.execute("SELECT nextval('knowledge_memory_id_seq')")
        first_block = cursor.fetchone()[0]
        blocks, versions, sources = [], [], []
        block_id = first_block
        for entry_id, *_, store, owner_id, _v, _k, _a, _c, _u in entries:
            for position in range(BLOCKS_PER_ENTRY):
                text = " ".join(body_words(rng.randint(10, 30))).capitalize() + "."
                author, content_hash = rng.choice(authors), Memory.hash_content(text)
                blocks.append(
                    (
                        block_id,
                        owner_id,
                        store,
                        entry_id,
                        position,
                        text,
                        "",
                        "semantic",
                        "",
                        1.0,
                        "active",
                        "",
                        "",
                    )
                    + (
                        False,
                        "",
                        False,
                        content_hash,
                        1,
                        json.dumps([]),
                        "person",
                        author,
                        "",
                        "",
                        "",
                        now,
                        now,
                    )
                )
                versions.append((block_id, 1, text, "", content_hash, "person", author, "", now))
                if block_id % 2:
                    sources.append((block_id, "kb", f"KB-{block_id % 977}", "", now))
                block_id += 1
        _copy(
            cursor,
            "knowledge_memory",
            [
                "id",
                "owner_id",
                "store",
                "entry_id",
                "position",
                "text",
                "key",
                "tier",
                "category",
                "confidence",
                "status",
                "queue_reason",
                "status_reason",
                "stale",
                "stale_reason",
                "pinned",
                "content_hash",
                "version",
                "replaces",
                "author_kind",
                "author_name",
                "run_id",
                "event_id",
                "embedding_model",
                "created_at",
                "updated_at",
            ],
            blocks,
        )
        cursor.execute("SELECT setval('knowledge_memory_id_seq', %s)", [block_id])
        cursor.execute("ANALYZE knowledge_memory")  # so the entry triggers look blocks up by index
        # Entries after their blocks: their triggers then read each body once (no row rewritten).
        _copy(
            cursor,
            "knowledge_entry",
            [
                "id",
                "name",
                "type",
                "aliases",
                "summary",
                "properties",
                "store",
                "owner_id",
                "version",
                "author_kind",
                "author_name",
                "created_at",
                "updated_at",
            ],
            entries,
        )
        _copy(
            cursor,
            "knowledge_memoryversion",
            [
                "memory_id",
                "version",
                "text",
                "key",
                "content_hash",
                "author_kind",
                "author_name",
                "reason",
                "created_at",
            ],
            versions,
        )
        _copy(
            cursor,
            "knowledge_memorysource",
            ["memory_id", "kind", "ref", "fingerprint", "created_at"],
            sources,
        )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # what autovacuum does after a bulk load
    return agents, time.perf_counter() - start, names_vocab, body_vocab


def _timed(client, url, params, **headers):
    start = time.perf_counter()
    response = client.get(url, params, **headers)
    elapsed = (time.perf_counter() - start) * 1000
    assert response.status_code == 200, (url, params, response.status_code, response.content[:300])
    return elapsed


def _p95(values):
    return statistics.quantiles(values, n=100)[94]


def _misspell(rng, word):
    if len(word) < 5:
        return word
    i = rng.randrange(1, len(word) - 1)
    return word[:i] + rng.choice("aeiou") + word[i + 1 :]


def run(report):
    from django.test import Client
    from rest_framework.test import APIClient

    from knowledge.entries import services as entries
    from knowledge.models import AuditEvent, Entry, Memory
    from knowledge.principal import Principal
    from knowledge.principals import services
    from knowledge.restore.services import audit_restore

    rng = random.Random(5)
    agents, seconds, names_vocab, body_vocab = seed(rng)
    report(
        "entries seed (50k entries, 250k blocks)",
        seconds,
        "s",
        target="—",
        note="COPY, with the search triggers on, then VACUUM ANALYZE",
    )

    system = Principal.system("bench")
    admin_user = services.consoleuser_create(
        actor=system, username="bench-admin", role="admin", password="x" * 12
    )
    admin_token = services.token_create(actor=system, user=admin_user)
    agent_token = services.token_create(actor=system, agent=agents[1])
    api_admin, api_agent = APIClient(SERVER_NAME="localhost"), APIClient(SERVER_NAME="localhost")
    api_admin.credentials(HTTP_AUTHORIZATION=f"Bearer {admin_token}")
    api_agent.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_token}")
    console = Client(SERVER_NAME="localhost")
    console.force_login(admin_user)

    sample = list(Entry.objects.order_by("?").values_list("name", "aliases")[:SEARCHES])
    queries = []
    for i, (name, aliases) in enumerate(sample):
        words = name.split()[:-1] or name.split()
        kind = i % 6
        if kind == 0:
            q = " ".join(words)  # a name
        elif kind == 1:
            q = aliases[0] if aliases else words[0]  # an alias
        elif kind == 2:
            q = _misspell(rng, max(words, key=len)).lower()  # a misspelt name word
        elif kind == 3:
            q = max(words, key=len)[:5].lower()  # a partial name
        elif kind == 4:
            q = rng.choice(body_vocab)  # one body word (any frequency)
        else:
            q = " ".join(rng.sample(REAL_WORDS, 2))  # two common words
        queries.append(q)

    def search(i, q):
        if i % 3 == 0:
            return _timed(api_agent, "/api/entries", {"q": q})
        if i % 3 == 1:
            return _timed(api_admin, "/api/entries", {"q": q})
        return _timed(
            console, "/knowledge/entries/", {"q": q}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="results"
        )

    for i, q in enumerate(queries[:10]):  # warm up
        search(i, q)
    search_times = [search(i, q) for i, q in enumerate(queries)]
    report(
        "entries search p95 (50k entries)",
        _p95(search_times),
        "ms",
        target="≤ 100 ms",
        note=f"median {statistics.median(search_times):.1f} ms, max {max(search_times):.0f} ms; "
        "names, aliases, misspellings, partial names, body words; API (admin, agent) and console",
    )

    authors = ["adam", "rita", "dreaming"]
    list_params = []
    for i in range(LISTS):
        params = {"page": rng.randint(1, 40)}
        if i % 4 == 0:
            params["type"] = rng.choice(TYPES)
        if i % 4 == 1:
            params["author"] = rng.choice(authors)
        if i % 4 == 2:
            params["updated_after"] = f"2026-0{rng.randint(1, 9)}-01"
            params["store"] = "shared"
        if i % 5 == 0:
            params["sort"] = "name"
        list_params.append(params)

    def listing(i, params):
        if i % 3 == 0:
            return _timed(api_agent, "/api/entries", params)
        if i % 3 == 1:
            return _timed(api_admin, "/api/entries", {**params, "owner": rng.choice(agents).name})
        return _timed(console, "/knowledge/entries/", params)

    for i, params in enumerate(list_params[:10]):
        listing(i, params)
    list_times = [listing(i, params) for i, params in enumerate(list_params)]
    report(
        "entries list p95 (50k entries)",
        _p95(list_times),
        "ms",
        target="≤ 100 ms",
        note=f"median {statistics.median(list_times):.1f} ms; filters by type, author, store, update time, "
        "owner; pages 1–40; API and full console page",
    )

    admin = Principal(kind="person", name="bench-admin", role="admin")
    picked = list(
        Memory.objects.filter(entry__isnull=False)
        .order_by("?")
        .values_list("pk", "entry_id")[:RESTORE_RECORDS]
    )
    events = []
    for pk, entry_id in picked:
        block = entries.block_correct(
            actor=admin, entry_id=entry_id, block_id=pk, text=f"Corrected text {pk}.", reason="bench"
        )
        events.append(block.audit_event.pk)
    start = time.perf_counter()
    plan = audit_restore(actor=admin, event_ids=events)
    elapsed = time.perf_counter() - start
    assert plan.event.counts["records"] == RESTORE_RECORDS
    assert not Memory.objects.filter(
        pk__in=[p for p, _ in picked], text__startswith="Corrected text"
    ).exists()
    report(
        "batch restore of 100 records",
        elapsed * 1000,
        "ms",
        target="≤ 1000 ms",
        note="100 block corrections restored in one atomic batch (conflict check, new versions, audit)",
    )
    assert AuditEvent.objects.filter(action="audit.restored").count() == 1
