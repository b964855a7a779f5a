from django.db import models


class Setting(models.Model):
    """A run-time override of one of the mode settings (see knowledge.settings_store)."""

    name = models.CharField(max_length=64, unique=True)
    value = models.JSONField()
    updated_at = models.DateTimeField(auto_now=True)


class Heartbeat(models.Model):
    """The worker beats every minute; /healthz reports the age of the last beat."""

    name = models.CharField(max_length=32, unique=True)
    beat_at = models.DateTimeField()


class AuthFailure(models.Model):
    """Bad API tokens from one client address in one minute (knowledge.principals.throttle)."""

    address = models.CharField(max_length=64)
    time_window = models.BigIntegerField()  # epoch minute
    count = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["address", "time_window"], name="authfailure_address_window")
        ]


class TermStat(models.Model):
    """Keyword statistics of the searchable corpora (`memory`: memory key and text, `entry`: an
    entry's name, aliases and summary, `message`: speaker and text), kept exact by database
    triggers on every write (migration 0015): each row is a change — documents containing
    `lexeme` gained or lost — and the statistics are the sums per (corpus, lexeme). The row with
    lexeme "" counts the corpus's documents and their summed length (distinct lexemes). Writers
    only append, so they never wait for one another; `knowledge.termstats.term_stats_compact`
    folds the changes into one row per lexeme without changing any sum."""

    corpus = models.CharField(max_length=16)
    lexeme = models.TextField()
    docs = models.BigIntegerField()
    length = models.BigIntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(fields=["corpus", "lexeme"], include=["docs", "length"], name="termstat_lexeme")
        ]


class EmbeddingClaim(models.Model):
    """A backlog row being embedded (knowledge.embeddings.backlog): claimed by a short statement
    that commits at once, so no transaction stays open while the model runs; several lanes and
    workers skip each other's claims. A claim ends when its vectors are written, or at `until`
    when its lane died."""

    kind = models.CharField(max_length=16)  # a backlog Kind's name: memories, messages, episodes
    row_id = models.BigIntegerField()
    until = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "row_id"], name="embeddingclaim_row")]


class EmbeddingMinute(models.Model):
    """Backlog texts embedded per minute, summed over every lane and worker: the current rate and
    the time left shown on Status (knowledge.embeddings.backlog.backlog_progress)."""

    minute = models.DateTimeField(unique=True)
    embedded = models.IntegerField(default=0)
