"""What the memory app derived from erased content goes with it (knowledge.erasure sends
`content_erased` inside its transaction): conversation summaries that may quote an erased
message are dropped (the next compilation folds again from what remains), links and gate checks
of erased memories go, an open consolidation plan (running or proposed) drops every group naming
an erased memory, and a finished plan keeps no copy of its text (its ids stay, for the history). Plain
SQL over arrays: a person's erasure names thousands of memories."""

from django.db import connection

from memory.models import (
    ConsolidationGroup,
    ConsolidationItem,
    ConsolidationPlan,
    ConversationSummary,
    GateCheck,
    MemoryLink,
)


def derived_of_erased_drop(*, memory_ids, conversation_ids, channel_ids, **kwargs) -> None:
    memories, summaries = sorted(memory_ids), ConversationSummary._meta.db_table
    with connection.cursor() as c:
        c.execute(
            f"DELETE FROM {summaries} WHERE conversation_id = ANY(%s) OR conversation_id IN "  # noqa: S608
            "(SELECT id FROM knowledge_conversation WHERE channel_id = ANY(%s))",
            [sorted(conversation_ids), sorted(channel_ids)],
        )
        if not memories:
            return
        links, checks = MemoryLink._meta.db_table, GateCheck._meta.db_table
        items, groups = ConsolidationItem._meta.db_table, ConsolidationGroup._meta.db_table
        c.execute(
            f"DELETE FROM {links} WHERE memory_id = ANY(%s) OR neighbour_id = ANY(%s)", [memories, memories]
        )  # noqa: S608
        c.execute(f"DELETE FROM {checks} WHERE memory_id = ANY(%s)", [memories])  # noqa: S608
        c.execute(
            f"SELECT group_id FROM {items} WHERE memory_id = ANY(%s) "  # noqa: S608
            f"UNION SELECT id FROM {groups} WHERE target_id = ANY(%s)",
            [memories, memories],
        )
        touched = [row[0] for row in c.fetchall()]
        plans = ConsolidationPlan._meta.db_table
        c.execute(
            f"SELECT g.id FROM {groups} g JOIN {plans} p ON p.id = g.plan_id "  # noqa: S608
            "WHERE g.id = ANY(%s) AND p.state = ANY(%s)",
            [touched, list(ConsolidationPlan.OPEN_STATES)],
        )
        dropped = [row[0] for row in c.fetchall()]
        c.execute(f"DELETE FROM {items} WHERE group_id = ANY(%s)", [dropped])  # noqa: S608
        c.execute(f"DELETE FROM {groups} WHERE id = ANY(%s)", [dropped])  # noqa: S608
        c.execute(
            f"UPDATE {items} SET before = '{{\"erased\": true}}'::jsonb, after = NULL WHERE memory_id = ANY(%s)",  # noqa: S608
            [memories],
        )
        c.execute(
            f"UPDATE {items} SET after = NULL WHERE group_id = ANY(%s) AND role = %s",  # noqa: S608
            [touched, ConsolidationItem.MERGED],
        )
        c.execute(
            f"UPDATE {groups} SET merged_text = '', key = '', reason = '', data = '{{}}'::jsonb "  # noqa: S608
            "WHERE id = ANY(%s)",
            [touched],
        )
