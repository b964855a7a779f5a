"""The governor, through the real HTTP client against the loopback model server."""

import datetime

import pytest
from django.utils import timezone

from knowledge.llm import (
    ModelOutputInvalid,
    ModelUnavailable,
    agent_model_set,
    model_availability,
    model_call,
    model_profile_save,
    profile_resolve,
)
from knowledge.models import AuditEvent, ModelUsage
from tests.factory import SYSTEM

SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1}},
    "required": ["text"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "Merge these."}]


def test_without_a_configured_model_nothing_is_called_and_the_reason_is_clear(world):
    with pytest.raises(ModelUnavailable) as info:
        model_call(purpose="test", messages=ASK)
    assert info.value.reason.startswith("not configured")
    assert "BRAIN_MODEL_BASE_URL" in info.value.reason
    assert model_availability().startswith("not configured")
    assert ModelUsage.objects.count() == 0


def test_a_structured_reply_is_validated_and_its_usage_recorded(world, model_stub):
    model_stub.reply_json({"text": "merged"}, usage={"prompt_tokens": 40, "completion_tokens": 5})
    reply = model_call(
        purpose="consolidation.merge",
        messages=ASK,
        schema=SCHEMA,
        profile="light",
        agent=world.copilot,
        actor=SYSTEM,
    )
    assert reply.data == {"text": "merged"}
    sent = model_stub.chat_requests()
    assert len(sent) == 1
    assert sent[0]["model"] == "stub-light"
    assert sent[0]["response_format"]["type"] == "json_schema"
    assert model_stub.schema_sent(sent[0])["required"] == ["text"]
    assert model_stub.requests[0]["headers"]["Authorization"] == "Bearer sk-stub-secret"
    usage = ModelUsage.objects.get()
    assert (usage.outcome, usage.profile, usage.purpose, usage.agent, usage.actor) == (
        "ok",
        "light",
        "consolidation.merge",
        world.copilot,
        "system:tests",
    )
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens, usage.attempts) == (
        40,
        5,
        45,
        1,
    )


def test_a_fenced_json_reply_is_accepted(world, model_stub):
    model_stub.reply_text('```json\n{"text": "ok"}\n```')
    assert model_call(purpose="t", messages=ASK, schema=SCHEMA).data == {"text": "ok"}


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("this is not json", "not JSON"),
        ('{"text": ""}', "does not match the schema"),
        ('{"txt": "x"}', "schema"),
    ],
)
def test_invalid_output_raises_and_is_recorded_as_invalid(world, model_stub, content, fragment):
    model_stub.reply_text(content)
    with pytest.raises(ModelOutputInvalid) as info:
        model_call(purpose="t", messages=ASK, schema=SCHEMA)
    assert fragment in info.value.reason
    usage = ModelUsage.objects.get()
    assert usage.outcome == "invalid"
    assert fragment in usage.error
    assert usage.total_tokens > 0  # the call was made and paid for


def test_a_server_error_is_retried_with_a_bound(world, model_stub):
    model_stub.reply_error(503)
    model_stub.reply_json({"text": "second time lucky"})
    assert model_call(purpose="t", messages=ASK, schema=SCHEMA).data["text"] == "second time lucky"
    assert ModelUsage.objects.get().attempts == 2

    model_stub.reset()
    for _ in range(5):
        model_stub.reply_error(500, "down")
    with pytest.raises(ModelUnavailable) as info:
        model_call(purpose="t", messages=ASK)
    assert info.value.reason.startswith("failing: HTTP 500")
    assert len(model_stub.chat_requests()) == 3  # 1 + BRAIN_MODEL_MAX_RETRIES
    failed = ModelUsage.objects.order_by("-id").first()
    assert (failed.outcome, failed.attempts, failed.total_tokens) == ("error", 3, 0)


def test_a_client_error_is_not_retried(world, model_stub):
    model_stub.reply_error(401, "bad key")
    model_stub.reply_json({"text": "never reached"})
    with pytest.raises(ModelUnavailable) as info:
        model_call(purpose="t", messages=ASK)
    assert "HTTP 401" in info.value.reason
    assert len(model_stub.chat_requests()) == 1


def test_a_body_that_is_not_json_is_an_error(world, model_stub):
    model_stub.reply_malformed()
    with pytest.raises(ModelUnavailable) as info:
        model_call(purpose="t", messages=ASK, schema=SCHEMA)
    assert "not JSON" in info.value.reason
    assert ModelUsage.objects.get().outcome == "error"


def test_a_slow_model_times_out(world, model_stub):
    model_profile_save(actor=SYSTEM, name="light", timeout_seconds=0.2, max_retries=0)
    model_stub.reply_delay(1.0, '{"text": "too late"}')
    with pytest.raises(ModelUnavailable) as info:
        model_call(purpose="t", messages=ASK, profile="light")
    assert "no answer within 0.2 s" in info.value.reason
    assert ModelUsage.objects.get().outcome == "timeout"


def test_the_profile_call_budget_refuses_the_next_call(world, model_stub):
    model_profile_save(actor=SYSTEM, name="light", daily_calls=2)
    model_stub.respond_with(lambda body: '{"text": "x"}')
    model_call(purpose="t", messages=ASK, profile="light")
    model_call(purpose="t", messages=ASK, profile="light")
    with pytest.raises(ModelUnavailable) as info:
        model_call(purpose="t", messages=ASK, profile="light")
    assert info.value.reason == "over budget: profile light made 2 of 2 calls today"
    assert len(model_stub.chat_requests()) == 2
    assert ModelUsage.objects.filter(outcome="refused").count() == 1
    assert model_availability("light").startswith("over budget")
    # The default profile has its own budget.
    model_call(purpose="t", messages=ASK)
    # A new day, a new budget.
    tomorrow = timezone.now() + datetime.timedelta(days=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(timezone, "now", lambda: tomorrow)
        model_call(purpose="t", messages=ASK, profile="light")


def test_the_token_budget_counts_the_reserved_tokens(world, model_stub):
    model_profile_save(actor=SYSTEM, name="light", daily_tokens=2000)
    model_stub.respond_with(
        lambda body: {"content": "x", "usage": {"prompt_tokens": 1500, "completion_tokens": 100}}
    )
    model_call(purpose="t", messages=ASK, profile="light", max_tokens=100)
    with pytest.raises(ModelUnavailable) as info:
        model_call(purpose="t", messages=ASK, profile="light", max_tokens=900)
    assert "used 1600 of 2000 tokens" in info.value.reason


def test_an_agents_own_budget_is_enforced_across_profiles(world, model_stub):
    agent_model_set(actor=SYSTEM, agent=world.copilot, profile="default", daily_calls=1, daily_tokens=None)
    model_stub.respond_with(lambda body: "ok")
    model_call(purpose="t", messages=ASK, agent=world.copilot)
    with pytest.raises(ModelUnavailable) as info:
        model_call(purpose="t", messages=ASK, agent=world.copilot, profile="light")
    assert info.value.reason == "over budget: agent copilot made 1 of 1 calls today"
    model_call(purpose="t", messages=ASK, agent=world.scribe)  # another agent is not affected


def test_an_agent_uses_its_own_profile(world, model_stub):
    model_profile_save(actor=SYSTEM, name="smart", model="smart-model")
    agent_model_set(actor=SYSTEM, agent=world.scribe, profile="smart", daily_calls=None, daily_tokens=None)
    model_stub.respond_with(lambda body: "answer")
    reply = model_call(purpose="gate", messages=ASK, agent=world.scribe)
    assert (reply.profile, reply.model) == ("smart", "smart-model")
    assert model_stub.chat_requests()[0]["model"] == "smart-model"
    assert model_stub.requests[0]["path"] == "/v1/chat/completions"  # the endpoint is inherited


def test_unknown_and_disabled_profiles_are_unavailable(world, model_stub):
    with pytest.raises(ModelUnavailable, match="no model profile named nope"):
        model_call(purpose="t", messages=ASK, profile="nope")
    model_profile_save(actor=SYSTEM, name="light", enabled=False)
    with pytest.raises(ModelUnavailable, match="disabled"):
        model_call(purpose="t", messages=ASK, profile="light")
    assert model_stub.chat_requests() == []


def test_profiles_never_expose_or_audit_the_key(world, model_stub):
    model_profile_save(actor=SYSTEM, name="light", api_key="sk-very-secret")
    public = profile_resolve("light").public()
    assert public["api_key_set"] is True
    assert "sk-very-secret" not in repr(public)
    event = AuditEvent.objects.get(action="model_profile.saved")
    assert "sk-very-secret" not in repr(event.data) + repr(list(event.revisions.values()))


def test_a_failing_profile_says_so_until_a_call_succeeds(world, model_stub):
    from knowledge.llm import profile_status

    model_stub.respond_with(lambda body: {"status": 502, "message": "bad gateway"})
    with pytest.raises(ModelUnavailable):
        model_call(purpose="t", messages=ASK, profile="light")
    status = profile_status(profile_resolve("light"))
    assert status["unavailable"].startswith("failing:") and "HTTP 502" in status["unavailable"]
    assert status["calls_today"] == 1 and status["api_key_set"] is True
    model_stub.respond_with(lambda body: "fine")
    model_call(purpose="t", messages=ASK, profile="light")
    assert profile_status(profile_resolve("light"))["unavailable"] == ""


def test_the_stub_also_serves_embeddings(model_stub):
    import httpx

    response = httpx.post(
        f"{model_stub.url}/embeddings", json={"input": ["vpn reset", "reset vpn"], "model": "m"}
    )
    data = response.json()["data"]
    assert len(data) == 2 and len(data[0]["embedding"]) == 384
    assert data[0]["embedding"] == data[1]["embedding"]  # same words, same vector
