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
