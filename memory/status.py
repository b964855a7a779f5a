"""What GET /api/status reports about recall: the embedding configuration, vector coverage and
the re-embedding backlog per kind, evidence counts and pinned-memo budgets."""

from django.db.models import Count

from knowledge import embeddings
from knowledge.models import Agent, Channel, Conversation, Episode, Heartbeat, Message, PinnedMemo
from knowledge.tokens import count_tokens
from knowledge.vectors import coverage
from memory.memo import memo_budget_tokens


def recall_status() -> dict:
    try:
        config = embeddings.describe()
        config_error = ""
    except embeddings.EmbeddingError as exc:
        config, config_error = {"backend": "invalid"}, str(exc)
    cover = coverage() if not config_error else {}
    beat = Heartbeat.objects.filter(name="worker").values_list("beat_at", flat=True).first()
    memos = []
    budget = memo_budget_tokens()
    for memo in PinnedMemo.objects.select_related("agent").order_by("agent__name"):
        tokens = count_tokens(memo.text)
        memos.append(
            {"agent": memo.agent.name, "tokens": tokens, "budget_tokens": budget, "over": tokens > budget}
        )
    return {
        "embeddings": {**config, **({"error": config_error} if config_error else {})},
        "backlog": {kind: c["backlog"] for kind, c in cover.items()},
        "vector_coverage": cover,
        "evidence": {
            "channels": Channel.objects.count(),
            "messages": Message.objects.count(),
            "episodes": Episode.objects.count(),
            "open_conversations": Conversation.objects.filter(status=Conversation.OPEN).count(),
        },
        "agents": Agent.objects.aggregate(n=Count("id"))["n"],
        "pinned_memos": memos,
        "worker_heartbeat": beat,
    }
