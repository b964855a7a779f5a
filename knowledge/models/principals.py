import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q

NAME_HELP = "Lower-case letters, digits, dots, dashes and underscores."


class Agent(models.Model):
    """An AI agent: it writes and recalls memories through the API with its tokens."""

    name = models.SlugField(max_length=64, unique=True, help_text=NAME_HELP)
    instructions = models.TextField(blank=True)
    trusted = models.BooleanField(default=False, help_text="Trusted writes go into force at once.")
    model_profile = models.CharField(max_length=64, blank=True)
    # This agent's own daily model budget (blank: BRAIN_AGENT_DAILY_CALLS / _TOKENS).
    model_daily_calls = models.PositiveIntegerField(null=True, blank=True)
    model_daily_tokens = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Person(models.Model):
    """Someone agents talk to or learn about; a console user may be linked to one."""

    name = models.SlugField(max_length=64, unique=True, help_text=NAME_HELP)
    display_name = models.CharField(max_length=200, blank=True)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="person"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.display_name or self.name


class ConsolePreferences(models.Model):
    """A console user's own choices that follow them from browser to browser: the colour theme
    (auto follows the operating system)."""

    AUTO, LIGHT, DARK = "auto", "light", "dark"
    THEMES = [(t, t) for t in (AUTO, LIGHT, DARK)]

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="console_preferences"
    )
    theme = models.CharField(max_length=5, choices=THEMES, default=AUTO)


class Integration(models.Model):
    """An external system (ticketing, KB, CRM…) that pushes source state; it reads no memory."""

    name = models.SlugField(max_length=64, unique=True, help_text=NAME_HELP)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token for exactly one of: an agent, a console user, an integration. Only its
    sha256 is stored; the raw token is shown once, when it is made."""

    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    label = models.CharField(max_length=100, blank=True)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="tokens")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="api_tokens"
    )
    integration = models.ForeignKey(
        Integration, null=True, blank=True, on_delete=models.CASCADE, related_name="tokens"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                name="token_has_one_owner",
                condition=(
                    Q(agent__isnull=False, user__isnull=True, integration__isnull=True)
                    | Q(agent__isnull=True, user__isnull=False, integration__isnull=True)
                    | Q(agent__isnull=True, user__isnull=True, integration__isnull=False)
                ),
            )
        ]

    @staticmethod
    def new_raw() -> str:
        return "brn_" + secrets.token_urlsafe(32)

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def owner_label(self) -> str:
        if self.agent_id:
            return f"agent {self.agent.name}"
        if self.user_id:
            return f"person {self.user.username}"
        return f"integration {self.integration.name}"
