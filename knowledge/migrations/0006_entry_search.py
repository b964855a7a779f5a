from django.db import migrations

# Entry search columns are derived in the database, so every writer (entry services, memory
# lifecycle, Dreaming, bulk loads) keeps them right without calling anything:
#   * brain_trigrams(text): the pg_trgm-style trigram set of a text (each lower-cased word padded
#     with two spaces in front and one behind). The embedded server has no pg_trgm, so name and
#     alias similarity is computed from these arrays (see knowledge.entry_search).
#   * a BEFORE row trigger on entries computes name_trigrams, head_vector (name and aliases
#     weight A, summary B: what ranking reads), block_count and block_authors;
#   * an AFTER row trigger on entries writes the entry's full-text document (name and aliases
#     weight A, summary B, body blocks C) into knowledge_entrysearch, a table of its own so the
#     entry rows stay narrow;
#   * statement-level triggers on memories touch the entries whose body changed (text, status,
#     author, position or entry of a block), which fires the entry triggers once per entry.
FORWARD = r"""
CREATE OR REPLACE FUNCTION brain_trigrams(t text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(DISTINCT substr(w, i, 3)), '{}')
  FROM (SELECT '  ' || word || ' ' AS w
          FROM regexp_split_to_table(lower(coalesce(t, '')), '[^[:alnum:]]+') AS word
         WHERE word <> '') AS words,
       generate_series(1, length(w) - 2) AS i
$$;

-- A trigram as one number: its three code points (21 bits each) packed into a bigint. Exact
-- (no collisions, any script) and compared far faster than text.
CREATE OR REPLACE FUNCTION brain_trigram_code(g text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT (ascii(substr(g, 1, 1))::bigint << 42) | (ascii(substr(g, 2, 1))::bigint << 21) | ascii(substr(g, 3, 1))::bigint
$$;

CREATE OR REPLACE FUNCTION brain_trigram_codes(t text) RETURNS bigint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(brain_trigram_code(g)), '{}') FROM unnest(brain_trigrams(t)) AS g
$$;

CREATE OR REPLACE FUNCTION knowledge_entry_derive() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  SELECT count(*), coalesce(array_agg(DISTINCT m.author_name), '{}')
    INTO NEW.block_count, NEW.block_authors
    FROM knowledge_memory m
   WHERE m.entry_id = NEW.id AND m.status IN ('active', 'queued');
  NEW.name_trigrams := brain_trigram_codes(NEW.name || ' ' || array_to_string(NEW.aliases, ' '));
  NEW.head_vector :=
       setweight(to_tsvector('english', coalesce(NEW.name, '')), 'A')
    || setweight(to_tsvector('english', array_to_string(NEW.aliases, ' ')), 'A')
    || setweight(to_tsvector('english', coalesce(NEW.summary, '')), 'B');
  RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION knowledge_entry_document() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  body text;
BEGIN
  SELECT string_agg(m.text, ' ' ORDER BY m.position, m.id) INTO body
    FROM knowledge_memory m
   WHERE m.entry_id = NEW.id AND m.status IN ('active', 'queued');
  INSERT INTO knowledge_entrysearch (entry_id, document)
  VALUES (NEW.id, NEW.head_vector || setweight(to_tsvector('english', coalesce(body, '')), 'C'))
  ON CONFLICT (entry_id) DO UPDATE SET document = EXCLUDED.document;
  RETURN NULL;
END $$;

CREATE TRIGGER knowledge_entry_derive BEFORE INSERT OR UPDATE ON knowledge_entry
  FOR EACH ROW EXECUTE FUNCTION knowledge_entry_derive();
CREATE TRIGGER knowledge_entry_document AFTER INSERT OR UPDATE ON knowledge_entry
  FOR EACH ROW EXECUTE FUNCTION knowledge_entry_document();

CREATE OR REPLACE FUNCTION knowledge_memory_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE knowledge_entry SET updated_at = now()
   WHERE id IN (SELECT DISTINCT entry_id FROM new_rows WHERE entry_id IS NOT NULL);
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION knowledge_memory_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE knowledge_entry SET updated_at = now()
   WHERE id IN (
     SELECT unnest(ARRAY[n.entry_id, o.entry_id])
       FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE (n.entry_id IS NOT NULL OR o.entry_id IS NOT NULL)
        AND (n.text, n.status, n.author_name, n.position, n.entry_id)
            IS DISTINCT FROM (o.text, o.status, o.author_name, o.position, o.entry_id));
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION knowledge_memory_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE knowledge_entry SET updated_at = now()
   WHERE id IN (SELECT DISTINCT entry_id FROM old_rows WHERE entry_id IS NOT NULL);
  RETURN NULL;
END $$;

CREATE TRIGGER knowledge_memory_entries_ins AFTER INSERT ON knowledge_memory
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION knowledge_memory_inserted();
CREATE TRIGGER knowledge_memory_entries_upd AFTER UPDATE ON knowledge_memory
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION knowledge_memory_updated();
CREATE TRIGGER knowledge_memory_entries_del AFTER DELETE ON knowledge_memory
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION knowledge_memory_deleted();

UPDATE knowledge_entry SET updated_at = updated_at;
"""

BACKWARD = r"""
DROP TRIGGER IF EXISTS knowledge_memory_entries_ins ON knowledge_memory;
DROP TRIGGER IF EXISTS knowledge_memory_entries_upd ON knowledge_memory;
DROP TRIGGER IF EXISTS knowledge_memory_entries_del ON knowledge_memory;
DROP TRIGGER IF EXISTS knowledge_entry_document ON knowledge_entry;
DROP TRIGGER IF EXISTS knowledge_entry_derive ON knowledge_entry;
DROP FUNCTION IF EXISTS knowledge_memory_inserted();
DROP FUNCTION IF EXISTS knowledge_memory_updated();
DROP FUNCTION IF EXISTS knowledge_memory_deleted();
DROP FUNCTION IF EXISTS knowledge_entry_document();
DROP FUNCTION IF EXISTS knowledge_entry_derive();
DROP FUNCTION IF EXISTS brain_trigram_codes(text);
DROP FUNCTION IF EXISTS brain_trigram_code(text);
DROP FUNCTION IF EXISTS brain_trigrams(text);
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0005_entries_relations_guides")]
    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
