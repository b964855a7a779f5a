"""The Status tab's trends: one value per day for the last 14 days, each drawn from rows that
carry their own time (audit events, django-q2 failures, model usage, the texts' arrival), so no
sampler has to run for a chart to have data. Drawn as small SVG charts by `chart_svg`."""

import datetime
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, F, Func, IntegerField, Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from knowledge.embeddings import embedder as embeddings
from knowledge.embeddings.backlog import BACKLOG, backlog_counts
from knowledge.models import AuditEvent, Memory, ModelUsage

DAYS = 14
QUEUE_IN = ("memory.requeued",)  # and memory.written with status queued
QUEUE_OUT = ("memory.approved", "memory.rejected")
# One audit event may name several memories (a bulk decision): count the memories.
MEMORIES = Sum(Func(F("object_ids"), function="jsonb_array_length", output_field=IntegerField()))
ARRIVAL = {"memories": "created_at", "messages": "ts", "episodes": "created_at"}


@dataclass
class Series:
    name: str
    label: str
    kind: str  # bars (a count per day) | line (a level at the end of each day)
    days: list[datetime.date]
    values: list[int]
    note: str = ""

    @property
    def total(self) -> int:
        return sum(self.values)

    @property
    def last(self) -> int:
        return self.values[-1] if self.values else 0


def _days(today: datetime.date) -> list[datetime.date]:
    return [today - datetime.timedelta(days=DAYS - 1 - i) for i in range(DAYS)]


def _per_day(qs, field: str, days, value=None) -> list[int]:
    rows = (
        qs.filter(**{f"{field}__date__gte": days[0]})
        .annotate(day=TruncDate(field))
        .values("day")
        .annotate(n=value or Count("id"))
    )
    by_day = {r["day"]: r["n"] or 0 for r in rows}
    return [int(by_day.get(d, 0)) for d in days]


def _queue_levels(days) -> list[int]:
    """The queue's size at the end of each day, counted back from its size now: a day's level is
    now's, less what entered after that day, plus what left after it (entering: a write that was
    queued, a requeue; leaving: an approval, a rejection)."""
    now_size = Memory.objects.filter(status=Memory.QUEUED).count()
    events = AuditEvent.objects.filter(
        Q(action__in=QUEUE_OUT) | Q(action__in=QUEUE_IN) | Q(action="memory.written", data__status="queued"),
        created_at__date__gt=days[0],
    )
    delta = {d: 0 for d in days}  # per day: entered minus left
    for row in events.annotate(day=TruncDate("created_at")).values("day", "action").annotate(n=MEMORIES):
        sign = -1 if row["action"] in QUEUE_OUT else 1
        if row["day"] in delta:
            delta[row["day"]] += sign * (row["n"] or 0)
    levels, level = [], now_size
    for d in reversed(days):
        levels.append(max(level, 0))
        level -= delta[d]
    return list(reversed(levels))


def _backlog_by_arrival(days, backlog: dict[str, int] | None = None) -> list[int]:
    """Texts that still wait for a vector from the current model, by the day they arrived
    (anything older is counted on the first day shown). Only the days shown are counted by day;
    what is older is the whole backlog less those — `backlog` (per kind, as the Status report
    already counted it) or counted here — so the chart never scans every row a second time."""
    model = embeddings.model_name()
    out = [0] * len(days)
    if not model:
        return out
    totals = backlog if backlog is not None else backlog_counts()
    # One count per shown day after the first, each a range of the arrival column (no per-row
    # date arithmetic); the first day takes the rest — older rows, and times past today (a clock
    # ahead), as before.
    bounds = [datetime.datetime.combine(d, datetime.time(), tzinfo=datetime.UTC) for d in days[1:]]
    bounds.append(bounds[-1] + datetime.timedelta(days=1))
    with connection.cursor() as cursor:
        for kind in BACKLOG:
            column = ARRIVAL[kind.name]
            ranges = ", ".join(
                f"count(*) FILTER (WHERE t.{column} >= %s AND t.{column} < %s)" for _ in days[1:]
            )
            cursor.execute(
                f"SELECT {ranges} FROM {kind.table} t {kind.vector_join} WHERE t.{column} >= %s "
                f"AND t.{column} < %s AND ({kind.where}) AND ({kind.current_sql}) IS NOT TRUE",
                [
                    *(b for i in range(len(days) - 1) for b in bounds[i : i + 2]),
                    bounds[0],
                    bounds[-1],
                    kind.model(),
                ],
            )
            counts = cursor.fetchone()
            for i, n in enumerate(counts, start=1):
                out[i] += n
            # Rows embedded between the two counts can make the rest negative for a moment.
            out[0] += max(totals.get(kind.name, 0) - sum(counts), 0)
    return out


def trends(now=None, *, backlog: dict[str, int] | None = None) -> list[Series]:
    """The 14-day series; `backlog` is the embedding backlog per kind when the caller has it."""
    from django_q.models import Failure

    today = timezone.localdate(now or timezone.now(), timezone=datetime.UTC)
    days = _days(today)
    decisions = AuditEvent.objects.filter(action__in=QUEUE_OUT)
    usage = ModelUsage.objects.all()
    return [
        Series(
            "queue",
            "Review queue size",
            "line",
            days,
            _queue_levels(days),
            "memories waiting at each day's end",
        ),
        Series(
            "decisions",
            "Review decisions",
            "bars",
            days,
            _per_day(decisions, "created_at", days, value=MEMORIES),
        ),
        Series(
            "job_failures", "Job failures", "bars", days, _per_day(Failure.objects.all(), "stopped", days)
        ),
        Series("model_calls", "Model calls", "bars", days, _per_day(usage, "created_at", days)),
        Series(
            "model_tokens",
            "Model tokens",
            "bars",
            days,
            _per_day(usage, "created_at", days, value=Sum("total_tokens")),
        ),
        Series(
            "embedding_backlog",
            "Embedding backlog",
            "bars",
            days,
            _backlog_by_arrival(days, backlog),
            "texts still without a vector, by the day they arrived",
        ),
    ]


W, H, PAD = 280, 72, 4


def chart_svg(series: Series) -> SafeString:
    """A small chart (no script, no inline style: colours come from app.css classes), one
    `.point` per day with a <title> a pointer or a screen reader can read."""
    n = len(series.values)
    top = max(series.values + [1])
    step = (W - 2 * PAD) / n
    parts = [
        f'<svg class="chart chart-{series.kind}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
        f'aria-label="{escape(series.label)}, last {n} days: {escape(", ".join(map(str, series.values)))}">'
    ]
    base = H - PAD
    coords = []
    for i, (day, value) in enumerate(zip(series.days, series.values, strict=True)):
        height = (H - 2 * PAD) * value / top
        x = PAD + i * step
        tip = f"<title>{day:%a %d %b}: {value:,}</title>"
        if series.kind == "bars":
            parts.append(
                f'<rect class="point" x="{x + 1:.1f}" y="{base - height:.1f}" width="{max(step - 2, 1):.1f}" '
                f'height="{max(height, 0.5 if value else 0):.1f}" data-value="{value}">{tip}</rect>'
            )
        else:
            coords.append((x + step / 2, base - height))
    if coords:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        parts.append(f'<polyline class="line" points="{path}" fill="none"/>')
        for (x, y), day, value in zip(coords, series.days, series.values, strict=True):
            parts.append(
                f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="2.5" data-value="{value}">'
                f"<title>{day:%a %d %b}: {value:,}</title></circle>"
            )
    parts.append(f'<line class="axis" x1="{PAD}" y1="{base}" x2="{W - PAD}" y2="{base}"/>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # every interpolated text above is a number, a date or escaped
