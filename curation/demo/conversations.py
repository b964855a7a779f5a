"""Demo data for conversations and recall: a few days of messages in the demo channels (with a
thread and a rare error code), and the copilot's pinned memo. Idempotent (external ids)."""

from datetime import timedelta

from django.utils import timezone

from knowledge.conversations import services as messages
from knowledge.models import PinnedMemo
from memory.recall.memo import memo_update

CHAT = {
    "general": [
        ("carol", "Lunch on Friday is tacos in the big meeting room.", "", 6),
        ("bob", "The office wifi password changed: it is now heron-417.", "", 5),
        ("alice", "Who owns the billing-reconciler service these days?", "owners", 4),
        ("bob", "Mateo took it over from Judy last month.", "owners", 4),
        ("alice", "Thanks!", "owners", 4),
    ],
    "vpn-support": [
        ("alice", "Since this morning the VPN client refuses to connect from home.", "", 3),
        ("bob", "What does it say exactly?", "", 3),
        ("alice", "Error AUTH-7731, then 'certificate chain untrusted'.", "", 3),
        (
            "bob",
            "We rotated the intermediate cert last night: delete the old profile and re-import it.",
            "",
            3,
        ),
        ("alice", "That worked.", "", 3),
    ],
    "dm-alice": [
        ("alice", "Quick note: I'm vegetarian since the new year, no barbecue for me at team events.", "", 2),
        ("alice", "My daughter starts school in March, so I leave at 15:00 on Mondays.", "", 1),
    ],
}
MEMO = "Answer in the user's language. Cite ticket ids when you use them. Never share passwords."


def seed_conversations(*, actor, agents, channels) -> int:
    now = timezone.now()
    stored = 0
    for channel_name, rows in CHAT.items():
        channel = channels[channel_name]
        batch = [
            messages.MessageIn(
                channel=channel,
                speaker=speaker,
                text=text,
                thread=thread,
                ts=now - timedelta(days=days, minutes=60 - i),
                external_id=f"demo-{channel_name}-{i}",
            )
            for i, (speaker, text, thread, days) in enumerate(rows)
        ]
        stored += messages.message_ingest(actor=actor, messages=batch).stored
    if not PinnedMemo.objects.filter(agent=agents["copilot"]).exists():
        memo_update(actor=actor, agent=agents["copilot"], text=MEMO, reason="demo")
    return stored
