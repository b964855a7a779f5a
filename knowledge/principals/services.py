"""Every write to principals (agents, people, integrations, console users), tokens and run-time
settings."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from knowledge import access
from knowledge.audit.services import audit_record
from knowledge.errors import Invalid, NotFound, Refused
from knowledge.models import Agent, ApiToken, ConsolePreferences, Integration, Person, Setting
from knowledge.models.principals import hash_token
from knowledge.principal import ADMIN, ROLES, Principal, user_role
from knowledge.settings_store import MODES


def token_create(*, actor: Principal, agent=None, user=None, integration=None, label: str = "") -> str:
    """Make a token for exactly one owner and return the raw token (it is shown only once)."""
    raw = ApiToken.new_raw()
    with transaction.atomic():
        token = ApiToken.objects.create(
            key_hash=hash_token(raw),
            prefix=raw[:12],
            label=label,
            agent=agent,
            user=user,
            integration=integration,
        )
        audit_record(
            "token.created",
            actor=actor,
            object_type="token",
            object_ids=[token.pk],
            data={"owner": token.owner_label, "prefix": token.prefix},
        )
    return raw


def token_revoke(*, actor: Principal, token_id: int) -> ApiToken:
    """Revoke a token now; it stops working on its next request. Revoking twice is a no-op."""
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().get(pk=token_id)
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            audit_record(
                "token.revoked",
                actor=actor,
                object_type="token",
                object_ids=[token.pk],
                data={"owner": token.owner_label, "prefix": token.prefix},
            )
    return token


def agent_create(*, actor: Principal, name: str, trusted: bool = False, instructions: str = "") -> Agent:
    with transaction.atomic():
        if Agent.objects.filter(name=name).exists():
            raise Invalid({"name": [f"An agent named {name} already exists."]})
        agent = Agent(name=name, trusted=trusted, instructions=instructions)
        agent.full_clean()
        agent.save()
        audit_record(
            "agent.created",
            actor=actor,
            owner=agent.name,
            object_type="agent",
            object_ids=[agent.pk],
            data={"trusted": trusted},
        )
    return agent


def agent_update(*, actor: Principal, agent: Agent, trusted: bool, instructions: str) -> Agent:
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=agent.pk)
        agent.trusted, agent.instructions = trusted, instructions
        agent.save(update_fields=["trusted", "instructions"])
        audit_record(
            "agent.updated",
            actor=actor,
            owner=agent.name,
            object_type="agent",
            object_ids=[agent.pk],
            data={"trusted": trusted},
        )
    return agent


def integration_create(*, actor: Principal, name: str) -> Integration:
    with transaction.atomic():
        if Integration.objects.filter(name=name).exists():
            raise Invalid({"name": [f"An integration named {name} already exists."]})
        integration = Integration(name=name)
        integration.full_clean()
        integration.save()
        audit_record(
            "integration.created", actor=actor, object_type="integration", object_ids=[integration.pk]
        )
    return integration


def integration_get_or_create(*, actor: Principal, name: str) -> Integration:
    """The integration with this name, created (and audited) if unknown: a token made for a new
    integration names it."""
    with transaction.atomic():
        integration = Integration.objects.filter(name=name).first()
        return integration or integration_create(actor=actor, name=name)


def person_get_or_create(*, actor: Principal, name: str, display_name: str = "") -> Person:
    """The person with this name, created (and audited) if unknown."""
    with transaction.atomic():
        person, created = Person.objects.get_or_create(name=name, defaults={"display_name": display_name})
        if created:
            person.full_clean()
            audit_record("person.created", actor=actor, object_type="person", object_ids=[person.pk])
    return person


def people_get_or_create(*, actor: Principal, names: list[str]) -> None:
    """The people with these names, the unknown ones created together and audited in one
    `person.created` event (an import of many people: one statement, not a round of four each).
    Each new name is checked as person_get_or_create checks it, before any is created."""
    with transaction.atomic():
        have = set(Person.objects.filter(name__in=names).values_list("name", flat=True))
        new = [Person(name=name) for name in dict.fromkeys(names) if name not in have]
        for person in new:
            person.full_clean(validate_unique=False, validate_constraints=False)  # names known new above
        Person.objects.bulk_create(new)
        if new:
            audit_record("person.created", actor=actor, object_type="person", object_ids=[p.pk for p in new])


def consoleuser_create(*, actor: Principal, username: str, role: str, password: str, email: str = ""):
    """A console user with one role (reviewer or admin), linked to a person of the same name."""
    if role not in ROLES:
        raise Invalid({"role": [f"Role must be one of {', '.join(ROLES)}."]})
    User = get_user_model()
    with transaction.atomic():
        if User.objects.filter(username=username).exists():
            raise Invalid({"username": [f"A user named {username} already exists."]})
        user = User.objects.create_user(
            username=username, password=password, email=email, is_staff=(role == "admin")
        )
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        person, _ = Person.objects.get_or_create(name=username.lower())
        if person.user_id is None:
            person.user = user
            person.save(update_fields=["user"])
        audit_record(
            "user.created", actor=actor, object_type="user", object_ids=[user.pk], data={"role": role}
        )
    return user


def _locked_user(user_id: int):
    user = get_user_model().objects.select_for_update().filter(pk=user_id).first()
    if user is None:
        raise NotFound(f"There is no console user {user_id}.")
    return user


def _other_active_admins(user) -> bool:
    """Whether an active admin other than `user` remains, so no change locks every admin out."""
    others = get_user_model().objects.filter(is_active=True).exclude(pk=user.pk)
    return others.filter(is_superuser=True).exists() or others.filter(groups__name=ADMIN).exists()


def consoleuser_set_role(*, actor: Principal, user_id: int, role: str):
    """Give a console user exactly one role. Refused for the last active admin's own demotion,
    so the workspace always keeps someone who can manage people."""
    access.require_role(actor, ADMIN, "Only admins change roles.")
    if role not in ROLES:
        raise Invalid({"role": [f"Role must be one of {', '.join(ROLES)}."]})
    with transaction.atomic():
        user = _locked_user(user_id)
        before = user_role(user)
        if before == role:
            return user
        if before == ADMIN and not _other_active_admins(user):
            raise Refused(f"{user.username} is the last admin; make someone else an admin first.")
        user.groups.remove(*Group.objects.filter(name__in=ROLES))
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        user.is_staff = role == ADMIN
        user.save(update_fields=["is_staff"])
        audit_record(
            "user.role_changed",
            actor=actor,
            object_type="user",
            object_ids=[user.pk],
            data={"before": before, "after": role},
        )
    return user


def consoleuser_set_active(*, actor: Principal, user_id: int, active: bool):
    """Deactivate a console user (they can no longer log in and their API tokens stop working;
    nothing of theirs is deleted) or activate them again. An admin cannot deactivate themself,
    nor the last active admin."""
    access.require_role(actor, ADMIN, "Only admins deactivate people.")
    with transaction.atomic():
        user = _locked_user(user_id)
        if user.is_active == active:
            return user
        if not active:
            if actor.user is not None and actor.user.pk == user.pk:
                raise Refused("You cannot deactivate yourself.")
            if user_role(user) == ADMIN and not _other_active_admins(user):
                raise Refused(f"{user.username} is the last admin.")
        user.is_active = active
        user.save(update_fields=["is_active"])
        audit_record(
            "user.activated" if active else "user.deactivated",
            actor=actor,
            object_type="user",
            object_ids=[user.pk],
        )
    return user


def consoleuser_password_set(*, actor: Principal, user, password: str) -> None:
    """Set a console user's password (their own, or anyone's for an admin), checked against the
    password validators; audited without the password, of course."""
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError

    if not (access.has_role(actor, ADMIN) or (actor.user is not None and actor.user.pk == user.pk)):
        raise Refused("You can change only your own password.")
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise Invalid({"password": list(exc.messages)}) from None
    with transaction.atomic():
        user = _locked_user(user.pk)
        user.set_password(password)
        user.save(update_fields=["password"])
        audit_record("user.password_changed", actor=actor, object_type="user", object_ids=[user.pk])


def console_theme_set(*, actor: Principal, user, theme: str) -> ConsolePreferences:
    """Set a console user's own colour theme (auto, light or dark), kept for them wherever they
    sign in; audited with the old and new theme."""
    if theme not in dict(ConsolePreferences.THEMES):
        raise Invalid({"theme": f"Choose one of {', '.join(dict(ConsolePreferences.THEMES))}."})
    if actor.user is None or actor.user.pk != user.pk:
        raise Refused("You can choose only your own theme.")
    with transaction.atomic():
        preferences, _ = ConsolePreferences.objects.select_for_update().get_or_create(user=user)
        before = preferences.theme
        preferences.theme = theme
        preferences.save(update_fields=["theme"])
        audit_record(
            "user.theme_changed",
            actor=actor,
            object_type="user",
            object_ids=[user.pk],
            data={"before": before, "after": theme},
        )
    return preferences


def setting_set(*, actor: Principal, name: str, value) -> Setting:
    """Change a run-time mode (admins only, audited with old and new value)."""
    if name not in MODES:
        raise Invalid({"name": [f"Unknown setting {name}."]})
    spec = MODES[name]
    choices = spec["choices"]
    if choices is not None and value not in choices:
        raise Invalid({"value": [f"Choose one of {', '.join(map(str, choices))}."]})
    if choices is None:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise Invalid({"value": ["A whole number is required."]})
        if not spec["minimum"] <= value <= spec["maximum"]:
            raise Invalid({"value": [f"Choose a number from {spec['minimum']} to {spec['maximum']}."]})
    from knowledge.settings_store import setting_cache_clear, setting_get

    with transaction.atomic():
        old = setting_get(name)
        setting, _ = Setting.objects.update_or_create(name=name, defaults={"value": value})
        audit_record(
            "settings.changed",
            actor=actor,
            object_type="setting",
            object_ids=[name],
            data={"from": old, "to": value},
            revisions=[("setting", name, {"value": old}, {"value": value})],
        )
        transaction.on_commit(setting_cache_clear)
    setting_cache_clear()
    return setting
