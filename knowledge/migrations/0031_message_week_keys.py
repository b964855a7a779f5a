"""The messages' full-text index carries a third key beside the channel and the day: the week
('~w<days since 1970-01-01 UTC // 7>'), so the keyword route's window of the newest days
(memory.recall.window) names a whole week with one key instead of seven. GIN steps through every
key of the window for the candidates of the words, so the keys it names cost in proportion: at
1,000,000 messages a window of 36 days (13 keys instead of 37) took the statement's index scan
from 6.8–7.6 to 4.3–4.5 ms (docs/perf-notes/2026-12-08-bench-large-stages.md).

Rebuilding the index reads every message once (8 s for a million messages on 2 cores)."""

from django.db import migrations

_DAY = "floor(extract(epoch FROM ts) / 86400)::bigint::text"
_WEEK = "floor(extract(epoch FROM ts) / 604800)::bigint::text"


def _function(keys: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION brain_message_keys(search tsvector, channel bigint, ts timestamptz) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(search, ''::tsvector) || array_to_tsvector(ARRAY[{keys}])
$$;
REINDEX INDEX message_keys_gin;
ANALYZE knowledge_message;
"""


WITH_WEEKS = _function(f"'~c' || channel::text, '~d' || {_DAY}, '~w' || {_WEEK}")
DAYS_ONLY = _function(f"'~c' || channel::text, '~d' || {_DAY}")


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0030_erasure_kinds"),
    ]

    operations = [migrations.RunSQL(WITH_WEEKS, DAYS_ONLY)]
