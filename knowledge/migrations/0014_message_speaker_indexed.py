"""Messages are indexed and embedded with their speaker ("Ana: the demo moved to Friday"):
questions name people. The stored tsvector is re-made from speaker and text (a generated column
cannot change its expression in place, so it is dropped and added again, with its GIN index),
and every message vector made from the text alone is marked stale, so the embedding backlog
re-embeds it as "speaker: text" (GET /api/status shows that backlog until it drains)."""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models

MARK_STALE = "UPDATE knowledge_messagevector SET model = 'stale:' || model WHERE model NOT LIKE 'stale:%'"


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0013_skills_overlays_task_outcomes"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="message", name="message_search_gin"),
        migrations.RemoveField(model_name="message", name="search"),
        migrations.AddField(
            model_name="message",
            name="search",
            field=models.GeneratedField(
                db_persist=True,
                expression=django.contrib.postgres.search.SearchVector("speaker_name", "text", config="english"),
                output_field=django.contrib.postgres.search.SearchVectorField(),
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=django.contrib.postgres.indexes.GinIndex(fields=["search"], name="message_search_gin"),
        ),
        migrations.RunSQL(MARK_STALE, migrations.RunSQL.noop),
    ]
