"""Expansion of winning candidates and their fitting into the token budget.

A message in a thread brings its thread, a lone message its chronological neighbours, an
episode its messages; a memory or entry stands alone. Each item is one ranked hit; every item is
cut to a per-candidate cap (nearest messages to the hit first), hits are placed before any
context, and context is shown once. Tokens are counted with `knowledge.tokens.count_tokens`, on exactly the text returned."""

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

from django.db.models import Q

from knowledge.models import Memory, Message
from knowledge.tokens import count_tokens, truncate_to_tokens
from memory.links.selectors import memory_links
from memory.recall.fuse import Candidate
from memory.recall.load import hydrate, hydration
from memory.recall.params import RecallParams
from memory.recall.routes import ENTRY, EPISODE, MEMORY, MESSAGE, execute_all
from memory.recall.scope import NothingVisible


class ContextMessage(NamedTuple):
    """A message shown around a hit, with what expansion uses: a plain row, not a model
    instance (a search reads dozens, and building Message instances cost more than the query).
    The hit itself stays a Message; both read the same way. Its time is read as epoch seconds
    (`context_message`): a search reads about a hundred of these rows, and the driver's
    timestamp loader took 6.7 µs a row, the epoch and `fromtimestamp` 1.3 µs (in-process, every
    message of the LoCoMo dev world); the same instant to the microsecond (tested). Rows are read
    in the fusion stage: its same-run A/B is in fuse.Fusion's docstring."""

    id: int
    channel_id: int
    thread: str
    speaker_name: str
    text: str
    ts: datetime
    external_id: str
    episode_id: int | None


CONTEXT_COLUMNS = ", ".join(
    "date_part('epoch', knowledge_message.ts)" if name == "ts" else f"knowledge_message.{name}"
    for name in ContextMessage._fields
)


def context_message(row) -> ContextMessage:
    """A ContextMessage from a row of CONTEXT_COLUMNS."""
    pk, channel_id, thread, speaker_name, text, ts, external_id, episode_id = row
    return ContextMessage(
        pk, channel_id, thread, speaker_name, text, datetime.fromtimestamp(ts, UTC), external_id, episode_id
    )


@dataclass
class Item:
    candidate: Candidate
    text: str
    tokens: int
    messages: list = field(default_factory=list)  # [{"id", "external_id", "speaker", "ts", "hit"}]

    @property
    def message_ids(self) -> set[int]:
        return {m["id"] for m in self.messages}


def message_line(message: Message | ContextMessage) -> str:
    return f"[{message.ts:%Y-%m-%d %H:%M}] {message.speaker_name}: {message.text}"


def memory_text(memory) -> str:
    """A memory as recall shows it; an entry block is prefixed with its entry's name, because a
    block ("prefers email") means nothing without its topic, and carries its validity when it
    has one worth saying, so an agent sees how a fact evolved."""
    if memory.entry_id is not None:
        return f"{memory.entry.name}: {memory.text}{validity_note(memory)}"
    return memory.text


def validity_note(memory) -> str:
    """ " (until 2026-10-03)" for a closed block; " (since 2026-10-03)" for one whose validity was
    dated before the day it was written (a fact that changed at a known time). A block valid
    from the moment it was written says nothing: every memory is."""
    if memory.valid_to is not None:
        return f" (until {memory.valid_to:%Y-%m-%d})"
    if (
        memory.valid_from is not None
        and memory.created_at
        and memory.valid_from.date() < memory.created_at.date()
    ):
        return f" (since {memory.valid_from:%Y-%m-%d})"
    return ""


def entry_text(entry) -> str:
    head = entry.name
    if entry.aliases:
        head += f" (also: {', '.join(entry.aliases)})"
    if entry.type:
        head += f" [{entry.type}]"
    return f"{head}: {entry.summary}" if entry.summary else head


def episode_head(episode) -> str:
    parts = [f"Episode: {episode.topic}", episode.summary]
    if episode.resolution:
        parts.append(f"Resolution: {episode.resolution}")
    return "\n".join(p for p in parts if p)


class Expander:
    """Fetches the context of message and episode winners in a few batched queries."""

    def __init__(self, scope, now, params: RecallParams):
        self.scope, self.now, self.params = scope, now, params
        self.context: dict[tuple[str, int], list[Message | ContextMessage]] = {}

    def links(self, memory) -> list[dict]:
        """Up to `params.link_neighbours` active neighbours `memory` links to, in this scope."""
        linked = memory_links(memory, visible_q=self.scope.knowledge_q & Q(status=Memory.ACTIVE))
        return linked[: self.params.link_neighbours]

    def prefetch(self, candidates: list[Candidate], *, rows_of: list[Candidate] = ()) -> None:
        """Load the context of every message and episode candidate not prefetched yet: their
        threads, lone messages' neighbours and episodes' messages, in one round trip, which also
        loads the rows of the candidates (and of `rows_of`) not loaded yet (load.hydration). The
        statements find a message's thread from its id, so a row not loaded yet costs no round
        trip of its own."""
        rows, attach = hydration([*rows_of, *candidates])
        todo = [c for c in candidates if c.key not in self.context and c.kind in (MESSAGE, EPISODE)]
        said = [c for c in todo if c.kind == MESSAGE]
        # Before its row is read, a message may be in a thread or alone: both statements ask.
        threaded = [c.id for c in said if c.obj is None or c.obj.thread]
        lone = [c.id for c in said if c.obj is None or not c.obj.thread]
        episodes = [c.id for c in todo if c.kind == EPISODE]
        asked = {}
        if threaded:
            asked["threads"] = self._visible_sql(
                "(knowledge_message.channel_id, knowledge_message.thread) IN (SELECT h.channel_id, "
                "h.thread FROM knowledge_message h WHERE h.id = ANY(%s) AND h.thread <> '')",
                [threaded],
            )
        if lone:
            asked["nearby"] = self._nearby_sql(lone)
        if episodes:
            asked["episodes"] = self._visible_sql("knowledge_message.episode_id = ANY(%s)", [episodes])
        asked = {name: statement for name, statement in asked.items() if statement is not None}
        if not rows and not asked:
            return
        results = execute_all(rows + list(asked.values()))
        attach(results[: len(rows)])
        found = dict(zip(asked, results[len(rows) :], strict=True))
        candidates = [c for c in todo if c.obj is not None]
        by_thread: dict[tuple[int, str], list[ContextMessage]] = {}
        for row in found.get("threads", []):
            m = context_message(row)
            by_thread.setdefault((m.channel_id, m.thread), []).append(m)
        nearby: dict[int, list[ContextMessage]] = {}
        for hit, *row in found.get("nearby", []):
            nearby.setdefault(hit, []).append(context_message(row))
        for messages in nearby.values():
            messages.sort(key=lambda m: (m.ts, m.id))
        by_episode: dict[int, list[ContextMessage]] = {}
        for row in found.get("episodes", []):
            m = context_message(row)
            by_episode.setdefault(m.episode_id, []).append(m)
        for c in candidates:
            if c.kind == MESSAGE:
                if c.obj.thread:
                    self.context[c.key] = by_thread.get((c.obj.channel_id, c.obj.thread)) or [c.obj]
                else:
                    self.context[c.key] = nearby.get(c.id) or [c.obj]
            elif c.kind == EPISODE:
                self.context[c.key] = by_episode.get(c.id, [])

    def _visible_sql(self, condition: str, params: list) -> tuple[str, list] | None:
        """The statement reading the messages matching `condition` that the scope shows as of
        `now`, oldest first, with the fields expansion uses (plain SQL on the scope's compiled
        filter); None when the scope shows no message."""
        try:
            where, wparams = self.scope.where(Message)
        except NothingVisible:
            return None
        return (
            f"SELECT {CONTEXT_COLUMNS} FROM knowledge_message "
            f"WHERE ({where}) AND knowledge_message.ts <= %s AND {condition} "
            f"ORDER BY knowledge_message.ts, knowledge_message.id",
            [*wparams, self.now, *params],
        )

    def _nearby_sql(self, hit_ids: list[int]) -> tuple[str, list] | None:
        """The statement reading each lone hit (first column) with up to `nearby_messages`
        neighbours either side in its channel's main timeline (hits in a thread are passed
        over)."""
        try:
            where, params = self.scope.where(Message)
        except NothingVisible:
            return None
        n = self.params.nearby_messages
        cols = CONTEXT_COLUMNS
        side = (
            "(SELECT {cols} FROM knowledge_message WHERE knowledge_message.channel_id = hm.channel_id "
            "AND knowledge_message.thread = '' AND knowledge_message.ts <= %s AND ({where}) "
            "AND (knowledge_message.ts, knowledge_message.id) {op} (hm.ts, hm.id) "
            "ORDER BY knowledge_message.ts {order}, knowledge_message.id {order} LIMIT %s)"
        )
        sql = (
            f"SELECT h.hit, n.* FROM unnest(%s::bigint[]) AS h(hit) "
            f"JOIN knowledge_message hm ON hm.id = h.hit AND hm.thread = '' CROSS JOIN LATERAL ("
            f"{side.format(cols=cols, where=where, op='<', order='DESC')} UNION ALL "
            f"(SELECT {cols} FROM knowledge_message WHERE knowledge_message.id = hm.id) UNION ALL "
            f"{side.format(cols=cols, where=where, op='>', order='ASC')}) n"
        )
        return sql, [hit_ids, self.now, *params, n, self.now, *params, n]

    def item(
        self, cand: Candidate, cap: int, *, exclude: set[int] = frozenset(), bare: bool = False
    ) -> Item | None:
        """The candidate's text (with its context) cut to at most `cap` tokens, or None when not
        even the hit itself fits in a useful form (or its row is gone). Context messages in
        `exclude` (shown elsewhere) are left out; `bare` leaves out all context."""
        if cand.obj is None:
            hydrate([cand])
            if cand.obj is None:
                return None
        if cand.kind == MEMORY:
            text = memory_text(cand.obj)
            if cand.conflict_note:
                text += " " + cand.conflict_note
            if self.params.link_neighbours:
                text += "".join(f"\nlinked: {link['text']}" for link in self.links(cand.obj))
            return _plain(cand, text, cap)
        if cand.kind == ENTRY:
            return _plain(cand, entry_text(cand.obj), cap)
        if cand.kind == MESSAGE:
            if not bare and cand.key not in self.context:
                self.prefetch([cand])
            context = self.context.get(cand.key) or [cand.obj]
            if cand.obj.thread and len(context) > self.params.thread_messages:
                # A long thread: the hit and the messages nearest to it.
                ids = [m.id for m in context]
                centre = ids.index(cand.id) if cand.id in ids else 0
                start = max(
                    0,
                    min(
                        centre - self.params.thread_messages // 2, len(context) - self.params.thread_messages
                    ),
                )
                context = context[start : start + self.params.thread_messages]
            context = [m for m in context if m.id == cand.id or (not bare and m.id not in exclude)]
            if not any(m.id == cand.id for m in context):
                context = [cand.obj]
            return _messages_item(cand, "", context, [cand.id], cap)
        if cand.kind == EPISODE:
            head = episode_head(cand.obj)
            hits = cand.hit_ids()
            if hits and cand.key not in self.context:
                self.prefetch([cand])
            context = self.context.get(cand.key, [])
            wanted = set(hits)
            if bare:  # the episode's head and its message hits
                context = [m for m in context if m.id in wanted]
            else:
                context = [m for m in context if m.id in wanted or m.id not in exclude]
                context = _nearest_first(context, wanted, max(self.params.episode_messages, len(wanted)))
            return _messages_item(cand, head, context, hits, cap)
        return None


def _nearest_first(messages: list, hits: set[int], n: int) -> list:
    """At most `n` of `messages` (in order): the hits and those nearest to a hit (with no hit,
    the first `n`)."""
    positions = [i for i, m in enumerate(messages) if m.id in hits]
    if not positions:
        return messages[:n]
    keep = sorted(range(len(messages)), key=lambda i: (min(abs(i - p) for p in positions), i))[:n]
    return [messages[i] for i in sorted(keep)]


def _plain(cand: Candidate, text: str, cap: int) -> Item | None:
    text = truncate_to_tokens(text, cap)
    if not text or text == "…":
        return None
    return Item(candidate=cand, text=text, tokens=count_tokens(text))


def _messages_item(
    cand: Candidate,
    head: str,
    messages: list[Message | ContextMessage],
    hits: list[int],
    cap: int,
) -> Item | None:
    """Keep the hits (`hits`, the first one the primary) and the messages nearest to them
    (nearest first, earlier before later) within `cap`, then print them in order. The primary
    hit is cut to fit rather than left out; without it (or with no hits at all) there is no
    item unless there is a head."""
    if not messages:
        return _plain(cand, head, cap) if head else None
    head_tokens = count_tokens(head)
    if head and head_tokens > cap // 2:
        head = truncate_to_tokens(head, cap // 2)
        head_tokens = count_tokens(head)
    budget = cap - head_tokens
    position = {m.id: i for i, m in enumerate(messages)}
    hit_positions = [position[h] for h in hits if h in position]
    primary = hit_positions[0] if hit_positions else None
    if hits and primary is None and not head:
        return None
    if hit_positions:
        hit_set = set(hit_positions)
        rest = [i for i in range(len(messages)) if i not in hit_set]
        rest.sort(key=lambda i: (min(abs(i - p) for p in hit_positions), i))
        order = hit_positions + rest
    else:
        order = list(range(len(messages)))
    chosen: dict[int, str] = {}
    used = 0
    for idx in order:
        line = message_line(messages[idx])
        cost = count_tokens(line)
        if used + cost > budget:
            if idx == primary:
                line = truncate_to_tokens(line, budget - used)
                cost = count_tokens(line)
                if not line or line == "…":
                    return None
            else:
                continue
        chosen[idx] = line
        used += cost
    if primary is not None and primary not in chosen:
        return None
    lines = [chosen[i] for i in sorted(chosen)]
    text = "\n".join(([head] if head else []) + lines)
    kept = [messages[i] for i in sorted(chosen)]
    hit_ids = set(hits)
    return Item(
        candidate=cand,
        text=text,
        tokens=head_tokens + used,  # counts add up across the newlines (knowledge.tokens)
        messages=[
            {
                "id": m.id,
                "external_id": m.external_id,
                "speaker": m.speaker_name,
                "ts": m.ts,
                "hit": m.id in hit_ids,
            }
            for m in kept
        ],
    )


def item_cap(budget_tokens: int, params: RecallParams) -> int:
    return min(budget_tokens, max(params.min_item_tokens, int(budget_tokens * params.item_share)))


def pack(
    candidates: list[Candidate], expander: Expander, *, k: int, budget_tokens: int, params
) -> list[Item]:
    """k means k hits: one item per candidate, best first, until k items or the budget is used
    up. Hits come before context: first every item takes its hit alone (cut to the
    per-candidate cap), then, best first, each item gets its context up to the cap from what the
    budget has left. A message that is the hit of another item, or already shown in an earlier
    item, is not repeated as context."""
    cap = item_cap(budget_tokens, params)
    chosen: list[tuple[Candidate, Item]] = []
    used = 0
    for cand in candidates:
        if len(chosen) >= k or used >= budget_tokens:
            break
        item = expander.item(cand, min(cap, budget_tokens - used), bare=True)
        if item is None:
            continue
        chosen.append((cand, item))
        used += item.tokens
    hits = {m for cand, _ in chosen for m in cand.hit_ids()}
    shown: set[int] = set()
    items: list[Item] = []
    for cand, bare in chosen:
        item = bare
        if cand.kind in (MESSAGE, EPISODE):
            room = min(cap, bare.tokens + budget_tokens - used)
            if room > bare.tokens:
                fuller = expander.item(cand, room, exclude=(hits | shown) - set(cand.hit_ids()))
                if fuller is not None and fuller.tokens <= room:
                    item = fuller
            used += item.tokens - bare.tokens
            shown |= item.message_ids
        items.append(item)
    assert sum(i.tokens for i in items) <= budget_tokens
    return items
