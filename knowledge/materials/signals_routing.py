"""External signals and their routing rules. A signal (source, type, text, data, occurred_at,
external_id) is kept as a message in the channel its rule names, idempotent by (source,
external_id). The rule's memory scope is the channel's routing rule for the next conversation
(messages keep the store they arrived with, so a changed rule moves no old content across a
visibility boundary). A rule with `learn: false` (prices, stock levels: values that change by
the minute) keeps its signals as searchable messages that Dreaming never curates."""

import datetime
import json

from django.db import connection, transaction
from django.utils import timezone

from knowledge.audit.services import audit_record
from knowledge.conversations.services import MessageIn, channel_open, message_ingest
from knowledge.errors import Conflict, Invalid, NotFound
from knowledge.models import Channel, Message, Signal, SignalRule
from knowledge.principal import Principal


def rule_for(source: str, type: str) -> SignalRule | None:
    """The most specific rule: source + type, else the source's catch-all (type blank)."""
    rules = {r.type: r for r in SignalRule.objects.filter(source=source, type__in=[type, ""])}
    return rules.get(type) or rules.get("")


def signal_rule_save(
    *,
    actor: Principal,
    rule_id: int | None,
    source: str,
    type: str,
    channel: str,
    memory_scope: str,
    learn: bool,
) -> SignalRule:
    """Create (rule_id None) or change a routing rule; admins only (the views check). A rule
    may not route into a direct message."""
    with transaction.atomic():
        target = Channel.objects.filter(name=channel).first()
        if target is not None and target.kind == Channel.KIND_DM:
            raise Invalid({"channel": f"{channel} is a direct message; signals go to shared channels."})
        if rule_id is None:
            if SignalRule.objects.filter(source=source, type=type).exists():
                raise Conflict(f"A rule for {source}/{type or '*'} exists already; change it instead.")
            rule = SignalRule(source=source, type=type)
            before = None
        else:
            rule = SignalRule.objects.select_for_update().filter(pk=rule_id).first()
            if rule is None:
                raise NotFound(f"No signal routing rule {rule_id}.")
            before = _snap(rule)
            clash = SignalRule.objects.filter(source=source, type=type).exclude(pk=rule.pk).exists()
            if clash:
                raise Conflict(f"A rule for {source}/{type or '*'} exists already.")
            rule.source, rule.type = source, type
        rule.channel, rule.memory_scope, rule.learn = channel, memory_scope, learn
        rule.updated_by = actor.name
        rule.save()
        audit_record(
            "signal_rule.saved",
            actor=actor,
            object_type="signal_rule",
            object_ids=[rule.pk],
            data={"before": before, "after": _snap(rule)},
        )
    return rule


def signal_rule_delete(*, actor: Principal, rule_id: int) -> None:
    with transaction.atomic():
        rule = SignalRule.objects.select_for_update().filter(pk=rule_id).first()
        if rule is None:
            raise NotFound(f"No signal routing rule {rule_id}.")
        before = _snap(rule)
        rule.delete()
        audit_record(
            "signal_rule.deleted",
            actor=actor,
            object_type="signal_rule",
            object_ids=[rule_id],
            data={"before": before},
        )


def _snap(rule: SignalRule) -> dict:
    return {
        "source": rule.source,
        "type": rule.type,
        "channel": rule.channel,
        "memory_scope": rule.memory_scope,
        "learn": rule.learn,
    }


def signal_receive(
    *,
    actor: Principal,
    source: str,
    type: str,
    text: str,
    external_id: str,
    data: dict | None = None,
    occurred_at: datetime.datetime | None = None,
) -> tuple[Signal, bool]:
    """Store one signal as a message in its rule's channel (one transaction). Returns (signal,
    duplicate): a signal already received (same source and external_id) is returned as it was
    stored, and nothing is written."""
    existing = (
        Signal.objects.select_related("message__channel")
        .filter(source=source, external_id=external_id)
        .first()
    )
    if existing is not None:
        return existing, True
    rule = rule_for(source, type)
    if rule is None:
        raise Invalid({"source": f"No signal routing rule for {source}/{type}; an admin adds one first."})
    try:
        signal_id = _signal_store(
            actor=actor,
            rule=rule,
            source=source,
            type=type,
            text=text,
            external_id=external_id,
            data=data,
            occurred_at=occurred_at,
        )
    except _AlreadyReceived:
        # The same signal sent at the same moment: the first one to commit stored it, and this
        # one's transaction (channel, message) was rolled back, so it wrote nothing.
        return Signal.objects.select_related("message__channel").get(
            source=source, external_id=external_id
        ), True
    return Signal.objects.select_related("message__channel").get(pk=signal_id), False


class _AlreadyReceived(Exception):
    pass


def _signal_store(*, actor, rule, source, type, text, external_id, data, occurred_at) -> int:
    with transaction.atomic():
        # Signals into one channel take turns: the first of several identical ones sent at once
        # creates the channel (when new) and the message, the next see them committed.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"signal-channel:{rule.channel}"])
        if Signal.objects.filter(source=source, external_id=external_id).exists():
            raise _AlreadyReceived
        channel = Channel.objects.select_for_update().filter(name=rule.channel).first()
        if channel is None:
            channel = channel_open(
                actor=Principal.system("signals"), name=rule.channel, memory_scope=rule.memory_scope
            )
        elif channel.kind == Channel.KIND_DM:
            raise Conflict(f"Channel {channel.name} is a direct message; the rule cannot route there.")
        elif channel.memory_scope != rule.memory_scope:
            # The rule changed: the channel's next conversations and messages follow it; the
            # messages already stored keep their store.
            channel.memory_scope = rule.memory_scope
            channel.save(update_fields=["memory_scope"])
            audit_record(
                "channel.scope_changed",
                actor=actor,
                object_type="channel",
                object_ids=[channel.pk],
                reason=f"signal routing rule {rule.pk}",
                data={"memory_scope": rule.memory_scope},
            )
        # The signal is posted under its rule; the integration that sent it gains no part in the
        # channel (posting its own messages there takes an admin's grant, `can_post_message`).
        result = message_ingest(
            actor=actor,
            messages=[
                MessageIn(
                    channel=channel,
                    speaker=f"person:{source}",
                    text=text,
                    ts=occurred_at or timezone.now(),
                    external_id=f"signal:{source}:{external_id}",
                )
            ],
        )
        message_id = result.ids[0]
        if not rule.learn:
            Message.objects.filter(pk=message_id).update(learn=False)
        # Idempotent by the (source, external_id) constraint itself, whatever got past the check
        # above: a row that is already there makes this transaction roll back as a duplicate.
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO knowledge_signal (source, type, external_id, text, data, occurred_at, rule_id, "
                "message_id, learn, posted_by, created_at) VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, now()) "
                "ON CONFLICT (source, external_id) DO NOTHING RETURNING id",
                [
                    source,
                    type,
                    external_id,
                    text,
                    json.dumps(data or {}),
                    occurred_at or timezone.now(),
                    rule.pk,
                    message_id,
                    rule.learn,
                    f"{actor.kind_label}:{actor.name}",
                ],
            )
            row = cursor.fetchone()
        if row is None:
            raise _AlreadyReceived
        signal_id = row[0]
        audit_record(
            "signal.received",
            actor=actor,
            store=Message.objects.filter(pk=message_id).values_list("store", flat=True).first() or "",
            object_type="signal",
            object_ids=[signal_id],
            data={
                "source": source,
                "type": type,
                "rule": rule.pk,
                "learn": rule.learn,
                "message": message_id,
            },
        )
    return signal_id
