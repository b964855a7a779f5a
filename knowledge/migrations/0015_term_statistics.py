"""Exact keyword statistics, kept on write: statement-level triggers on memories, entries and
messages append what each INSERT, UPDATE (of the indexed tsvector) or DELETE changed to
knowledge_termstat — per lexeme the documents that gained or lost it, and per corpus the number
of documents and their summed length — and TRUNCATE clears the corpus. Ranking reads the sums,
so the same query on the same data always scores the same (the planner's sampled statistics
did not). Existing rows are counted once here."""

from django.db import migrations, models

CORPORA = [("memory", "knowledge_memory", "search"), ("entry", "knowledge_entry", "head_vector"),
           ("message", "knowledge_message", "search")]


def _sql(corpus: str, table: str, column: str) -> str:
    v = f"coalesce({{r}}.{column}, ''::tsvector)"
    added = v.format(r="n")
    removed = v.format(r="o")
    return f"""
CREATE FUNCTION brain_termstat_{corpus}_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO knowledge_termstat (corpus, lexeme, docs, length)
  SELECT '{corpus}', u.lexeme, count(*), 0 FROM new_rows n, unnest({added}) u GROUP BY u.lexeme
  UNION ALL
  SELECT '{corpus}', '', count(*), coalesce(sum(length({added})), 0) FROM new_rows n HAVING count(*) > 0;
  RETURN NULL;
END $$;
CREATE FUNCTION brain_termstat_{corpus}_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO knowledge_termstat (corpus, lexeme, docs, length)
  SELECT '{corpus}', u.lexeme, -count(*), 0 FROM old_rows o, unnest({removed}) u GROUP BY u.lexeme
  UNION ALL
  SELECT '{corpus}', '', -count(*), -coalesce(sum(length({removed})), 0) FROM old_rows o HAVING count(*) > 0;
  RETURN NULL;
END $$;
CREATE FUNCTION brain_termstat_{corpus}_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO knowledge_termstat (corpus, lexeme, docs, length)
  WITH changed AS (
    SELECT {removed} AS before, {added} AS after
    FROM old_rows o JOIN new_rows n ON n.id = o.id
    WHERE {removed} IS DISTINCT FROM {added}
  )
  SELECT '{corpus}', d.lexeme, sum(d.change), 0
  FROM (SELECT u.lexeme, -1 AS change FROM changed, unnest(changed.before) u
        UNION ALL SELECT u.lexeme, 1 FROM changed, unnest(changed.after) u) d
  GROUP BY d.lexeme HAVING sum(d.change) <> 0
  UNION ALL
  SELECT '{corpus}', '', 0, sum(length(after)) - sum(length(before)) FROM changed
  HAVING count(*) > 0 AND sum(length(after)) <> sum(length(before));
  RETURN NULL;
END $$;
CREATE FUNCTION brain_termstat_{corpus}_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM knowledge_termstat WHERE corpus = '{corpus}';
  RETURN NULL;
END $$;
CREATE TRIGGER brain_termstat_ins AFTER INSERT ON {table}
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION brain_termstat_{corpus}_ins();
CREATE TRIGGER brain_termstat_del AFTER DELETE ON {table}
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION brain_termstat_{corpus}_del();
CREATE TRIGGER brain_termstat_upd AFTER UPDATE ON {table}
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION brain_termstat_{corpus}_upd();
CREATE TRIGGER brain_termstat_truncate AFTER TRUNCATE ON {table}
  FOR EACH STATEMENT EXECUTE FUNCTION brain_termstat_{corpus}_truncate();
INSERT INTO knowledge_termstat (corpus, lexeme, docs, length)
SELECT '{corpus}', u.lexeme, count(*), 0 FROM {table} n, unnest({added}) u GROUP BY u.lexeme
UNION ALL
SELECT '{corpus}', '', count(*), coalesce(sum(length({added})), 0) FROM {table} n HAVING count(*) > 0;
"""


def _reverse(corpus: str, table: str, column: str) -> str:
    drops = [f"DROP TRIGGER IF EXISTS brain_termstat_{op} ON {table};" for op in ("ins", "del", "upd", "truncate")]
    funcs = [f"DROP FUNCTION IF EXISTS brain_termstat_{corpus}_{op}();" for op in ("ins", "del", "upd", "truncate")]
    return "\n".join(drops + funcs)


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0014_message_speaker_indexed"),
    ]

    operations = [
        migrations.CreateModel(
            name="TermStat",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("corpus", models.CharField(max_length=16)),
                ("lexeme", models.TextField()),
                ("docs", models.BigIntegerField()),
                ("length", models.BigIntegerField(default=0)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["corpus", "lexeme"], include=("docs", "length"), name="termstat_lexeme")
                ],
            },
        ),
        *[migrations.RunSQL(_sql(*c), _reverse(*c)) for c in CORPORA],
    ]
