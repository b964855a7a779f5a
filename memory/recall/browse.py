"""memory_browse: open the full thread, episode, entry, memory or conversation behind a recall
result, within the caller's scope (the same access layer as search)."""

from django.db.models import Q

from knowledge import access
from knowledge.errors import Invalid, NotFound, Refused
from knowledge.models import Conversation, Entry, Episode, Memory, Message
from knowledge.principal import Principal
from knowledge.web import times_out
from memory.links.selectors import memory_links

KINDS = ("message", "thread", "episode", "entry", "memory", "conversation")
CONTEXT_MESSAGES = 10
MAX_MESSAGES = 500


def message_out(m: Message, channels: dict | None = None) -> dict:
    return {
        "id": m.pk,
        "external_id": m.external_id,
        "channel": (channels or {}).get(m.channel_id) or m.channel.name,
        "thread": m.thread,
        "speaker": m.speaker_name,
        "ts": m.ts,
        "text": m.text,
        **times_out(m),
    }


def _messages(qs) -> list[dict]:
    rows = list(qs.select_related("channel").defer("search")[:MAX_MESSAGES])
    return [message_out(m) for m in rows]


class Browser:
    """Browsing as `principal`, optionally inside one of its conversations; what it may open is
    `access.browse_scope`."""

    def __init__(self, principal: Principal, conversation: Conversation | None = None):
        self.principal = principal
        self.conversation = conversation
        self.scope = access.browse_scope(principal, conversation)
        self.knowledge_q = self.scope.knowledge_q
        self.message_q = self.scope.message_q

    def _get(self, model, pk, visible_q: Q):
        obj = model.objects.filter(pk=pk).first()
        if obj is None:
            raise NotFound(f"No {model._meta.model_name} {pk}.")
        if not model.objects.filter(visible_q, pk=pk).exists():
            raise Refused(f"{model._meta.model_name.capitalize()} {pk} is outside your scope.")
        return obj

    def open(self, kind: str, pk: int) -> dict:
        if kind not in KINDS:
            raise Invalid({"kind": [f"Use one of {', '.join(KINDS)}."]})
        return getattr(self, f"_{kind}")(pk)

    def _visible_messages(self):
        return Message.objects.filter(self.message_q)

    def _message(self, pk: int) -> dict:
        """A message with its thread, or (a lone message) its neighbours in the channel."""
        m = self._get(Message, pk, self.message_q)
        out = {"kind": "message", "message": message_out(m)}
        if m.thread:
            out["thread"] = _messages(
                self._visible_messages().filter(channel_id=m.channel_id, thread=m.thread).order_by("ts", "id")
            )
        else:
            timeline = self._visible_messages().filter(channel_id=m.channel_id, thread="")
            before = list(
                timeline.filter(Q(ts__lt=m.ts) | Q(ts=m.ts, id__lt=m.pk))
                .order_by("-ts", "-id")
                .select_related("channel")[:CONTEXT_MESSAGES]
            )
            after = list(
                timeline.filter(Q(ts__gt=m.ts) | Q(ts=m.ts, id__gt=m.pk))
                .order_by("ts", "id")
                .select_related("channel")[:CONTEXT_MESSAGES]
            )
            out["context"] = (
                [message_out(x) for x in reversed(before)]
                + [message_out(m)]
                + [message_out(x) for x in after]
            )
        if m.episode_id:
            out["episode"] = m.episode_id
        return out

    def _thread(self, pk: int) -> dict:
        """The whole thread the message `pk` belongs to (a lone message: just it)."""
        m = self._get(Message, pk, self.message_q)
        qs = self._visible_messages().filter(channel_id=m.channel_id, thread=m.thread).order_by("ts", "id")
        if not m.thread:
            qs = qs.filter(pk=m.pk)
        return {"kind": "thread", "channel": m.channel.name, "thread": m.thread, "messages": _messages(qs)}

    def _episode(self, pk: int) -> dict:
        e = self._get(Episode, pk, self.message_q)
        return {
            "kind": "episode",
            "id": e.pk,
            "channel": e.channel.name,
            "thread": e.thread,
            "topic": e.topic,
            "summary": e.summary,
            "likely_question": e.likely_question,
            "resolution": e.resolution,
            "related_systems": e.related_systems,
            "start_ts": e.start_ts,
            "end_ts": e.end_ts,
            "evidence": list(e.evidence.values_list("pk", flat=True)),
            "messages": _messages(self._visible_messages().filter(episode=e).order_by("ts", "id")),
        }

    def _entry(self, pk: int) -> dict:
        e = self._get(Entry, pk, self.knowledge_q)
        blocks = Memory.objects.filter(entry=e, status=Memory.ACTIVE).order_by("position", "id")
        return {
            "kind": "entry",
            "id": e.pk,
            "name": e.name,
            "type": e.type,
            "aliases": e.aliases,
            "summary": e.summary,
            "properties": e.properties,
            "store": e.store,
            "owner": e.owner.name,
            "updated_at": e.updated_at,
            "blocks": [
                {
                    "id": b.pk,
                    "text": b.text,
                    "version": b.version,
                    "author": f"{b.author_kind}:{b.author_name}",
                }
                for b in blocks
            ],
        }

    def _memory(self, pk: int) -> dict:
        m = self._get(Memory, pk, self.knowledge_q)
        sources = []
        for s in m.sources.all():
            source = {"kind": s.kind, "ref": s.ref, "state": s.state}
            opened = self._open_source(s.kind, s.ref)
            if opened is not None:
                source["opened"] = opened
            sources.append(source)
        return {
            "kind": "memory",
            "id": m.pk,
            "text": m.text,
            "key": m.key,
            "value": m.value,
            "tier": m.tier,
            "category": m.category,
            "status": m.status,
            "stale": m.stale,
            "confidence": m.confidence,
            "store": m.store,
            "owner": m.owner.name,
            "entry": m.entry_id,
            **times_out(m),
            "valid_from": m.valid_from,
            "valid_to": m.valid_to,
            "expires_at": m.expires_at,
            "version": m.version,
            "updated_at": m.updated_at,
            "sources": sources,
            "links": memory_links(m, visible_q=self.knowledge_q),
        }

    def _open_source(self, kind: str, ref: str):
        """An internal source, opened when it is in scope (external ones live elsewhere)."""
        if not ref.isdigit() or kind not in ("message", "entry", "memory", "conversation"):
            return None
        try:
            if kind == "memory":  # one level only: a source memory's own sources stay closed
                m = self._get(Memory, int(ref), self.knowledge_q)
                return {"kind": "memory", "id": m.pk, "text": m.text, "status": m.status}
            return self.open(kind, int(ref))
        except (NotFound, Refused):
            return None

    def _conversation(self, pk: int) -> dict:
        c = Conversation.objects.select_related("agent", "channel").filter(pk=pk).first()
        if c is None:
            raise NotFound(f"No conversation {pk}.")
        if access.is_agent_other_than(self.principal, c.agent_id):
            raise access.another_agents(f"Conversation {pk}")
        qs = self._visible_messages().filter(channel_id=c.channel_id, ts__gte=c.started_at)
        if c.thread:
            qs = qs.filter(thread=c.thread)
        if c.finished_at:
            qs = qs.filter(ts__lte=c.finished_at)
        return {
            "kind": "conversation",
            "id": c.pk,
            "agent": c.agent.name,
            "channel": c.channel.name,
            "thread": c.thread,
            "status": c.status,
            "read_stores": c.read_stores,
            "write_store": c.write_store,
            "started_at": c.started_at,
            "finished_at": c.finished_at,
            "messages": _messages(qs.order_by("ts", "id")),
        }
