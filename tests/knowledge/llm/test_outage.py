"""How long a job waits after an outage: the back-off doubles from BRAIN_MODEL_DEFER_SECONDS up
to half an hour, and an outage of days keeps retrying every half hour (never an error)."""

from datetime import timedelta

from django.test import override_settings

from knowledge.llm.outage import DEFER_MAX, defer_delay


@override_settings(BRAIN_MODEL_DEFER_SECONDS=60)
def test_the_back_off_doubles_up_to_half_an_hour_however_long_the_outage():
    assert [defer_delay(n) for n in (1, 2, 3)] == [timedelta(seconds=s) for s in (60, 120, 240)]
    assert defer_delay(6) == DEFER_MAX == timedelta(minutes=30)
    # a week-long outage retried every half hour: 336 deferrals (2**335 seconds overflowed)
    assert defer_delay(336) == DEFER_MAX


@override_settings(BRAIN_MODEL_DEFER_SECONDS=0)
def test_a_deferral_is_started_once_by_the_scheduler_and_leaves_no_row_behind(db, caplog):
    """The one-off schedule a deferral makes is taken by django-q2's scheduler when due: its
    task is started (inline here: tests run django-q2 in sync mode) and the schedule deleted, so
    nothing waits any more and no row piles up."""
    from django_q.brokers import get_broker
    from django_q.models import Schedule, Task
    from django_q.scheduler import scheduler

    from knowledge.llm.outage import defer_later, deferral_pending

    func = "memory.lifecycle.conflicts.contradictions_recheck"  # a deferred task (nothing to do)
    defer_later(func, [], deferrals=1, what="a test")
    assert deferral_pending(func, what="a test") is not None
    scheduler(broker=get_broker())
    assert "Could not create task" not in caplog.text
    assert Task.objects.filter(func=func, success=True).count() == 1
    assert not Schedule.objects.filter(func=func).exists()
    assert deferral_pending(func, what="a test") is None
