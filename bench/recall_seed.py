"""Seeding helpers for the recall benchmarks: a clean slate, bulk memories and entries, and the
labelled evaluation set with its distractors."""

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

from django.db import connection, transaction
from django.db.utils import DatabaseError

from bench.textgen import TextGen
from knowledge.conversations import services as messages
from knowledge.memories.guard import writes_memory_rows as memory_rows_guarded
from knowledge.models import Agent, Channel, Entry, Memory, MemoryVersion
from knowledge.principal import Principal
from knowledge.principals import services

ACTOR = Principal.system("bench")
EVAL_PATH = Path(__file__).resolve().parent / "data" / "recall_eval.json"


def reset_recall_tables() -> None:
    """Recall benchmarks measure their own world: earlier benchmarks' memories, entries and
    messages (in the same throw-away bench database) would change both speed and quality."""
    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE knowledge_memory, knowledge_entry, knowledge_message, knowledge_episode, "
            "knowledge_conversation, knowledge_channelintegration, knowledge_channel, knowledge_pinnedmemo, "
            "knowledge_termstat "
            "RESTART IDENTITY CASCADE"
        )
    from memory.recall.seen import forget_stats

    forget_stats()


def analyze() -> None:
    """What the database would have done by now after a bulk load: statistics and visibility maps
    (autovacuum), and the load's dirty pages written out (a checkpoint), so the searches measured
    next do not share the two cores with that flush."""
    with connection.cursor() as cursor:
        for table in (
            "knowledge_memory",
            "knowledge_entry",
            "knowledge_message",
            "knowledge_messagevector",
            "knowledge_episode",
        ):
            cursor.execute(f"VACUUM ANALYZE {table}")
        try:
            cursor.execute("CHECKPOINT")
        except DatabaseError:  # an external database may not let us
            pass
    from memory.recall.seen import forget_stats

    forget_stats()


def agent(name: str) -> Agent:
    return Agent.objects.filter(name=name).first() or services.agent_create(actor=ACTOR, name=name)


@memory_rows_guarded  # seeding through the one writer's door (knowledge.memories.guard)
def bulk_memories(rows: list[dict]) -> list[Memory]:
    """Insert memories (and their first versions) in bulk. Each row: owner, store, text and any
    Memory fields; created_at/updated_at may be given (they are set after insert)."""
    objs, stamps = [], []
    for row in rows:
        row = dict(row)
        stamps.append((row.pop("created_at", None), row.pop("updated_at", None)))
        row.setdefault("status", Memory.ACTIVE)
        objs.append(
            Memory(
                author_kind="system",
                author_name="bench",
                content_hash=Memory.hash_content(row["text"], row.get("key", ""), row.get("value")),
                **row,
            )
        )
    with transaction.atomic():
        created = Memory.objects.bulk_create(objs, batch_size=2000)
        MemoryVersion.objects.bulk_create(
            [
                MemoryVersion(
                    memory=m,
                    version=1,
                    text=m.text,
                    key=m.key,
                    content_hash=m.content_hash,
                    author_kind="system",
                    author_name="bench",
                )
                for m in created
            ],
            batch_size=2000,
        )
        ids, created_at, updated_at = [], [], []
        for m, (c, u) in zip(created, stamps, strict=True):
            if c or u:
                ids.append(m.pk)
                created_at.append(c or u)
                updated_at.append(u or c)
        if ids:
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE knowledge_memory m SET created_at = d.c, updated_at = d.u "
                    "FROM unnest(%s::bigint[], %s::timestamptz[], %s::timestamptz[]) AS d(id, c, u) "
                    "WHERE m.id = d.id",
                    [ids, created_at, updated_at],
                )
    return created


def bulk_entries(rows: list[dict]) -> list[Entry]:
    """Insert entries with their blocks. Each row: owner, store, name, type, aliases, summary,
    blocks (list of texts), optional when."""
    entries = []
    with transaction.atomic():
        created = Entry.objects.bulk_create(
            [
                Entry(
                    name=r["name"],
                    type=r.get("type", ""),
                    aliases=r.get("aliases", []),
                    summary=r.get("summary", ""),
                    owner=r["owner"],
                    store=r["store"],
                )
                for r in rows
            ],
            batch_size=2000,
        )
        block_rows = []
        for entry, r in zip(created, rows, strict=True):
            entries.append(entry)
            for pos, text in enumerate(r.get("blocks", [])):
                block_rows.append(
                    {
                        "owner": r["owner"],
                        "store": r["store"],
                        "text": text,
                        "entry": entry,
                        "position": pos,
                        "created_at": r.get("when"),
                        "updated_at": r.get("when"),
                    }
                )
        bulk_memories(block_rows)
        stamped = [(e.pk, r["when"]) for e, r in zip(created, rows, strict=True) if r.get("when")]
        if stamped:
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE knowledge_entry e SET created_at = d.w, updated_at = d.w "
                    "FROM unnest(%s::bigint[], %s::timestamptz[]) AS d(id, w) WHERE e.id = d.id",
                    [[p for p, _ in stamped], [w for _, w in stamped]],
                )
    return entries


class EvalWorld:
    """The labelled evaluation set loaded into the database, with label <-> row id maps."""

    def __init__(self, data: dict):
        self.data = data
        self.start = datetime.fromisoformat(data["start"])
        self.label_of: dict[tuple[str, int], str] = {}
        self.conversations: dict[str, object] = {}

    def when(self, day: float, hour: float = 12.0) -> datetime:
        return self.start + timedelta(days=day, hours=hour)


def load_eval(
    *, distractor_messages: int = 6000, distractor_memories: int = 800, distractor_entries: int = 150, seed=11
):
    """Load bench/data/recall_eval.json plus generated distractors (same topics, same channels,
    same three months). Returns an EvalWorld."""
    data = json.loads(EVAL_PATH.read_text())
    world = EvalWorld(data)
    bot = agent(data["agent"])
    channels = {}
    for c in data["channels"]:
        person = services.person_get_or_create(actor=ACTOR, name=c["person"]) if c.get("person") else None
        channels[c["name"]] = messages.channel_create(
            actor=ACTOR,
            name=c["name"],
            kind=c["kind"],
            person=person,
            agent=bot if c["kind"] == Channel.KIND_DM else None,
            memory_scope=c["memory_scope"],
        )
        world.conversations[c["name"]] = messages.conversation_start(
            actor=ACTOR, agent=bot, channel=channels[c["name"]]
        )
    rng = random.Random(seed)
    gen = TextGen(seed)
    batch = []
    for session in data["sessions"]:
        base = world.when(session["day"], session["hour"])
        for i, m in enumerate(session["messages"]):
            batch.append(
                messages.MessageIn(
                    channel=channels[session["channel"]],
                    speaker=m["speaker"],
                    text=m["text"],
                    ts=base + timedelta(minutes=3 * i),
                    external_id=m["external_id"],
                )
            )
    names = list(channels)
    for i in range(distractor_messages):
        day = rng.uniform(0, 90)
        channel = channels[rng.choice(names)]
        speaker = "alice" if channel.kind == Channel.KIND_DM and rng.random() < 0.6 else gen.speaker()
        batch.append(
            messages.MessageIn(
                channel=channel,
                speaker=speaker,
                text=gen.message(),
                ts=world.when(day, 0),
                external_id=f"noise-{i}",
            )
        )
    for start in range(0, len(batch), 1000):
        messages.message_ingest(actor=ACTOR, messages=batch[start : start + 1000])
    from knowledge.models import Message

    for pk, ext in Message.objects.values_list("pk", "external_id"):
        world.label_of[("message", pk)] = ext

    mem_rows = []
    for m in data["memories"]:
        when = world.when(m["day"])
        mem_rows.append(
            {
                "owner": bot,
                "store": m["store"],
                "text": m["text"],
                "tier": m.get("tier", Memory.SEMANTIC),
                "created_at": when,
                "updated_at": when,
            }
        )
    for _ in range(distractor_memories):
        when = world.when(rng.uniform(0, 90))
        mem_rows.append(
            {"owner": bot, "store": "shared", "text": gen.memory(), "created_at": when, "updated_at": when}
        )
    created = bulk_memories(mem_rows)
    for m, mem in zip(data["memories"], created, strict=False):
        world.label_of[("memory", mem.pk)] = m["id"]

    entry_rows = []
    for e in data["entries"]:
        entry_rows.append(
            {
                "owner": bot,
                "store": "shared",
                "name": e["name"],
                "type": e["type"],
                "aliases": e["aliases"],
                "summary": e["summary"],
                "blocks": [b["text"] for b in e["blocks"]],
                "when": world.when(e["day"]),
            }
        )
    for _ in range(distractor_entries):
        name, etype, summary, aliases = gen.entry()
        entry_rows.append(
            {
                "owner": bot,
                "store": "shared",
                "name": name,
                "type": etype,
                "aliases": aliases,
                "summary": summary,
                "blocks": [gen.memory(), gen.memory()],
                "when": world.when(rng.uniform(0, 90)),
            }
        )
    entries = bulk_entries(entry_rows)
    for e, entry in zip(data["entries"], entries, strict=False):
        world.label_of[("entry", entry.pk)] = e["id"]
        blocks = Memory.objects.filter(entry=entry).order_by("position")
        for b, block in zip(e["blocks"], blocks, strict=True):
            world.label_of[("memory", block.pk)] = b["id"]
    return world
