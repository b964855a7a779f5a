from django.utils.functional import SimpleLazyObject

from knowledge.principals.context_processors import console_user
from memory.lifecycle.selectors import queue_count


def review_queue(request):
    """The number of memories waiting for review (under the owner selector), for the navigation
    badge; computed only when a template shows it."""
    if console_user(request) is None:
        return {}
    owner = request.session.get("owner", "")
    return {"queue_count": SimpleLazyObject(lambda: queue_count(owner))}
