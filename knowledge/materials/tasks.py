"""django-q2 entry points for materials."""


def material_learn(material_id: int) -> str:
    """Learn one material (knowledge.materials.learning.material_learn)."""
    from knowledge.materials.learning import material_learn as learn

    return learn(material_id)
