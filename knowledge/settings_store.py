"""Run-time modes: the environment gives the default, admins may override it (audited) on the
settings page. Read them with setting_get(name); never read the Django setting directly."""

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
}


def setting_get(name: str):
    from knowledge.models import Setting

    row = Setting.objects.filter(name=name).values_list("value", flat=True).first()
    if row is not None:
        return row
    return getattr(settings, name)
