from django.db import migrations

# What the Status page reads, indexed so it answers at the bench's size (50,000 entries with
# 250,000 blocks; docs/PERFORMANCE.md). Partial indexes hold only the rows a lint lists, so the
# lint reads those and not the table:
#   * memory_active_block_dreaming: live entry blocks in (entry, id) order — Dreaming's "blocks
#     with no source" lint walks it with NOT EXISTS and stops at its limit;
#   * entry_props_dreaming: entries with properties, the only ones two entries can disagree on
#     (Dreaming's contradictions lint);
#   * entry_dated_name_dreaming: entries whose name carries a date (the knowledge lint's regular
#     expression, knowledge.entries.lints.DATED_NAME — the two must stay equal, a test checks);
#   * entry_no_body_dreaming: entries with no body block;
#   * entry_name_key_dreaming: each entry's normalised name (brain_name_key, the database twin of
#     knowledge.entries.lints._name_key: lower case, words of letters and digits, a plural "s"
#     dropped), with the name included so the near-duplicate lint is an index-only scan;
#   * memory_vector_dreaming: each recallable memory's arrival and the model of its vector, so
#     vector coverage counts an index, not the memory rows, and the backlog chart reads only the
#     days it shows;
#   * memory_keyed_dreaming: active memories with a key, the only ones that can conflict (the
#     conflicts section pairs them by store and key);
#   * memory_long_block_dreaming and entry_many_blocks_dreaming: body blocks over 400 characters
#     and entries of more than 5 blocks, the only entries whose body can pass the oversized lint's
#     2,000 characters (knowledge.entries.lints.LONG_BLOCK, FEW_BLOCKS).
DATED_NAME = (
    r"\m(19|20)[0-9]{2}\M|\mq[1-4]\M|\m(january|february|march|april|may|june|july|august|september|"
    r"october|november|december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\M\.?\s*[0-9]"
)

FORWARD = [
    "CREATE INDEX memory_active_block_dreaming ON knowledge_memory (entry_id, id) "
    "WHERE status = 'active' AND entry_id IS NOT NULL",
    "CREATE INDEX entry_props_dreaming ON knowledge_entry (owner_id, id) "
    "WHERE deleted_at IS NULL AND properties <> '{}'::jsonb",
    "CREATE INDEX entry_dated_name_dreaming ON knowledge_entry (name, id) "
    "WHERE deleted_at IS NULL AND name ~* '" + DATED_NAME.replace("'", "''") + "'",
    "CREATE INDEX entry_no_body_dreaming ON knowledge_entry (updated_at DESC, id) "
    "WHERE deleted_at IS NULL AND block_count = 0",
    r"""CREATE OR REPLACE FUNCTION brain_name_key(name text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT regexp_replace(btrim(regexp_replace(lower(name), '[^a-z0-9]+', ' ', 'g')),
                        '([a-z0-9]{2,}[a-rt-z0-9])s( |$)', '\1\2', 'g')
$$""",
    "CREATE INDEX entry_name_key_dreaming ON knowledge_entry (owner_id, brain_name_key(name), id) "
    "INCLUDE (name) WHERE deleted_at IS NULL",
    "CREATE INDEX memory_vector_dreaming ON knowledge_memory (created_at, embedding_model) "
    "WHERE status IN ('queued', 'active')",
    "CREATE INDEX memory_keyed_dreaming ON knowledge_memory (store, key, id) WHERE status = 'active' AND key <> ''",
    "CREATE INDEX memory_long_block_dreaming ON knowledge_memory (entry_id) "
    "WHERE entry_id IS NOT NULL AND status IN ('active', 'queued') AND length(text) > 400",
    "CREATE INDEX entry_many_blocks_dreaming ON knowledge_entry (id) WHERE deleted_at IS NULL AND block_count > 5",
]

BACKWARD = [
    "DROP INDEX IF EXISTS entry_many_blocks_dreaming",
    "DROP INDEX IF EXISTS memory_long_block_dreaming",
    "DROP INDEX IF EXISTS memory_keyed_dreaming",
    "DROP INDEX IF EXISTS memory_vector_dreaming",
    "DROP INDEX IF EXISTS entry_name_key_dreaming",
    "DROP FUNCTION IF EXISTS brain_name_key(text)",
    "DROP INDEX IF EXISTS entry_no_body_dreaming",
    "DROP INDEX IF EXISTS entry_dated_name_dreaming",
    "DROP INDEX IF EXISTS entry_props_dreaming",
    "DROP INDEX IF EXISTS memory_active_block_dreaming",
]


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0019_merge_three_0018s")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
