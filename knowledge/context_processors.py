from knowledge.models import Agent
from knowledge.principals import user_role


def console(request):
    """What every console page needs: the user's role and the owner-principal selector."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "role": user_role(user),
        "owner_choices": list(Agent.objects.values_list("name", flat=True)),
        "owner": request.session.get("owner", ""),
    }
