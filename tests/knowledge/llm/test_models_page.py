"""The models page: configuration without secrets, budget use, recent calls and their errors."""

from knowledge.models import AuditEvent, Memory, ModelProfile
from tests import factory
from tests.memory.consolidation.test_consolidation import remember


def test_malformed_model_output_writes_nothing_and_shows_on_the_models_page(client, world, model_stub):
    remember(world.copilot, "Alice prefers e-mail over phone calls for ticket updates")
    remember(world.copilot, "Alice prefers e-mail over phone calls, except for outages")
    model_stub.reply_text('{"text": ')  # cut off mid-JSON
    model_stub.reply_text('{"text": ')  # and again when asked to repair it
    count = Memory.objects.count()
    client.force_login(world.reviewer)
    client.post("/consolidation/run")
    factory.run_queued_jobs()  # the worker's part
    assert Memory.objects.count() == count

    page = client.get("/models/")
    body = page.content.decode()
    assert page.status_code == 200
    assert "consolidation.merge" in body
    assert "invalid" in body and "output is not JSON" in body
    assert "sk-stub-secret" not in body  # never the key
    assert model_stub.url in body and "stub-light" in body
    assert "2 failed today" in body  # the reply and its one repair
    failed = client.get(
        "/models/?show=failed", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="calls"
    ).content.decode()
    assert "<html" not in failed and "output is not JSON" in failed


def test_each_profile_says_why_it_is_unavailable(client, world):
    client.force_login(world.reviewer)
    page = client.get("/models/")
    profiles = {p["name"]: p for p in page.context["profiles"]}
    assert set(profiles) >= {"default", "light"}
    assert profiles["light"]["unavailable"].startswith("not configured")


def test_admins_edit_profiles_and_agent_budgets_reviewers_cannot(client, world, model_stub):
    client.force_login(world.reviewer)
    assert client.post("/models/profiles", {"name": "smart", "model": "big"}).status_code == 403
    client.force_login(world.admin)
    response = client.post(
        "/models/profiles",
        {
            "name": "smart",
            "model": "big-model",
            "api_key": "sk-admin-typed",
            "daily_calls": "5",
            "enabled": "on",
        },
    )
    assert response.status_code == 302
    profile = ModelProfile.objects.get(name="smart")
    assert (profile.model, profile.api_key, profile.daily_calls) == ("big-model", "sk-admin-typed", 5)
    body = client.get("/models/").content.decode()
    assert "big-model" in body and "sk-admin-typed" not in body

    client.post("/models/agents/scribe", {"profile": "smart", "daily_calls": "7", "daily_tokens": ""})
    world.scribe.refresh_from_db()
    assert (world.scribe.model_profile, world.scribe.model_daily_calls, world.scribe.model_daily_tokens) == (
        "smart",
        7,
        None,
    )
    assert AuditEvent.objects.filter(action="agent.model_updated").count() == 1
    # An empty key field keeps the stored key.
    client.post("/models/profiles", {"name": "smart", "model": "big-model-2", "enabled": "on"})
    profile.refresh_from_db()
    assert (profile.model, profile.api_key) == ("big-model-2", "sk-admin-typed")
