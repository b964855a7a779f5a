"""Jobs deferred by an outage (knowledge.llm.outage) wait as one-off django-q2 schedules: the
tests find them and run them as the scheduler would, without waiting for their time."""

import ast
import importlib

from django_q.models import Schedule


def deferred(func: str) -> list[Schedule]:
    return list(Schedule.objects.filter(func=func, schedule_type=Schedule.ONCE).order_by("pk"))


def run_deferred(schedule: Schedule):
    """Call the schedule's task with its args and kwargs (and remove it, as a ONCE schedule is)."""
    module, name = schedule.func.rsplit(".", 1)
    args = ast.literal_eval(schedule.args or "()")
    kwargs = ast.literal_eval(schedule.kwargs or "{}")
    schedule.delete()
    return getattr(importlib.import_module(module), name)(*args, **kwargs)


def server_down(profile: str = "light", down: bool = True) -> None:
    """What the background check (knowledge.llm.reach) records for a server that refuses
    connections, or (down=False) one that answers again."""
    from knowledge.llm import profile_resolve
    from knowledge.llm.profiles import endpoint_record

    error = "ConnectError: [Errno 111] Connection refused" if down else ""
    endpoint_record(profile_resolve(profile), reachable=not down, reach_error=error)
