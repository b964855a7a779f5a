from django.utils.functional import SimpleLazyObject

from memory.selectors import queue_count


def review_queue(request):
    """The number of memories waiting for review (under the owner selector), for the navigation
    badge; computed only when a template shows it."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    owner = request.session.get("owner", "")
    return {"queue_count": SimpleLazyObject(lambda: queue_count(owner))}
