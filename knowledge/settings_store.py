"""Run-time modes: the environment gives the default, admins may override it (audited) on the
settings page. Read them with setting_get(name); never read the Django setting directly."""

import time

from django.conf import settings

MODES = {
    "BRAIN_MEMORY_INVALIDATION": {
        "choices": ["flag", "requeue", "invalidate", "off"],
        "help": "What happens to a memory whose source changed.",
    },
    "BRAIN_MEMORY_ACTIVATION_GATE": {
        "choices": ["shadow", "enforce", "off"],
        "help": "Whether the eval gate checks memories before they go into force.",
    },
    "BRAIN_GATE_UNCHECKED": {
        "choices": ["hold", "activate"],
        "help": "Enforce mode: what happens to a memory whose check could not be made "
        "(hold: a reviewer decides; activate: it goes into force unchecked).",
    },
    "BRAIN_MEMORY_CONSOLIDATION": {
        "choices": ["propose", "apply", "off"],
        "help": "What a consolidation run does with its plan.",
    },
    "BRAIN_STRICT_ANTI_DRIFT": {
        "choices": [True, False],
        "help": "Refuse writes that contradict a high-confidence semantic memory without 'supersedes'.",
    },
    "BRAIN_DISTILLER_AUTO_ACTIVATE": {
        "choices": [True, False],
        "help": "Memories the distiller learns go into force at once instead of waiting for review.",
    },
    # Whole numbers: `choices` None, bounds instead.
    "BRAIN_DREAMING_QUIET_MINUTES": {
        "choices": None,
        "minimum": 1,
        "maximum": 10080,
        "help": "Dreaming stage A reads a channel once it has been quiet this many minutes.",
    },
    "BRAIN_DREAMING_BATCH_MESSAGES": {
        "choices": None,
        "minimum": 1,
        "maximum": 100000,
        "help": "… or as soon as this many messages wait past the channel's stage A cursor.",
    },
}


# The overrides are read in one query and kept for a few seconds per process, so the hot paths
# (every memory write reads two or three modes) do not pay a query each; a change made in this
# process is seen at once, one made in another process within CACHE_SECONDS.
CACHE_SECONDS = 5.0
_cache: dict = {"at": -CACHE_SECONDS, "values": {}}


def setting_cache_clear() -> None:
    _cache["at"] = -CACHE_SECONDS


def setting_get(name: str):
    from knowledge.models import Setting

    now = time.monotonic()
    if now - _cache["at"] >= CACHE_SECONDS:
        _cache["values"] = dict(Setting.objects.values_list("name", "value"))
        _cache["at"] = now
    value = _cache["values"].get(name)
    if value is not None:
        return value
    return getattr(settings, name)
