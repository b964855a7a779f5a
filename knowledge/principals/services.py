"""Every write to principals (agents, people, integrations, console users), tokens and run-time
settings."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from knowledge.audit.services import audit_record
from knowledge.errors import Invalid
from knowledge.models import Agent, ApiToken, Integration, Person, Setting
from knowledge.models.principals import hash_token
from knowledge.principals.principal import ROLES, Principal
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


def person_get_or_create(*, actor: Principal, name: str, display_name: str = "") -> Person:
    """The person with this name, created (and audited) if unknown."""
    with transaction.atomic():
        person, created = Person.objects.get_or_create(name=name, defaults={"display_name": display_name})
        if created:
            person.full_clean()
            audit_record("person.created", actor=actor, object_type="person", object_ids=[person.pk])
    return person


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
