"""Issue 52.6, repairs that can succeed, through the real client against the stub (which refuses a
request over its context with vLLM's 400, as a real server does): the repair request is fitted
to the context like the first; a cut reply is asked again with a smaller input, and a bigger
budget only where the cut call's speed says it would finish in time; the repair is not sent at
the first call's temperature 0, where a small model answers with the same reply."""

import pytest

from knowledge.llm import ModelOutputInvalid, ModelReplyCut, model_ask, model_profile_save
from knowledge.llm.ask import REPAIR_REPLY_CHARS, REPAIR_TEMPERATURE
from knowledge.models import ModelUsage
from tests.factory import SYSTEM
from tests.knowledge.llm.test_real_servers import ASK, SCHEMA, ask

CONTEXT = 700


@pytest.fixture
def small(model_stub):
    model_profile_save(actor=SYSTEM, name="light", context_tokens=CONTEXT)
    model_stub.context_tokens = CONTEXT
    return model_stub


def _fits(stub):
    for request in stub.chat_requests():
        assert stub.prompt_tokens(request) + request["max_tokens"] <= CONTEXT


def test_a_repair_quotes_less_of_a_long_refused_reply_so_that_it_fits(world, small):
    long_reply = '{"summary": "' + "Ana likes green tea and biscuits. " * 80 + '"}'
    assert len(long_reply) > REPAIR_REPLY_CHARS
    small.reply_text(long_reply)
    small.reply_json({"text": "Ana likes green tea."})
    reply = model_ask(**ask(max_tokens=300))
    assert reply.data == {"text": "Ana likes green tea."} and reply.repaired.startswith("invalid")
    first, second = small.chat_requests()
    _fits(small)  # the stub refuses (400) a request that does not fit
    quoted = second["messages"][-2]["content"]
    assert quoted and len(quoted) < REPAIR_REPLY_CHARS and long_reply.startswith(quoted)
    assert "That reply was refused" in second["messages"][-1]["content"]


def test_a_repair_that_cannot_fit_over_the_whole_input_is_asked_over_the_smaller_one(world, small):
    big = [{"role": "user", "content": "Merge these: " + "Ana likes tea. " * 75}]
    smaller = [{"role": "user", "content": "Merge these: Ana likes tea."}]
    small.reply_json({"summary": "wrong shape"})
    small.reply_json({"text": "Ana likes tea."})
    reply = model_ask(**ask(messages=big, max_tokens=250, shrink=lambda: smaller))
    assert reply.data == {"text": "Ana likes tea."}
    second = small.chat_requests()[1]["messages"]
    assert second[0] == smaller[0] and "That reply was refused" in second[-1]["content"]
    _fits(small)


def test_a_repair_that_fits_nowhere_is_not_sent_and_the_first_failure_is_told(world, small):
    big = [{"role": "user", "content": "Merge these: " + "Ana likes tea. " * 75}]
    small.reply_json({"summary": "wrong shape"})
    with pytest.raises(ModelOutputInvalid) as info:
        model_ask(**ask(messages=big, max_tokens=250))
    assert "'text' is a required property" in info.value.reason
    assert len(small.chat_requests()) == 1


def test_a_cut_reply_is_asked_again_over_a_smaller_input_with_the_same_budget(world, model_stub):
    smaller = [{"role": "user", "content": "Merge: Ana likes tea."}]
    model_stub.reply_cut('{"text": "Ana')
    model_stub.reply_json({"text": "Ana likes tea."})
    reply = model_ask(**ask(max_tokens=100, shrink=lambda: smaller))
    first, second = model_stub.chat_requests()
    assert [first["max_tokens"], second["max_tokens"]] == [100, 100]  # not twice the budget
    assert second["messages"] == smaller and reply.repaired == "cut"


def test_a_slow_cut_reply_gets_no_bigger_budget_it_could_not_finish_in_time(world, model_stub, settings):
    """Cut at its 100 tokens after 3 s: 200 tokens would need 6 s, past 80 % of the 5 s timeout."""
    model_stub.reply_cut('{"text": "Ana likes green', delay=3)
    with pytest.raises(ModelReplyCut):
        model_ask(**ask(max_tokens=100))
    assert len(model_stub.chat_requests()) == 1
    assert ModelUsage.objects.get().outcome == ModelUsage.CUT


def test_a_fast_cut_reply_without_a_smaller_input_gets_a_bigger_budget(world, model_stub):
    # cut at its whole budget of 100 tokens in well under a second: 200 finish within the 5 s timeout
    model_stub.reply_cut('{"text": "Ana likes', usage={"prompt_tokens": 30, "completion_tokens": 100})
    model_stub.reply_json({"text": "Ana likes green tea."})
    assert model_ask(**ask(max_tokens=100)).data == {"text": "Ana likes green tea."}
    assert [r["max_tokens"] for r in model_stub.chat_requests()] == [100, 200]


def test_a_bigger_budget_never_takes_more_than_half_the_context(world, model_stub, settings):
    """A reply already at half the context gets no bigger one, however much room this prompt
    leaves: the other half is the prompt's (reply_budget)."""
    from knowledge.llm import profile_resolve

    half = profile_resolve("light").context_tokens // 2
    model_stub.reply_cut('{"text": "Ana likes', usage={"prompt_tokens": 30, "completion_tokens": half})
    model_stub.reply_json({"text": "Ana likes green tea."})
    with pytest.raises(ModelReplyCut):
        model_ask(**ask(max_tokens=half))
    assert [r["max_tokens"] for r in model_stub.chat_requests()] == [half]


def test_the_repair_is_not_sent_at_the_first_calls_temperature(world, model_stub):
    model_stub.reply_json({"summary": "wrong shape"})
    model_stub.reply_json({"text": "Ana likes green tea."})
    model_ask(**ask(max_tokens=100))
    temperatures = [r["temperature"] for r in model_stub.chat_requests()]
    assert temperatures == [0.0, REPAIR_TEMPERATURE] and REPAIR_TEMPERATURE > 0


def test_the_schema_and_input_of_a_repair_are_the_jobs_own(world, model_stub):
    model_stub.reply_json({"summary": "wrong shape"})
    model_stub.reply_json({"text": "ok"})
    model_ask(**ask(max_tokens=100))
    first, second = model_stub.chat_requests()
    assert second["messages"][: len(ASK)] == ASK
    assert model_stub.schema_sent(second) == model_stub.schema_sent(first) is not None
    assert SCHEMA["required"] == ["text"]


# --- the budget the server used (issue 52.7: llama-cpp-python trims max_tokens silently) --------


def test_a_budget_the_server_trimmed_is_recorded_as_the_one_it_used_and_its_context_is_kept(
    world, model_stub
):
    from knowledge.llm import ModelPromptTooLong, model_call, profile_resolve

    model_stub.context_tokens, model_stub.trims_budget = 512, True  # Brain was told nothing of it
    model_stub.reply_json({"text": "Ana likes green tea. " * 200})
    with pytest.raises(ModelReplyCut) as info:
        model_call(**ask(max_tokens=1024))
    prompt = model_stub.prompt_tokens(model_stub.chat_requests()[0])
    used = 512 - prompt
    assert f"cut off after {used} tokens: the server trimmed the budget of 1024" in info.value.reason
    assert "at its budget of 1024" not in info.value.reason
    usage = ModelUsage.objects.get()
    assert usage.outcome == ModelUsage.CUT and usage.completion_tokens == used
    assert profile_resolve("light").context_tokens == 512  # learned from the trim
    with pytest.raises(ModelPromptTooLong):  # the next request is fitted to it, not sent
        model_call(**ask(max_tokens=1024))
    assert len(model_stub.chat_requests()) == 1


def test_a_reply_cut_at_the_whole_budget_is_not_taken_for_a_trim(world, model_stub):
    from knowledge.llm import model_call, profile_resolve

    model_stub.reply_cut('{"text": "Ana', usage={"prompt_tokens": 30, "completion_tokens": 100})
    with pytest.raises(ModelReplyCut) as info:
        model_call(**ask(max_tokens=100))
    assert "cut off at its budget of 100 tokens" in info.value.reason
    assert profile_resolve("light").context_tokens != 130
