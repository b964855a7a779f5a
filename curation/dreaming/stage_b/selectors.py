"""Reads for stage B: an agent's new material past its cursor (the scan), what the scan opens,
which agents are due, the Status tab's stage B section with its review lints, and Dreaming
fitness."""

import datetime
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection
from django.db.models import Exists, OuterRef
from django.utils import timezone

from curation.dreaming.runs import STUCK_AFTER
from curation.dreaming.stage_b import rules
from curation.models import DreamingRun, StageBCursor
from knowledge import access
from knowledge.llm import LIGHT, deferrals_waiting, model_availability
from knowledge.models import (
    Agent,
    AgentSkill,
    CurationGuide,
    Entry,
    Episode,
    Memory,
    MemorySource,
    Message,
    TaskOutcome,
)
from knowledge.principal import Principal

MAX_EPISODES = 50  # per run: the scan prompt stays small; the next run continues a backlog
MAX_OUTCOMES = 50
MAX_INDEX_ENTRIES = 300
MAX_MESSAGES_PER_EPISODE = 40
FAILURES_ALERT = 3
LINT_LIMIT = 50


@dataclass
class Scan:
    episodes: list[Episode] = field(default_factory=list)
    outcomes: list[TaskOutcome] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    stores: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.episodes and not self.outcomes


def _episodes_q(agent: Agent):
    return access.message_readable_q(Principal.for_agent(agent))


def scan_read(agent: Agent, cursor: StageBCursor) -> Scan:
    """The agent's new material: episodes of channels it takes part in past the cursor, its new
    task outcomes, and a light index of its entries in the stores it may write."""
    stores = access.writable_stores(agent)
    episodes = list(
        Episode.objects.filter(_episodes_q(agent), pk__gt=cursor.episode_id)
        .select_related("channel")
        .order_by("pk")[:MAX_EPISODES]
    )
    outcomes = list(
        TaskOutcome.objects.filter(agent=agent, pk__gt=cursor.outcome_id)
        .select_related("skill")
        .order_by("pk")[:MAX_OUTCOMES]
    )
    entries = list(
        Entry.objects.filter(owner=agent, store__in=stores)
        .only("id", "name", "type", "aliases", "summary", "store")
        .order_by("-updated_at")[:MAX_INDEX_ENTRIES]
    )
    return Scan(episodes=episodes, outcomes=outcomes, entries=entries, stores=stores)


def scan_lines(scan: Scan) -> dict[str, list[str]]:
    return {
        "episodes": [
            f"#{e.pk} {e.start_ts:%Y-%m-%d} {e.channel.name}: {e.topic} — {rules.cut(e.summary)}"
            for e in scan.episodes
        ],
        "outcomes": [
            f"#{o.pk} {o.skill.name} {o.result}{' (corrected)' if o.correction else ''}: {rules.cut(o.task)}"
            for o in scan.outcomes
        ],
        "entries": [
            f"#{e.pk} {e.name} ({e.type or 'untyped'}; {e.store})"
            + (f" aka {', '.join(e.aliases)}" if e.aliases else "")
            + (f": {rules.cut(e.summary)[:200]}" if e.summary else "")
            for e in scan.entries
        ],
    }


def guide_types(agent: Agent) -> list[str]:
    guide = CurationGuide.objects.filter(owner=agent).first()
    return list(guide.domain_types if guide else CurationGuide.DEFAULT_DOMAIN_TYPES)


def _date(value) -> str:
    return f"{value:%Y-%m-%d}" if value else "…"


def open_picked(agent: Agent, scan: Scan, picked: dict) -> tuple[rules.Opened, dict[str, list[str]]]:
    """Open only what the scan picked (ids it was not shown are ignored): the episodes' source
    messages, the entries with their blocks, the enabled skills with their overlays and the
    curation guide. Returns what the rules may cite and the propose prompt's sections."""
    opened = rules.Opened(agent_id=agent.pk, types=guide_types(agent), stores=scan.stores)
    episodes = {e.pk: e for e in scan.episodes if e.pk in set(picked["episodes"])}
    lines: dict[str, list[str]] = {"Source messages": [], "Task outcomes": [], "Entries": [], "Skills": []}
    rows = (
        Message.objects.filter(episode_id__in=list(episodes))
        .select_related("channel")
        .order_by("episode_id", "ts", "id")
    )
    per_episode: dict[int, list[Message]] = {}
    for m in rows:
        if len(per_episode.setdefault(m.episode_id, [])) < MAX_MESSAGES_PER_EPISODE:
            per_episode[m.episode_id].append(m)
    evidence = dict.fromkeys(episodes, None)
    for episode_id, message_id in Episode.evidence.through.objects.filter(
        episode_id__in=list(episodes)
    ).values_list("episode_id", "message_id"):
        evidence[episode_id] = [*(evidence[episode_id] or []), message_id]
    for episode_id, messages in per_episode.items():
        e = episodes[episode_id]
        lines["Source messages"].append(f"[episode #{e.pk} in {e.channel.name}: {e.topic}]")
        for m in messages:
            place = f"{m.channel.name}/{m.thread}" if m.thread else m.channel.name
            opened.messages[m.pk] = rules.Evidence(id=m.pk, store=m.store, place=place, ts=m.ts, text=m.text)
            lines["Source messages"].append(
                f"#{m.pk} {m.ts:%Y-%m-%d %H:%M} {m.speaker_name}: {rules.cut(m.text)}"
            )
        shown = [m.pk for m in messages]
        opened.episodes[episode_id] = [
            i for i in (evidence[episode_id] or shown) if i in opened.messages
        ] or shown
    for o in scan.outcomes:
        if o.pk in set(picked["outcomes"]):
            opened.outcomes[o.pk] = {
                "skill": o.skill.name,
                "result": o.result,
                "steps": list(o.steps or []),
                "correction": o.correction,
            }
            correction = f" correction: {o.correction.get('text', '')}" if o.correction else ""
            steps = f" steps: {' → '.join(map(str, o.steps))}" if o.steps else ""
            lines["Task outcomes"].append(f"#{o.pk} {o.skill.name} {o.result}: {o.task}.{steps}{correction}")
    entry_ids = [e.pk for e in scan.entries if e.pk in set(picked["entries"])]
    blocks: dict[int, list[Memory]] = {}
    for b in (
        Memory.objects.filter(entry_id__in=entry_ids, status__in=(Memory.ACTIVE, Memory.QUEUED))
        .prefetch_related("sources")
        .order_by("entry_id", "position", "id")
    ):
        blocks.setdefault(b.entry_id, []).append(b)
    for e in Entry.objects.filter(pk__in=entry_ids).order_by("pk"):
        live = blocks.get(e.pk, [])
        opened.entries[e.pk] = {
            "store": e.store,
            "blocks": {b.pk: b.valid_to for b in live},
            "texts": {b.pk: b.text for b in live},
        }
        lines["Entries"].append(
            f"#{e.pk} {e.name} ({e.type or 'untyped'}; store {e.store})"
            + (f" aka {', '.join(e.aliases)}" if e.aliases else "")
            + (f"\n  summary: {e.summary}" if e.summary else "")
            + (f"\n  properties: {e.properties}" if e.properties else "")
        )
        for b in blocks.get(e.pk, []):
            sources = ", ".join(f"{s.kind}:{s.ref}" for s in b.sources.all())
            lines["Entries"].append(
                f"  [block #{b.pk}, {b.category or 'observation'}, {_date(b.valid_from)} – "
                f"{_date(b.valid_to)}] {rules.cut(b.text)} (sources: {sources or 'none'})"
            )
    for link in AgentSkill.objects.filter(agent=agent, enabled=True).select_related("skill"):
        lessons = list(
            Memory.objects.filter(
                owner=agent, skill=link.skill, status__in=(Memory.ACTIVE, Memory.QUEUED)
            ).order_by("position", "id")
        )
        opened.skills[link.skill.name] = [m.pk for m in lessons]
        lines["Skills"].append(f"{link.skill.name}: {link.skill.title}")
        lines["Skills"] += [f"  [lesson #{m.pk}] {rules.cut(m.text)}" for m in lessons]
    guide = CurationGuide.objects.filter(owner=agent).first()
    lines["Curation guide (read-only)"] = [
        f"types: {', '.join(opened.types)}",
        *([f"taxonomy: {guide.taxonomy}"] if guide and guide.taxonomy else []),
        f"update rules: {guide.update_rules if guide else CurationGuide.DEFAULT_UPDATE_RULES}",
    ]
    return opened, lines


# --- due agents, Status, lints, fitness ----------------------------------------------------------


def _new_episode_counts(agents: list[Agent], cursors: dict[int, StageBCursor]) -> dict[int, int]:
    """Per agent of `agents`: episodes past its cursor in channels it takes part in (one query
    per agent; agents are few)."""
    out = {}
    for agent in agents:
        cursor = cursors.get(agent.pk)
        out[agent.pk] = Episode.objects.filter(
            _episodes_q(agent), pk__gt=cursor.episode_id if cursor else 0
        ).count()
    return out


def stage_b_due(now=None) -> list[int]:
    """Agents stage B should curate now: new episodes or task outcomes past the cursor, not
    claimed, and past any retry back-off. Empty while the light model is unavailable. An agent
    whose run was deferred by an outage is left to that deferral (knowledge.llm.outage)."""
    now = now or timezone.now()
    if model_availability(LIGHT):
        return []
    waiting = {args[0] for args in deferrals_waiting("curation.dreaming.tasks.stage_b_agent")}
    due = []
    cursors = {c.agent_id: c for c in StageBCursor.objects.all()}
    for agent in Agent.objects.order_by("name"):
        if agent.pk in waiting:
            continue
        cursor = cursors.get(agent.pk) or StageBCursor(agent=agent)
        if cursor.claimed_at and cursor.claimed_at > now - STUCK_AFTER:
            continue
        if cursor.failures and cursor.retry_at and cursor.retry_at > now:
            continue
        if (
            Episode.objects.filter(_episodes_q(agent), pk__gt=cursor.episode_id).exists()
            or TaskOutcome.objects.filter(agent=agent, pk__gt=cursor.outcome_id).exists()
        ):
            due.append(agent.pk)
    return due


def _run_out(run: DreamingRun | None) -> dict | None:
    if run is None:
        return None
    return {
        "id": run.pk,
        "trigger": run.trigger,
        "state": run.state,
        "reason": run.reason,
        "materials": run.materials,
        "operations": run.operations,
        "skill_updates": run.skill_updates,
        "dropped": len(run.dropped),
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


def stage_b_status(now=None) -> dict:
    """The Status tab's stage B section (also in GET /api/status): whether it can run, per agent
    the cursor's lag (episodes and task outcomes not read yet), the last run and failures in a
    row, and the lints for people's review."""
    now = now or timezone.now()
    unavailable = model_availability(LIGHT)
    # The agent list is read once and every count is keyed by that one read: agents created
    # meanwhile (a script making several) wait for the next call rather than meet counts that
    # were never taken for them.
    everyone = list(Agent.objects.order_by("name"))
    cursors = {c.agent_id: c for c in StageBCursor.objects.select_related("last_run")}
    lags = _new_episode_counts(everyone, cursors)
    outcome_lag = {}
    for agent in everyone:
        cursor = cursors.get(agent.pk)
        outcome_lag[agent.pk] = TaskOutcome.objects.filter(
            agent=agent, pk__gt=cursor.outcome_id if cursor else 0
        ).count()
    agents = []
    for agent in everyone:
        cursor = cursors.get(agent.pk)
        if cursor is None and not lags[agent.pk] and not outcome_lag[agent.pk]:
            continue
        agents.append(
            {
                "agent": agent.name,
                "lag_episodes": lags[agent.pk],
                "lag_outcomes": outcome_lag[agent.pk],
                "last_run": _run_out(cursor.last_run if cursor else None),
                "failures": cursor.failures if cursor else 0,
                "retry_at": cursor.retry_at if cursor else None,
            }
        )
    return {
        "available": not unavailable,
        "unavailable_reason": unavailable,
        "agents": agents,
        "lints": review_lints(now=now),
    }


def stage_b_alerts(section: dict) -> list[dict]:
    return [
        {
            "level": "error",
            "text": f"Stage B failed {a['failures']} times in a row for agent {a['agent']}: "
            f"{(a['last_run'] or {}).get('reason', '')}",
        }
        for a in section["agents"]
        if a["failures"] >= FAILURES_ALERT
    ]


# Entries about one topic (same name, or one's name an alias of the other) that disagree on a
# property. Only entries with properties can disagree on one, so the pairs are drawn from those
# (entry_props_dreaming) by two equi-joins — on the lowered name, and on a name against the other's
# unnested aliases — instead of comparing every pair of an owner's entries.
_CONTRADICTIONS_SQL = """
WITH live AS (
  SELECT id, name, aliases, owner_id FROM knowledge_entry
  WHERE deleted_at IS NULL AND properties <> '{}'::jsonb AND jsonb_typeof(properties) = 'object'
), pairs AS (
  SELECT a.id AS a, b.id AS b FROM live a
  JOIN live b ON b.owner_id = a.owner_id AND lower(b.name) = lower(a.name) AND a.id < b.id
  UNION
  SELECT least(x.id, y.id), greatest(x.id, y.id)
  FROM live x JOIN (SELECT id, owner_id, unnest(aliases) AS alias FROM live) y
    ON y.owner_id = x.owner_id AND y.alias = x.name AND y.id <> x.id
)
SELECT a.id, a.name, b.id, b.name, k.key
FROM pairs p JOIN knowledge_entry a ON a.id = p.a JOIN knowledge_entry b ON b.id = p.b
CROSS JOIN LATERAL jsonb_object_keys(a.properties) AS k(key)
WHERE b.properties ? k.key AND a.properties -> k.key <> b.properties -> k.key
ORDER BY a.id, b.id, k.key
LIMIT %s
"""


def review_lints(*, now=None) -> dict:
    """What people look at after Dreaming: live blocks with no source; memories whose validity
    ended but which recall still presents as current (loose memories: recall dates closed entry
    blocks "(until …)", not loose ones); entries about one topic (same name or alias) that
    disagree on one property."""
    now = now or timezone.now()
    # NOT EXISTS, walked in (entry, id) order on memory_active_block_dreaming, stops at the limit
    # (an anti-join over every block read them all).
    unsourced = list(
        Memory.objects.filter(entry__isnull=False, entry__deleted_at__isnull=True, status=Memory.ACTIVE)
        .filter(~Exists(MemorySource.objects.filter(memory=OuterRef("pk"))))
        .values_list("pk", "entry_id")
        .order_by("entry_id", "pk")[:LINT_LIMIT]
    )
    ended = list(
        Memory.objects.filter(entry__isnull=True, skill__isnull=True, status=Memory.ACTIVE, valid_to__lt=now)
        .values_list("pk", "valid_to")
        .order_by("valid_to")[:LINT_LIMIT]
    )
    with connection.cursor() as cur:
        cur.execute(_CONTRADICTIONS_SQL, [LINT_LIMIT])
        contradictions = [
            {"entry": a, "name": an, "other": b, "other_name": bn, "property": key}
            for a, an, b, bn, key in cur.fetchall()
        ]
    return {
        "unsourced_blocks": [{"block": b, "entry": e} for b, e in unsourced],
        "ended_but_current": [{"memory": m, "valid_to": v} for m, v in ended],
        "contradictions": contradictions,
    }


_FITNESS_SQL = """
WITH writes AS (
  SELECT e.owner, r.object_id, e.created_at, e.dreaming_run
  FROM knowledge_auditevent e JOIN knowledge_revision r ON r.event_id = e.id
  WHERE e.dreaming_run IS NOT NULL AND e.action = 'memory.written' AND e.data ? 'entry'
    AND r.object_type = 'memory' AND r.before IS NULL {agent}
), judged AS (
  SELECT w.*, w.created_at < %s AS mature,
         (SELECT min(p.created_at) FROM knowledge_revision pr
            JOIN knowledge_auditevent p ON p.id = pr.event_id
           WHERE pr.object_type = 'memory' AND pr.object_id = w.object_id
             AND p.actor_kind = 'person' AND p.created_at > w.created_at) AS changed_at
  FROM writes w
)
SELECT owner, object_id, dreaming_run, mature, changed_at FROM judged ORDER BY owner, created_at
"""


def fitness(*, agent: Agent | None = None, now=None) -> list[dict]:
    """Dreaming fitness per agent: of the blocks Dreaming wrote that are mature (written more
    than BRAIN_DREAMING_MATURE_DAYS ago), the share no person changed or removed since. A review
    signal (how much of Dreaming's work people had to touch), not an accuracy score. Each row
    lists the blocks people changed, so they are one click away."""
    now = now or timezone.now()
    cutoff = now - datetime.timedelta(days=settings.BRAIN_DREAMING_MATURE_DAYS)
    params: list = [cutoff]
    where = ""
    if agent is not None:
        where, params = "AND e.owner = %s", [agent.name, cutoff]
    with connection.cursor() as cur:
        cur.execute(_FITNESS_SQL.format(agent=where), params)
        rows = cur.fetchall()
    out: dict[str, dict] = {}
    for owner, block, run, mature, changed_at in rows:
        row = out.setdefault(
            owner, {"agent": owner, "writes": 0, "mature": 0, "kept": 0, "changed": [], "share": None}
        )
        row["writes"] += 1
        if mature:
            row["mature"] += 1
            if changed_at is None:
                row["kept"] += 1
            else:
                row["changed"].append({"block": int(block), "run": run, "changed_at": changed_at})
    for row in out.values():
        row["share"] = row["kept"] / row["mature"] if row["mature"] else None
    entries = dict(
        Memory.objects.filter(pk__in=[c["block"] for r in out.values() for c in r["changed"]]).values_list(
            "pk", "entry_id"
        )
    )
    for row in out.values():
        for c in row["changed"]:
            c["entry"] = entries.get(c["block"])
    return list(out.values())


def stage_b_runs(*, agent: Agent | None = None, limit: int = 50):
    qs = DreamingRun.objects.filter(stage=DreamingRun.STAGE_B).select_related("agent")
    if agent is not None:
        qs = qs.filter(agent=agent)
    return qs[:limit]
