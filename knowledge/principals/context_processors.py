from knowledge.models import Agent, ConsolePreferences
from knowledge.principal import Principal, user_role


def console_user(request):
    """The signed-in console user, or None. In an API view DRF's authentication puts the
    token's Principal in `request.user`, also when that view renders HTML (the API docs page);
    a token is no console session, so the console's context is not built for it."""
    user = getattr(request, "user", None)
    if user is None or isinstance(user, Principal) or not user.is_authenticated:
        return None
    return user


def console(request):
    """What every console page needs: the user's role and the owner-principal selector."""
    user = console_user(request)
    if user is None:
        return {}
    return {
        "role": user_role(user),
        "owner_choices": list(Agent.objects.values_list("name", flat=True)),
        "owner": request.session.get("owner", ""),
        "theme": _theme(request, user),
        "themes": [t for t, _ in ConsolePreferences.THEMES],
    }


def _theme(request, user) -> str:
    """The user's colour theme, read from the database once a session (theme_set keeps the
    session's copy current)."""
    theme = request.session.get("theme")
    if theme is None:
        theme = (
            ConsolePreferences.objects.filter(user=user).values_list("theme", flat=True).first()
            or ConsolePreferences.AUTO
        )
        request.session["theme"] = theme
    return theme
