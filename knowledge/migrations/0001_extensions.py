from django.db import migrations

# pgvector is required. pg_trgm is enabled where the server ships it (any regular PostgreSQL
# with contrib); the embedded server has no contrib modules, so name matching does not depend
# on it (see knowledge.search).
ENABLE_TRGM = """
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
  END IF;
END $$;
"""


class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [
        migrations.RunSQL("CREATE EXTENSION IF NOT EXISTS vector", migrations.RunSQL.noop),
        migrations.RunSQL(ENABLE_TRGM, migrations.RunSQL.noop),
    ]
