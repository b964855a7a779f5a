"""What real model servers need from the governor: the schema sent as structured output (with a
fallback found once), requests that fit the context, cut replies told apart and repaired, no
identical retries, no duplicate request after a timeout, one log line per call."""

import logging

import pytest

from knowledge.llm import (
    ModelOutputInvalid,
    ModelPromptTooLong,
    ModelReplyCut,
    ModelUnavailable,
    model_ask,
    model_call,
    model_profile_save,
    profile_resolve,
)
from knowledge.llm.wire import portable, portable_problems
from knowledge.models import ModelEndpointState, ModelUsage
from tests.factory import SYSTEM

SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "minLength": 1, "maxLength": 2000, "pattern": r"\S"},
        "note": {"type": "string", "maxLength": 20},
    },
    "required": ["text"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "Merge these: Ana likes tea. Ana likes green tea."}]


def ask(**kwargs):
    params = dict(purpose="consolidation.merge", messages=ASK, schema=SCHEMA, profile="light", actor=SYSTEM)
    params.update(kwargs)
    return params


def test_the_schema_is_sent_strict_in_the_portable_subset(world, model_stub):
    model_stub.reply_json({"text": "Ana likes green tea.", "note": None})
    reply = model_call(**ask(max_tokens=100))
    assert reply.data == {"text": "Ana likes green tea."}  # the wire's null means "not given"
    fmt = model_stub.chat_requests()[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    sent = model_stub.schema_sent(model_stub.chat_requests()[0])
    assert portable_problems(sent) == []
    assert sent["required"] == ["text", "note"] and sent["properties"]["note"]["type"] == ["string", "null"]
    assert "maxLength" not in str(sent) and "pattern" not in str(sent)


def test_the_bounds_left_off_the_wire_are_still_checked_in_code(world, model_stub):
    model_stub.reply_json({"text": "   "})
    with pytest.raises(ModelOutputInvalid) as info:
        model_call(**ask(max_tokens=100))
    assert "does not match" in info.value.reason


def test_a_server_without_json_schema_falls_back_once_and_it_is_recorded(world, model_stub):
    model_stub.json_schema_supported = False
    model_stub.reply_json({"text": "one"})
    model_stub.reply_json({"text": "two"})
    assert model_call(**ask(max_tokens=100)).data == {"text": "one"}
    first = model_stub.chat_requests()
    assert [r["response_format"]["type"] for r in first] == ["json_schema", "json_object"]
    assert "schema" in first[1]["response_format"]  # llama-cpp-python's form: json_object with a schema
    state = ModelEndpointState.objects.get(profile="light")
    assert state.structured_output == "json_object_schema" and "json_schema refused" in state.structured_note
    model_stub.requests.clear()
    assert model_call(**ask(max_tokens=100)).data == {"text": "two"}
    assert [r["response_format"]["type"] for r in model_stub.chat_requests()] == ["json_object"]
    assert profile_resolve("light").structured_output == "json_object_schema"


def test_llama_cpp_pythons_500_for_json_schema_falls_back_too(world, model_stub):
    model_stub.reply_error(
        500,
        "1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\"}",
    )
    model_stub.reply_json({"text": "one"})
    assert model_call(**ask(max_tokens=100)).data == {"text": "one"}
    sent = model_stub.chat_requests()
    assert [r["response_format"]["type"] for r in sent] == ["json_schema", "json_object"]
    assert sent[1]["response_format"]["schema"]["required"] == ["text", "note"]


def test_json_object_can_be_set_per_profile(world, model_stub):
    model_profile_save(actor=SYSTEM, name="light", structured_output="json_object")
    model_stub.reply_json({"text": "one"})
    model_call(**ask(max_tokens=100))
    assert model_stub.chat_requests()[0]["response_format"] == {"type": "json_object"}


def test_a_request_over_the_context_is_never_sent(world, model_stub):
    model_profile_save(actor=SYSTEM, name="light", context_tokens=1000)
    with pytest.raises(ModelPromptTooLong) as info:
        model_call(**ask(max_tokens=2000))
    assert "context of 1000 tokens" in info.value.reason
    assert model_stub.chat_requests() == []
    assert ModelUsage.objects.get().outcome == ModelUsage.REFUSED


def test_the_stub_refuses_like_vllm_and_the_context_it_names_is_kept(world, model_stub):
    model_stub.context_tokens = 600  # the server is smaller than Brain was told
    with pytest.raises(ModelUnavailable) as info:
        model_call(**ask(max_tokens=1000))
    assert "maximum context length is 600 tokens" in info.value.reason
    assert len(model_stub.chat_requests()) == 1  # a 400 is not retried
    assert profile_resolve("light").context_tokens == 600
    with pytest.raises(ModelPromptTooLong):  # found out once: the next one is not sent
        model_call(**ask(max_tokens=1000))
    assert len(model_stub.chat_requests()) == 1


def test_a_cut_reply_is_reported_as_cut_not_as_bad_json(world, model_stub):
    model_stub.reply_cut('{"text": "Ana likes')
    with pytest.raises(ModelReplyCut) as info:
        model_call(**ask(max_tokens=100))
    assert "cut off at its budget of 100 tokens" in info.value.reason
    assert "not JSON" not in info.value.reason
    assert ModelUsage.objects.get().outcome == ModelUsage.CUT


def test_a_cut_reply_is_asked_again_once_with_a_larger_budget(world, model_stub):
    # cut at its whole budget, quickly: twice the budget finishes well within the timeout
    model_stub.reply_cut('{"text": "Ana likes', usage={"prompt_tokens": 30, "completion_tokens": 100})
    model_stub.reply_json({"text": "Ana likes green tea."})
    reply = model_ask(**ask(max_tokens=100))
    assert reply.data["text"] == "Ana likes green tea." and reply.repaired == "cut"
    budgets = [r["max_tokens"] for r in model_stub.chat_requests()]
    assert budgets == [100, 200]
    assert len(reply.usage_ids) == 2


def test_a_cut_reply_without_room_is_asked_again_with_smaller_input(world, model_stub):
    model_profile_save(actor=SYSTEM, name="light", context_tokens=300)
    small = [{"role": "user", "content": "Merge: Ana likes tea."}]
    model_stub.reply_cut('{"text": "Ana')
    model_stub.reply_json({"text": "Ana likes tea."})
    reply = model_ask(**ask(max_tokens=200, shrink=lambda: small))
    sent = model_stub.chat_requests()
    assert [r["max_tokens"] for r in sent] == [200, 200]
    assert sent[1]["messages"] == small and reply.data["text"] == "Ana likes tea."


def test_with_nothing_to_change_a_cut_reply_is_not_sent_again(world, model_stub):
    model_profile_save(actor=SYSTEM, name="light", context_tokens=300)
    model_stub.reply_cut('{"text": "Ana')
    with pytest.raises(ModelReplyCut) as info:
        model_ask(**ask(max_tokens=200, shrink=lambda: ASK))  # "smaller" is the same request
    assert len(model_stub.chat_requests()) == 1
    assert info.value.usage_ids and len(info.value.usage_ids) == 1


def test_an_invalid_reply_is_repaired_once_with_the_error_quoted_back(world, model_stub):
    model_stub.reply_json({"summary": "wrong shape"})
    model_stub.reply_json({"text": "Ana likes green tea."})
    reply = model_ask(**ask(max_tokens=100))
    assert reply.data["text"] == "Ana likes green tea."
    second = model_stub.chat_requests()[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": '{"summary": "wrong shape"}'}
    assert "That reply was refused" in second[-1]["content"]
    assert "'text' is a required property" in second[-1]["content"]


def test_a_code_rule_failure_is_repaired_once_then_fails(world, model_stub):
    model_stub.reply_json({"text": "The merged statement"})
    model_stub.reply_json({"text": "The merged statement"})
    with pytest.raises(ModelOutputInvalid) as info:
        model_ask(
            **ask(
                max_tokens=100,
                check=lambda d: "it repeats the prompt's example" if "merged" in d["text"] else "",
            )
        )
    assert "repeats the prompt's example" in info.value.reason
    assert len(model_stub.chat_requests()) == 2
    assert "repeats the prompt's example" in model_stub.prompt(model_stub.chat_requests()[1])
    assert set(ModelUsage.objects.values_list("outcome", flat=True)) == {ModelUsage.INVALID}


def test_a_timeout_is_not_followed_by_a_duplicate_request(world, model_stub):
    model_profile_save(actor=SYSTEM, name="light", timeout_seconds=0.3, max_retries=2)
    model_stub.reply_delay(1.5, '{"text": "late"}')
    with pytest.raises(ModelUnavailable) as info:
        model_ask(**ask(max_tokens=100))
    assert "no answer within 0.3 s" in info.value.reason
    assert len(model_stub.chat_requests()) == 1


def test_a_server_error_is_still_retried(world, model_stub):
    model_stub.reply_error(503)
    model_stub.reply_json({"text": "ok"})
    assert model_call(**ask(max_tokens=100)).data == {"text": "ok"}
    assert len(model_stub.chat_requests()) == 2


def test_one_log_line_per_call_without_the_prompt(world, model_stub, caplog):
    model_stub.reply_json(
        {"text": "Ana likes green tea."}, usage={"prompt_tokens": 31, "completion_tokens": 7}
    )
    with caplog.at_level(logging.INFO, logger="brain.model"):
        model_call(**ask(max_tokens=100))
    lines = [r.getMessage() for r in caplog.records if r.name == "brain.model"]
    assert len(lines) == 1
    line = lines[0]
    for part in (
        "job=consolidation.merge",
        "profile=light",
        "model=stub-light",
        "prompt_tokens=31",
        "completion_tokens=7",
        "outcome=ok",
        "ms=",
    ):
        assert part in line
    assert "Ana" not in line


def test_a_json_error_names_its_position_once(world, model_stub):
    model_stub.reply_text('{"text": "unterminated')
    with pytest.raises(ModelOutputInvalid) as info:
        model_call(**ask(max_tokens=100))
    assert "starting at character 9" in info.value.reason
    assert "at at" not in info.value.reason


def test_portable_turns_optional_into_nullable_and_drops_bounds():
    wire = portable(SCHEMA)
    assert wire == {
        "type": "object",
        "properties": {"text": {"type": "string"}, "note": {"type": ["string", "null"]}},
        "required": ["text", "note"],
        "additionalProperties": False,
    }
    assert portable_problems({"type": "object"}) == ["$: a free-form object (no properties)"]


def test_nullable_structure_goes_over_the_wire_as_anyof_so_grammars_keep_it():
    """llama-cpp-python's grammar converter drops items, properties and enum from a node typed
    [X, "null"] (materials came back as sources ["1"], aliases [["1"], ["2"]]); inside
    anyOf [X, null] it keeps them. Plain scalars stay [X, "null"]."""
    schema = {
        "type": "object",
        "properties": {
            "sources": {"type": "array", "items": {"type": "integer"}},
            "aliases": {"type": ["array", "null"], "items": {"type": "string"}, "maxItems": 5},
            "kind": {"type": "string", "enum": ["fact", "rule"]},
            "note": {"type": "string"},
        },
        "required": ["aliases"],
    }
    wire = portable(schema)["properties"]
    assert wire["sources"] == {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]}
    assert wire["aliases"] == {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}
    assert wire["kind"] == {"anyOf": [{"type": "string", "enum": ["fact", "rule"]}, {"type": "null"}]}
    assert wire["note"] == {"type": ["string", "null"]}
    assert portable_problems(portable(schema)) == []


def test_a_context_learned_from_a_refusal_expires_and_a_larger_server_is_used_again(world, model_stub):
    """A server restarted from 512 to 2,048 tokens: the 512 learned from its 400 holds for a
    while (no request is sent that it would refuse), then the profile asks the server again."""
    import datetime

    from knowledge.llm.profiles import CONTEXT_TTL

    model_stub.context_tokens = 512
    with pytest.raises(ModelUnavailable):
        model_call(**ask(max_tokens=1000))
    assert profile_resolve("light").context_tokens == 512
    model_stub.context_tokens = 2048  # the restart
    with pytest.raises(ModelPromptTooLong):  # still held to what it learned
        model_call(**ask(max_tokens=1000))
    learned = ModelEndpointState.objects.get(profile="light")
    ModelEndpointState.objects.filter(pk=learned.pk).update(
        context_learned_at=learned.context_learned_at - CONTEXT_TTL - datetime.timedelta(minutes=1)
    )
    assert profile_resolve("light").context_tokens > 512
    model_stub.reply_json({"text": "fits now"})
    assert model_call(**ask(max_tokens=1000)).data["text"] == "fits now"


def test_a_call_given_up_on_is_closed_and_the_server_stops_generating(world, model_stub, settings):
    """Issue 52.7: llama-cpp-python computes a plain request to its end even after the client
    has gone (the next call queues behind a reply nobody reads); it stops a streamed one when
    the client disconnects. Brain asks for a stream and closes it at its timeout; a streamed
    reply that finishes is read as one answer."""
    import json
    import time

    from knowledge.llm import ModelUnreachable

    settings.BRAIN_MODEL_TIMEOUT_SECONDS = 0.5
    settings.BRAIN_MODEL_MAX_RETRIES = 0
    model_stub.streams = True
    # 100 tokens at 50 ms each (5 s): too long for the call's 0.5 s
    model_stub.replies.append({"content": "x" * 400, "token_delay": 0.05, "delay": 5})
    with pytest.raises(ModelUnreachable) as caught:
        model_call(**ask(max_tokens=200))
    assert "within 0.5 s" in caught.value.reason
    assert model_stub.chat_requests()[-1]["stream"] is True
    deadline = time.monotonic() + 3
    while (model_stub.in_flight or not model_stub.cancelled) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (model_stub.cancelled, model_stub.in_flight) == (1, 0)  # it stopped, long before 5 s
    assert ModelUsage.objects.get().outcome == ModelUsage.TIMEOUT

    settings.BRAIN_MODEL_TIMEOUT_SECONDS = 10
    model_stub.replies.append({"content": json.dumps({"text": "Ana likes green tea."}), "token_delay": 0})
    reply = model_call(**ask(max_tokens=200))
    assert reply.data == {"text": "Ana likes green tea."}
    usage = ModelUsage.objects.get(pk=reply.usage_id)
    assert usage.outcome == ModelUsage.OK and usage.completion_tokens == 8  # one per streamed chunk


def test_a_streamed_request_the_server_cannot_take_is_asked_plainly_to_hear_why(world, model_stub):
    """llama-cpp-python answers 200 to a streamed request and then breaks the stream when the
    prompt exceeds its context: Brain asks that once without a stream, hears the 400 and learns
    the context, instead of taking it for an outage."""
    model_stub.streams = True
    model_stub.context_tokens = 512
    with pytest.raises(ModelUnavailable) as caught:
        model_call(**ask(max_tokens=1000))
    assert "512" in caught.value.reason and "cannot reach" not in caught.value.reason
    assert [r.get("stream") for r in model_stub.chat_requests()] == [True, None]
    assert profile_resolve("light").context_tokens == 512
