"""An index on the folded text of live memories, so exact duplicates (same text once case and
spacing are set aside) are found by a lookup on the write path and in the review queue."""

from django.db import migrations

NORM_MD5 = r"md5(lower(regexp_replace(btrim(text), '\s+', ' ', 'g')))"


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0017_events_webhooks")]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX memory_live_norm_idx ON knowledge_memory (store, ({NORM_MD5})) "
            "WHERE status IN ('queued', 'active')",
            "DROP INDEX IF EXISTS memory_live_norm_idx",
        )
    ]
