"""The pinned memo: a few rules every turn of an agent gets, within a fixed token budget."""

from django.conf import settings
from django.db import transaction

from knowledge.audit.services import audit_record, snapshot
from knowledge.errors import Conflict, Invalid
from knowledge.models import Agent, PinnedMemo
from knowledge.principal import Principal
from knowledge.tokens import count_tokens


class MemoChanged(Conflict):
    default_message = "The memo was changed by someone else meanwhile; reload it and try again."


def memo_budget_tokens() -> int:
    return int(settings.BRAIN_MEMO_BUDGET_TOKENS)


def memo_for(agent: Agent) -> PinnedMemo:
    """The agent's memo (an unsaved empty one, version 0, if it never had one)."""
    return PinnedMemo.objects.filter(agent=agent).first() or PinnedMemo(agent=agent, text="", version=0)


def memo_out(memo: PinnedMemo) -> dict:
    return {
        "agent": memo.agent.name,
        "text": memo.text,
        "tokens": count_tokens(memo.text),
        "budget_tokens": memo_budget_tokens(),
        "version": memo.version,
        "updated_at": memo.updated_at if memo.pk else None,
        "updated_by": f"{memo.updated_by_kind}:{memo.updated_by_name}" if memo.updated_by_kind else "",
    }


def memo_update(
    *, actor: Principal, agent: Agent, text: str, expected_version: int | None = None, reason: str = ""
) -> PinnedMemo:
    """Replace the agent's memo. Refused (400) when it counts more than the budget; refused
    (409) when `expected_version` is given and someone saved another version meanwhile. Audited
    with a revision, so an admin can restore the previous text."""
    text = text.strip()
    tokens = count_tokens(text)
    budget = memo_budget_tokens()
    if tokens > budget:
        raise Invalid({"text": [f"The memo counts {tokens} tokens; its budget is {budget}."]})
    with transaction.atomic():
        memo, _ = PinnedMemo.objects.select_for_update().get_or_create(agent=agent)
        if expected_version is not None and memo.version != expected_version:
            raise MemoChanged()
        before = snapshot(memo) if memo.version else None
        memo.text = text
        memo.version += 1
        memo.updated_by_kind, memo.updated_by_name = actor.kind_label, actor.name
        memo.save()
        audit_record(
            "memo.updated",
            actor=actor,
            store="self",
            owner=agent.name,
            object_type="memo",
            object_ids=[memo.pk],
            reason=reason,
            counts={"tokens": tokens, "budget_tokens": budget},
            data={"version": memo.version},
            revisions=[("memo", memo.pk, before, snapshot(memo))],
        )
    return memo
