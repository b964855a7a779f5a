"""Writes the upgrade test's fixture through the REST API of the checkout it runs in (an earlier
commit of Brain, exported with `git archive`); see tests/ops/test_upgrade.py for how the dump
beside this file was made. Prints one line `EXPECT <json>` with what the test checks after
migrating to HEAD. Run as `manage.py shell -c "exec(open(PATH).read())"` with
BRAIN_ALLOWED_HOSTS=testserver."""

import json

from rest_framework.test import APIClient

from knowledge.conversations import services as conversations
from knowledge.embeddings.backlog import run_backlog
from knowledge.principal import Principal
from knowledge.principals import services
from tests import factory

system = Principal.system("upgrade-fixture")
agent = services.agent_create(actor=system, name="legacy", trusted=True)
intern = services.agent_create(actor=system, name="legacy-intern")
channel = conversations.channel_create(
    actor=system, name="legacy-room", kind="shared", person=None, agent=None, memory_scope="shared"
)
conversation = conversations.conversation_start(actor=system, agent=agent, channel=channel)
admin = factory.make_user("legacy-admin", role="admin")


def client(**who):
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {services.token_create(actor=system, **who)}")
    return c


agent_api, intern_api, admin_api = client(agent=agent), client(agent=intern), client(user=admin)


def ok(response, *codes):
    assert response.status_code in (codes or (200, 201)), (response.status_code, response.content[:500])
    return response.json()


memories = []
for text, ref in [
    ("The VPN drops after the 4.2 client update; reinstalling the profile fixes it.", "INC-101"),
    ("Nightly backups run at 02:00 UTC to the office NAS.", "INC-102"),
    ("The office wifi password rotates on the first Monday of each month.", "KB-7"),
]:
    memories.append(
        ok(
            agent_api.post(
                "/api/memory",
                {"scope": "agent", "text": text, "sources": [{"kind": "ticket", "ref": ref}]},
                format="json",
            )
        )["id"]
    )
queued = ok(
    intern_api.post(
        "/api/memory", {"scope": "agent", "text": "Bob may move to the night shift."}, format="json"
    )
)
ok(
    admin_api.post(
        "/api/messages",
        {
            "messages": [
                {
                    "channel": "legacy-room",
                    "speaker": "alice",
                    "text": "the vpn dropped again after the update",
                    "external_id": "u-1",
                },
                {
                    "channel": "legacy-room",
                    "speaker": "bob",
                    "text": "reinstalling the profile fixed it",
                    "external_id": "u-2",
                },
            ]
        },
        format="json",
    )
)
entry = ok(
    admin_api.post(
        "/api/entries",
        {"owner": "legacy", "name": "VPN runbook", "summary": "How to fix VPN drops."},
        format="json",
    )
)
run_backlog(max_seconds=120)
search = ok(
    agent_api.post(
        "/api/memory/search",
        {"agent": "legacy", "conversation": conversation.pk, "q": "vpn drops after the update", "k": 5},
        format="json",
    )
)
print(
    "EXPECT",
    json.dumps(
        {
            "memories": memories,
            "queued": queued["id"],
            "queued_status": queued["status"],
            "entry": entry["id"],
            "conversation": conversation.pk,
            "search_top": [search["results"][0]["kind"], search["results"][0]["id"]],
        }
    ),
)
