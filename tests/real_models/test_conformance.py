"""Every model job once against a real server (make test-models). The assertions are on what was
recorded, never on the model's text: a schema was sent as structured output, every request fit
the context (the server refused none), every call ended ok, invalid or cut (repaired or
refused, never an error), and nothing was written from a reply that failed."""

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge.models import Conversation, Episode, Memory, ModelUsage
from tests import factory
from tests.real_models.conftest import CONTEXT

pytestmark = pytest.mark.real_model
FINE = {ModelUsage.OK, ModelUsage.INVALID, ModelUsage.CUT}


def recorded(job: str, sent: list[dict], summary: dict) -> dict:
    usage = list(ModelUsage.objects.order_by("pk"))
    assert usage, "the job made no model call"
    outcomes = Counter(u.outcome for u in usage)
    summary[job] = row = {
        "calls": len(usage),
        "seconds": round(sum(u.latency_ms for u in usage) / 1000, 1),
        "outcomes": dict(outcomes),
        "structured_output": sorted({(b.get("response_format") or {}).get("type", "none") for b in sent}),
        "prompt_tokens_max": max(u.prompt_tokens for u in usage),
        "reply_budget_max": max(b.get("max_tokens", 0) for b in sent),
    }
    assert set(outcomes) <= FINE, [(u.outcome, u.error) for u in usage]  # no refusal, no timeout
    for body in sent:
        assert (body.get("response_format") or {}).get("type") in ("json_schema", "json_object")
        assert body["max_tokens"] <= CONTEXT // 2
    budget = max(b["max_tokens"] for b in sent)
    for u in usage:
        assert u.prompt_tokens + budget <= CONTEXT or u.outcome != ModelUsage.OK
    return row


def test_distiller(world, real_model, summary):
    from curation.distiller import distill_conversation
    from curation.models import DistillerRun

    conversation = factory.make_conversation(world.copilot, world.general)
    start = timezone.now() - timedelta(minutes=30)
    factory.post_messages(
        world.general,
        [
            {"speaker": "ana", "text": "Please send ticket updates by e-mail, never by phone.", "ts": start},
            {
                "speaker": "copilot",
                "text": "Noted: e-mail for ticket updates.",
                "ts": start + timedelta(minutes=1),
            },
            {
                "speaker": "ana",
                "text": "The VPN client must be 5.2.1 or newer.",
                "ts": start + timedelta(minutes=2),
            },
        ],
    )
    Conversation.objects.filter(pk=conversation.pk).update(
        status=Conversation.FINISHED, started_at=start - timedelta(minutes=1), finished_at=timezone.now()
    )
    run = distill_conversation(conversation.pk)
    recorded("distiller", real_model, summary)["written"] = f"{run.state}: {run.reason}"[:160]
    written = Memory.objects.filter(author_kind="distiller")
    if run.state == DistillerRun.DONE:
        assert all(m.text.strip() and m.status == Memory.QUEUED for m in written)
    else:
        assert not written.exists(), run.reason


def test_stage_a(world, real_model, summary):
    from curation.dreaming.stage_a.services import stage_a_run
    from curation.models import DreamingRun

    ids = factory.post_messages(
        world.general,
        [
            {"speaker": "ana", "text": "The VPN drops every hour since this morning."},
            {"speaker": "bob", "text": "Client 5.2.1 fixes it; upgrade from the portal."},
            {"speaker": "ana", "text": "Upgraded, it works now. Thanks!"},
        ],
    )
    run = stage_a_run(channel=world.general, trigger=DreamingRun.MANUAL, max_seconds=600)
    recorded("dreaming stage A", real_model, summary)["written"] = f"{run.state}: {run.reason}"[:160]
    episodes = Episode.objects.filter(channel=world.general)
    if run.state == DreamingRun.DONE:
        covered = set(Episode.objects.values_list("messages", flat=True))
        assert covered <= set(ids)
    else:
        assert not episodes.exists(), run.reason


def test_stage_b(world, real_model, summary):
    from curation.dreaming.stage_b.services import stage_b_run
    from curation.models import DreamingRun, StageBCursor
    from knowledge.models import Entry, Message

    factory.make_conversation(world.copilot, world.general)
    (mid,) = factory.post_messages(
        world.general, [{"speaker": "alice", "text": "Dana works for Acme since March."}]
    )
    message = Message.objects.get(pk=mid)
    episode = Episode.objects.create(
        channel=world.general,
        store=message.store,
        topic="Dana's employer",
        summary="Alice said Dana works for Acme since March.",
        start_ts=message.ts,
        end_ts=message.ts,
    )
    Message.objects.filter(pk=mid).update(episode=episode)
    run = stage_b_run(agent=world.copilot, trigger=DreamingRun.MANUAL)
    recorded("dreaming stage B", real_model, summary)["written"] = f"{run.state}: {run.reason}"[:160]
    cursor = StageBCursor.objects.get(agent=world.copilot)
    if run.state != DreamingRun.DONE:
        assert cursor.episode_id == 0 and not Entry.objects.exists(), run.reason


def test_materials(world, real_model, summary):
    from knowledge.materials.learning import material_learn
    from knowledge.models import Entry, Material
    from tests.curation.materials.test_learning import _upload

    material_id = _upload(world, "notes.md")
    material_learn(material_id)
    recorded("materials", real_model, summary)
    material = Material.objects.get(pk=material_id)
    summary["materials"]["learned_with"] = (
        material.learned_with or f"{material.state}: {material.reason}"[:200]
    )
    if material.state != Material.LEARNED:  # with the model, or plainly; else it says why
        assert material.state == Material.FAILED and material.reason
        assert not Entry.objects.exists(), material.reason


def test_consolidation_merge(world, real_model, summary):
    from memory.consolidation import consolidation_run
    from tests.factory import SYSTEM
    from tests.memory.consolidation.test_consolidation import remember

    a = remember(world.copilot, "Alice prefers e-mail over phone calls for ticket updates")
    b = remember(world.copilot, "Alice prefers e-mail over phone calls, except for outages")
    plan = consolidation_run(actor=SYSTEM, mode="propose")
    recorded("consolidation merge", real_model, summary)
    a.refresh_from_db()
    b.refresh_from_db()
    assert a.status == b.status == Memory.ACTIVE  # propose mode: the originals stay in use
    summary["consolidation merge"]["plan"] = plan.state


def test_history_summary(world, real_model, summary):
    from memory.history.tasks import summary_fold
    from memory.models import ConversationSummary

    conversation = factory.make_conversation(world.copilot, world.general)
    factory.post_messages(
        world.general,
        [
            {"speaker": ["ana", "copilot"][i % 2], "text": f"Turn {i}: the billing export job {i} is late."}
            for i in range(8)
        ],
    )
    response = world.client("copilot").post(
        "/api/agents/copilot/context", {"conversation": conversation.pk, "q": "billing"}, format="json"
    )
    assert response.status_code == 200
    assert not ModelUsage.objects.exists()  # the request did not call the model
    history = next(s for s in response.json()["sections"] if s["name"] == "history")
    summary_fold(conversation.pk, history["turns"][0]["id"])
    recorded("history summary", real_model, summary)
    stored = ConversationSummary.objects.get(conversation=conversation)
    summary["history summary"]["method"] = stored.method
