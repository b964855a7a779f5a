"""Memory rows are inserted and their status changed only through knowledge/memories/: a
statement trigger refuses any other INSERT or UPDATE OF status (knowledge/memories/guard.py).
A statement trigger, not a row trigger: one check per statement, whatever the rows."""

from django.db import migrations

GUARD = """
CREATE FUNCTION brain_memory_writer_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(current_setting('brain.memory_writer', true), '') <> 'on' THEN
    RAISE EXCEPTION 'memory rows are written only through knowledge/memories/ (the one writer): % refused', TG_OP
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER knowledge_memory_one_writer
  BEFORE INSERT OR UPDATE OF status ON knowledge_memory
  FOR EACH STATEMENT EXECUTE FUNCTION brain_memory_writer_guard();
"""

UNGUARD = """
DROP TRIGGER IF EXISTS knowledge_memory_one_writer ON knowledge_memory;
DROP FUNCTION IF EXISTS brain_memory_writer_guard();
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0028_erasure_ledger")]

    operations = [migrations.RunSQL(GUARD, UNGUARD)]
