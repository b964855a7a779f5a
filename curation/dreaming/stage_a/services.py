"""Stage A's writes: claim a channel, read it batch by batch through the light model, and save
each batch's episodes, their message links, the new cursor and the batch's audit event in one
transaction — only after the reply passed the schema and the code rules (rules.check). A
model failure, an invalid reply or a database error writes nothing for that batch, ends the run
as failed with the reason, and the channel is retried with back-off and a smaller batch. An
outage (the model server does not answer) is not a failure: the run is deferred and runs again
with the same batch (knowledge.llm.outage, runs.run_defer)."""

import time

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F

from curation.dreaming.runs import ACTOR, RunDeferred, RunFailed, run_count_call, run_open, run_through
from curation.dreaming.stage_a import rules
from curation.dreaming.stage_a.selectors import Batch, batch_next
from curation.models import DreamingRun, StageACursor
from knowledge.audit.services import audit_record
from knowledge.embeddings.kick import request_embedding_run
from knowledge.errors import Conflict
from knowledge.llm import LIGHT, ModelError, fits, model_ask, model_availability, outage, reply_budget
from knowledge.models import Channel, Episode, Message

# The reply lists every message id and a few sentences per episode: room for both, growing with
# the batch, so a long batch's reply is not cut off (a cut reply is invalid JSON).
REPLY_TOKENS_BASE, REPLY_TOKENS_PER_MESSAGE, REPLY_TOKENS_MAX = 800, 30, 16000
# After a failure the next attempt reads a smaller batch (half per failure in a row, down to a
# sixteenth), so a batch the model cannot handle in one reply does not fail the same way forever.
SHRINK_AFTER_FAILURES = 4


class ChannelBusy(Conflict):
    """Another run holds the channel; nothing was started."""


def stage_a_run(
    *, channel: Channel, trigger: str, started_by: str = "", max_seconds: float = 240.0, deferrals: int = 0
) -> DreamingRun:
    """Run stage A over one channel: batch after batch until it is caught up, a batch leaves an
    unfinished topic at the end of the channel, a batch fails, or `max_seconds` pass (the next
    trigger continues). Returns the run. With the model unavailable (not configured, disabled,
    over budget) nothing is read and the run is recorded as skipped with the reason; with its
    server down (an outage, `deferrals` in a row so far) the run is deferred. Raises
    ChannelBusy when another run holds the channel."""
    down = outage(profile=LIGHT)
    unavailable = "" if down else model_availability(LIGHT)
    run, cursor = run_open(
        stage=DreamingRun.STAGE_A,
        owner="channel",
        of=channel,
        cursor_model=StageACursor,
        trigger=trigger,
        started_by=started_by,
        unavailable=unavailable and f"stage A did not run: the light model is {unavailable}",
        busy=ChannelBusy(f"another stage A run is reading channel {channel.name}"),
    )
    if cursor is None:
        return run
    started = time.monotonic()

    def read() -> str:
        while True:
            cursor = StageACursor.objects.get(pk=channel.pk)
            budget = settings.BRAIN_DREAMING_BATCH_TOKENS // 2 ** min(cursor.failures, SHRINK_AFTER_FAILURES)
            batch = _fitted(channel, cursor, max(budget, 1))
            if not batch.messages:
                return ""
            batch = _batch(run, channel, cursor, batch)
            if not batch.full or time.monotonic() - started > max_seconds:
                return ""

    return run_through(
        run,
        StageACursor,
        channel.pk,
        read,
        down=down,
        resume="curation.dreaming.tasks.stage_a_channel",
        deferrals=deferrals,
    )


def _cited(data: dict) -> set[int]:
    ids = set(data["noise"])
    for episode in data["episodes"]:
        ids.update(episode["messages"], episode["evidence"])
    if data.get("leave_from") is not None:
        ids.add(data["leave_from"])
    return ids


def _reply_tokens(batch: Batch) -> int:
    want = min(REPLY_TOKENS_BASE + REPLY_TOKENS_PER_MESSAGE * len(batch.messages), REPLY_TOKENS_MAX)
    return reply_budget(want, LIGHT)


def _prompt(channel: Channel, batch: Batch) -> list[dict]:
    return rules.prompt(channel=channel.name, messages=batch.messages, lines=batch.lines, full=batch.full)


def _fitted(channel: Channel, cursor: StageACursor, budget: int) -> Batch:
    """The next batch within `budget`, halved until its prompt and reply budget fit the light
    model's context (a single message that does not fit is sent and refused, and says so)."""
    while True:
        batch = batch_next(channel, cursor, budget_tokens=budget)
        if len(batch.messages) <= 1 or fits(_prompt(channel, batch), _reply_tokens(batch), LIGHT):
            return batch
        budget = max(budget // 2, 1)


def _rule_breach(channel: Channel, batch: Batch, data: dict) -> str:
    """The code rules on a schema-valid reply, as a reason ("" when it passes)."""
    outside = _cited(data) - set(batch.ids)
    foreign = dict(
        Message.objects.filter(pk__in=outside).exclude(channel=channel).values_list("pk", "channel__name")[:1]
    )
    if foreign:
        (mid, name), *_ = foreign.items()
        return f"it cites message {mid}, which belongs to channel {name}"
    try:
        rules.check(data, batch_ids=batch.ids, full=batch.full)
    except rules.Invalid as exc:
        return str(exc)
    return ""


def _batch(run: DreamingRun, channel: Channel, cursor: StageACursor, batch: Batch) -> Batch:
    """Read one batch through the model and write it; returns the batch written (a cut reply
    is asked again once over half the batch)."""
    used = batch

    def shrink():
        nonlocal used
        if len(used.messages) <= 1:
            return None
        used = batch_next(channel, cursor, budget_tokens=max(used.tokens // 2, 1))
        return _prompt(channel, used)

    try:
        reply = model_ask(
            purpose="dreaming.stage_a",
            messages=_prompt(channel, batch),
            schema=rules.SCHEMA,
            profile=LIGHT,
            actor=ACTOR,
            max_tokens=_reply_tokens(batch),
            check=lambda data: _rule_breach(channel, used, data),
            shrink=shrink,
        )
    except ModelError as exc:
        for usage_id in exc.usage_ids or [None]:
            run_count_call(run, usage_id)
        if outage(exc):  # not the batch's fault: the same batch is read again later
            raise RunDeferred(exc.reason) from None
        raise RunFailed(exc.reason) from None
    for usage_id in reply.usage_ids:
        run_count_call(run, usage_id)
    cut = rules.check(reply.data, batch_ids=used.ids, full=used.full)
    try:
        _write(run, channel, cursor, used, cut, usage_id=reply.usage_id)
    except DatabaseError as exc:
        raise RunFailed(f"database error, nothing written: {exc}".strip()) from None
    return used


def _write(run, channel, cursor_before: StageACursor, batch: Batch, cut: rules.Cut, *, usage_id) -> None:
    by_id = {m.id: m for m in batch.messages}
    with transaction.atomic():
        cursor = StageACursor.objects.select_for_update().get(pk=channel.pk)
        if cursor.run_id != run.pk:
            raise RunFailed("another run took the channel over; this batch was not written")
        if (cursor.message_ts, cursor.message_id) != (cursor_before.message_ts, cursor_before.message_id):
            raise RunFailed("the cursor moved while the model was reading; this batch was not written")
        episodes = []
        for e in cut.episodes:
            members = [by_id[i] for i in e["messages"]]
            threads = {m.thread for m in members}
            systems = list(dict.fromkeys(s.strip() for s in e.get("systems", []) if s.strip()))
            episodes.append(
                Episode(
                    channel=channel,
                    thread=threads.pop() if len(threads) == 1 else "",
                    store=batch.store,
                    topic=e["topic"].strip()[:300],
                    summary=e["summary"].strip(),
                    likely_question=e["likely_question"].strip(),
                    resolution=e["resolution"].strip(),
                    related_systems=systems,
                    start_ts=min(m.ts for m in members),
                    end_ts=max(m.ts for m in members),
                    dreaming_run=run.pk,
                )
            )
        Episode.objects.bulk_create(episodes)
        message_ids, episode_ids, links = [], [], []
        for episode, e in zip(episodes, cut.episodes, strict=True):
            message_ids += e["messages"]
            episode_ids += [episode.pk] * len(e["messages"])
            links += [
                Episode.evidence.through(episode_id=episode.pk, message_id=mid) for mid in e["evidence"]
            ]
        if message_ids:
            # One statement links every covered message to its episode (one UPDATE per episode
            # was a third of a batch's own time in the stage A benchmark).
            with connection.cursor() as cur:
                cur.execute(
                    "UPDATE knowledge_message m SET episode_id = v.episode FROM unnest(%s::bigint[], "
                    "%s::bigint[]) AS v(id, episode) WHERE m.id = v.id AND m.channel_id = %s "
                    "AND m.episode_id IS NULL",
                    [message_ids, episode_ids, channel.pk],
                )
                if cur.rowcount != len(message_ids):
                    raise RunFailed(
                        "some of the batch's messages are already in an episode; nothing was written"
                    )
        Episode.evidence.through.objects.bulk_create(links)
        if cut.covered:
            last = by_id[cut.covered[-1]]
            cursor.message_ts, cursor.message_id = last.ts, last.id
        cursor.seen_id = max(cursor.seen_id, *batch.ids)
        cursor.failures = 0  # the channel moves again: the next batch is read at full size
        cursor.save(update_fields=["message_ts", "message_id", "seen_id", "failures", "updated_at"])
        covered = len(cut.covered) - len(cut.noise)
        DreamingRun.objects.filter(pk=run.pk).update(
            batches=F("batches") + 1,
            messages=F("messages") + covered,
            noise=F("noise") + len(cut.noise),
            episodes=F("episodes") + len(episodes),
            left=len(cut.left),
        )
        audit_record(
            "dreaming.episodes_written",
            actor=ACTOR,
            store=batch.store,
            object_type="episode",
            object_ids=[e.pk for e in episodes],
            counts={
                "messages": covered,
                "noise": len(cut.noise),
                "left": len(cut.left),
                "episodes": len(episodes),
            },
            data={
                "channel": channel.pk,
                "cursor_from": cursor_before.message_id,
                "cursor_to": cursor.message_id,
                "usage": usage_id,
                "job": rules.VERSION,
            },
            dreaming_run=run.pk,
        )
        if episodes:
            transaction.on_commit(request_embedding_run)
