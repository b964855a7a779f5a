"""Reads for stage A: the next batch of a channel, which channels are due (and why), and what the
Status tab shows per channel."""

from dataclasses import dataclass, field
from datetime import timedelta

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from curation.dreaming.runs import STUCK_AFTER
from curation.dreaming.stage_a import rules
from curation.models import DreamingRun, StageACursor
from knowledge.llm import LIGHT, deferrals_waiting, model_availability
from knowledge.models import Channel, Message
from knowledge.settings_store import setting_cache_clear, setting_get
from knowledge.tokens import count_tokens

MAX_BATCH_MESSAGES = 500  # a hard cap besides the token budget, so the reply's id lists stay short
LAG_ALERT_MESSAGES = 5000
FAILURES_ALERT = 3


@dataclass
class Batch:
    store: str
    messages: list[rules.BatchMessage] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    tokens: int = 0
    full: bool = False  # more messages wait behind this batch

    @property
    def ids(self) -> list[int]:
        return [m.id for m in self.messages]


def past_cursor_q(cursor: StageACursor | None) -> Q:
    """Messages after the cursor in reading order (ts, id). Written as ts ≥ T AND (ts > T OR
    id > I), so the (channel, ts) index bounds the scan."""
    if cursor is None or cursor.message_ts is None:
        return Q()
    return Q(ts__gte=cursor.message_ts) & (Q(ts__gt=cursor.message_ts) | Q(pk__gt=cursor.message_id))


def batch_next(channel: Channel, cursor: StageACursor | None, *, budget_tokens: int | None = None) -> Batch:
    """The next batch: messages after the cursor, oldest first, all of one store (a changed
    routing rule starts a new batch, so an episode never crosses a visibility boundary), within
    the token budget of one model call (at least one message)."""
    from django.conf import settings

    budget = budget_tokens or settings.BRAIN_DREAMING_BATCH_TOKENS
    rows = (
        # learn=False: signals kept as messages but never curated (fast-changing values).
        Message.objects.filter(past_cursor_q(cursor), channel=channel, learn=True)
        .order_by("ts", "id")
        .values_list("id", "ts", "speaker_name", "thread", "text", "store")[: MAX_BATCH_MESSAGES + 1]
    )
    batch = None
    for mid, ts, speaker, thread, text, store in rows:
        if batch is None:
            batch = Batch(store=store)
        message = rules.BatchMessage(id=mid, ts=ts, speaker=speaker, thread=thread, text=text)
        text_line = rules.line(message)
        tokens = count_tokens(text_line)
        if (
            store != batch.store
            or len(batch.messages) >= MAX_BATCH_MESSAGES
            or (batch.messages and batch.tokens + tokens > budget)
        ):
            batch.full = True
            break
        batch.messages.append(message)
        batch.lines.append(text_line)
        batch.tokens += tokens
    return batch or Batch(store="")


@dataclass
class ChannelLag:
    channel_id: int
    name: str
    lag: int  # messages past the cursor
    oldest_ts: object  # the oldest of them (how far behind the cursor is)
    newest_arrival: object  # when the newest message past the cursor arrived
    newest_id: int | None
    cursor: StageACursor | None


_LAG_SQL = """
SELECT c.id, c.name, count(m.id), min(m.ts), max(m.created_at), max(m.id)
FROM knowledge_channel c
LEFT JOIN curation_stageacursor k ON k.channel_id = c.id
LEFT JOIN knowledge_message m ON m.channel_id = c.id AND m.learn
     AND (k.message_ts IS NULL OR (m.ts >= k.message_ts AND (m.ts, m.id) > (k.message_ts, k.message_id)))
{where}
GROUP BY c.id, c.name
ORDER BY c.name
"""


def channel_lags(channel_id: int | None = None) -> list[ChannelLag]:
    """Every channel (or one) with what waits past its stage A cursor (one query, plus the
    cursors)."""
    with connection.cursor() as cur:
        if channel_id is None:
            cur.execute(_LAG_SQL.format(where=""))
        else:
            cur.execute(_LAG_SQL.format(where="WHERE c.id = %s"), [channel_id])
        rows = cur.fetchall()
    cursors = StageACursor.objects.select_related("last_run")
    if channel_id is not None:
        cursors = cursors.filter(pk=channel_id)
    cursors = {c.channel_id: c for c in cursors}
    return [
        ChannelLag(
            channel_id=cid,
            name=name,
            lag=lag,
            oldest_ts=oldest,
            newest_arrival=arrival,
            newest_id=newest,
            cursor=cursors.get(cid),
        )
        for cid, name, lag, oldest, arrival, newest in rows
    ]


def _claimed(cursor: StageACursor | None, now) -> bool:
    return bool(cursor and cursor.claimed_at and cursor.claimed_at > now - STUCK_AFTER)


def trigger_for(row: ChannelLag, now, *, quiet_minutes: int, batch_messages: int) -> tuple[str, str]:
    """(trigger, "") when the channel is due now, else ("", what it waits for)."""
    cursor = row.cursor
    if row.lag == 0:
        return "", "caught up"
    if _claimed(cursor, now):
        return "", "running"
    if cursor and row.newest_id is not None and row.newest_id <= cursor.seen_id:
        return "", "waiting for a new message: the last batch left an unfinished topic"
    if cursor and cursor.failures:
        if cursor.retry_at and cursor.retry_at > now:
            return "", f"retry after {cursor.retry_at:%Y-%m-%d %H:%M} UTC"
        return DreamingRun.RETRY, ""
    if row.lag >= batch_messages:
        return DreamingRun.THRESHOLD, ""
    quiet_at = row.newest_arrival + timedelta(minutes=quiet_minutes)
    if quiet_at <= now:
        return DreamingRun.QUIET, ""
    return "", (f"quiet from {quiet_at:%Y-%m-%d %H:%M} UTC, or {batch_messages - row.lag:,} more message(s)")


def channel_trigger(channel_id: int, now=None) -> str:
    """Why this channel is due now ("" when it is not): a queued run checks it again when the
    worker gets to it, so a channel queued by several sweeps is read once, not once per sweep."""
    now = now or timezone.now()
    quiet, threshold = (
        setting_get("BRAIN_DREAMING_QUIET_MINUTES"),
        setting_get("BRAIN_DREAMING_BATCH_MESSAGES"),
    )
    for row in channel_lags(channel_id):
        return trigger_for(row, now, quiet_minutes=quiet, batch_messages=threshold)[0]
    return ""


def stage_a_due(now=None) -> list[tuple[int, str]]:
    """(channel id, trigger) of every channel stage A should read now. Empty while the model is
    unavailable: the Status tab says why instead of a failed run every minute. A channel whose
    run was deferred by an outage is left to that deferral (knowledge.llm.outage) until it runs."""
    now = now or timezone.now()
    if model_availability(LIGHT):
        return []
    quiet, threshold = (
        setting_get("BRAIN_DREAMING_QUIET_MINUTES"),
        setting_get("BRAIN_DREAMING_BATCH_MESSAGES"),
    )
    waiting = {args[0] for args in deferrals_waiting("curation.dreaming.tasks.stage_a_channel")}
    due = []
    for row in channel_lags():
        trigger, _ = trigger_for(row, now, quiet_minutes=quiet, batch_messages=threshold)
        if trigger and row.channel_id not in waiting:
            due.append((row.channel_id, trigger))
    return due


def stage_a_status(now=None) -> dict:
    """The Status tab's stage A section (also in GET /api/status): whether stage A can run, and
    per channel the cursor's lag, the last run and its outcome, the next trigger and failures."""
    now = now or timezone.now()
    unavailable = model_availability(LIGHT)
    setting_cache_clear()  # the values in force now, whichever process changed them
    quiet, threshold = (
        setting_get("BRAIN_DREAMING_QUIET_MINUTES"),
        setting_get("BRAIN_DREAMING_BATCH_MESSAGES"),
    )
    last_failed = {}
    for run in (
        DreamingRun.objects.filter(stage=DreamingRun.STAGE_A, state=DreamingRun.FAILED)
        .order_by("channel_id", "-started_at", "-id")
        .distinct("channel_id")
    ):
        last_failed[run.channel_id] = run
    channels = []
    for row in channel_lags():
        cursor = row.cursor
        if row.lag == 0 and cursor is None:
            continue  # never had a message
        trigger, waits = trigger_for(row, now, quiet_minutes=quiet, batch_messages=threshold)
        if unavailable and row.lag:
            waits = "stage A is not running (see above)"
        elif trigger:
            waits = f"due now ({trigger})"
        last = cursor.last_run if cursor else None
        failed = last_failed.get(row.channel_id)
        channels.append(
            {
                "channel": row.name,
                "lag_messages": row.lag,
                "lag_seconds": int((now - row.oldest_ts).total_seconds()) if row.oldest_ts else 0,
                "lag_text": _age(now - row.oldest_ts) if row.oldest_ts else "",
                "cursor_message": cursor.message_id if cursor else None,
                "last_run": _run_out(last) if last else None,
                "next": waits,
                "failures": cursor.failures if cursor else 0,
                "last_failure": _run_out(failed) if failed else None,
            }
        )
    return {
        "available": not unavailable,
        "unavailable_reason": unavailable,
        "quiet_minutes": quiet,
        "batch_messages": threshold,
        "channels": channels,
    }


def _age(delta: timedelta) -> str:
    minutes = max(int(delta.total_seconds() // 60), 0)
    if minutes < 60:
        return f"{minutes} min"
    hours = minutes // 60
    if hours < 48:
        return f"{hours} h {minutes % 60} min"
    return f"{hours // 24} days"


def _run_out(run: DreamingRun) -> dict:
    return {
        "id": run.pk,
        "trigger": run.trigger,
        "state": run.state,
        "reason": run.reason,
        "batches": run.batches,
        "messages": run.messages,
        "noise": run.noise,
        "episodes": run.episodes,
        "left": run.left,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


def stage_a_alerts(section: dict) -> list[dict]:
    """A channel failing three times in a row, or more than 5,000 messages behind. A deployment
    without a model is not an alert: the section itself says why stage A does not run."""
    out = []
    for c in section["channels"]:
        if c["failures"] >= FAILURES_ALERT:
            reason = c["last_failure"]["reason"] if c["last_failure"] else ""
            out.append(
                {
                    "level": "error",
                    "text": f"Stage A failed {c['failures']} times in a row in channel {c['channel']}: {reason}",
                }
            )
        if c["lag_messages"] > LAG_ALERT_MESSAGES:
            out.append(
                {
                    "level": "warning",
                    "text": f"Stage A is {c['lag_messages']:,} messages behind in channel {c['channel']}.",
                }
            )
    return out
