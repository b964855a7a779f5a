"""The near-duplicate rule for lessons, on the labelled pairs its thresholds were chosen on
(memory.skills.services: NEAR_COSINE, NEAR_OVERLAP, SAME_COSINE), with the local embedder."""

import pytest

from knowledge.models import Memory
from memory.skills.services import near_duplicate

PARAPHRASES = [
    (
        "Ask for the ticket number before searching the knowledge base.",
        "Before searching the KB, ask the user for their ticket number.",
    ),
    (
        "Restart the VPN client after installing an update.",
        "After an update is installed, restart the VPN client.",
    ),
    (
        "Confirm the customer's email address before resetting a password.",
        "Before a password reset, verify the customer's e-mail address.",
    ),
    ("Quote prices in the customer's currency.", "Always give prices in the currency of the customer."),
    (
        "Escalate outages affecting more than ten users to on-call.",
        "When an outage hits over 10 users, escalate it to the on-call engineer.",
    ),
    (
        "Check the status page before opening an incident.",
        "Look at the status page first, then open an incident.",
    ),
    (
        "Summarise the fix in one sentence at the end of the reply.",
        "End each reply with a one-sentence summary of the fix.",
    ),
    (
        "Use the staging database for test queries, never production.",
        "Run test queries against staging, not the production database.",
    ),
]
DIFFERENT = [
    (
        "Ask for the ticket number before searching the knowledge base.",
        "Search the knowledge base for the error message first.",
    ),
    (
        "Restart the VPN client after installing an update.",
        "Install the VPN update only outside office hours.",
    ),
    (
        "Confirm the customer's email address before resetting a password.",
        "Password resets expire after 24 hours; tell the customer.",
    ),
    ("Quote prices in the customer's currency.", "Round prices to two decimals."),
    (
        "Escalate outages affecting more than ten users to on-call.",
        "Log every outage in the incident tracker.",
    ),
    (
        "Check the status page before opening an incident.",
        "Close an incident only after the customer confirms.",
    ),
    (
        "Summarise the fix in one sentence at the end of the reply.",
        "Start the reply by greeting the customer by name.",
    ),
    (
        "Use the staging database for test queries, never production.",
        "Back up the production database before a migration.",
    ),
    (
        "When a refund exceeds 100 EUR, ask a supervisor.",
        "When a refund is under 100 EUR, approve it directly.",
    ),
    ("Reply in the language the customer wrote in.", "Reply within four hours during business days."),
]


@pytest.mark.parametrize(("existing", "new"), PARAPHRASES)
def test_a_paraphrase_is_a_near_duplicate(existing, new):
    lesson = Memory(pk=1, text=existing)
    assert near_duplicate(new, [lesson])[0] is lesson


@pytest.mark.parametrize(("existing", "new"), DIFFERENT)
def test_a_different_rule_is_not(existing, new):
    assert near_duplicate(new, [Memory(pk=1, text=existing)])[0] is None


def test_without_vectors_only_the_same_key_terms_count(settings):
    settings.BRAIN_EMBEDDINGS = "none"
    lesson = Memory(pk=1, text=PARAPHRASES[0][0])
    assert (
        near_duplicate("Before searching the knowledge base: ask for the ticket number!", [lesson])[0]
        is lesson
    )
    assert near_duplicate(PARAPHRASES[0][1], [lesson]) == (None, None)
