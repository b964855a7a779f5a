"""django-q2 entry points for materials."""


def material_learn(material_id: int, deferrals: int = 0) -> str:
    """Learn one material (knowledge.materials.learning.material_learn); `deferrals`: outages in
    a row so far, when a deferred learning comes back."""
    from knowledge.materials.learning import material_learn as learn

    return learn(material_id, deferrals=deferrals)


def learning_sweep() -> dict:
    """Every 5 minutes: retry or fail materials stuck in learning (services.learning_sweep)."""
    from knowledge.materials.services import learning_sweep as sweep

    return sweep()
