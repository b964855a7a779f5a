"""django-q2 entry points for the foundation."""


def term_stats_compact() -> int:
    """Hourly: fold the keyword statistics' change rows (knowledge.termstats); no sum changes."""
    from knowledge.termstats import term_stats_compact as compact

    return compact()
