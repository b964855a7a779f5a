"""Who is asking: one Principal type for console users, agent tokens, person tokens and
integration tokens, so every access check is written once."""

from dataclasses import InitVar, dataclass, field

from django.contrib.auth.models import AbstractBaseUser

from knowledge.models import Agent, Integration

REVIEWER, ADMIN = "reviewer", "admin"
ROLES = (REVIEWER, ADMIN)


def user_role(user) -> str | None:
    """A console user's role: admin (superuser or 'admin' group), reviewer, or None (signed out
    or deactivated)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    return held_role(user)


def held_role(user) -> str | None:
    """The role a console user holds, active or not (the people page lists both)."""
    if user.is_superuser:
        return ADMIN
    names = {g.name for g in user.groups.all()}
    if ADMIN in names:
        return ADMIN
    if REVIEWER in names:
        return REVIEWER
    return None


KINDS = ("agent", "person", "integration", "system")


@dataclass
class Principal:
    """Who is asking. Its kind is not a public attribute: who may do what is asked of the
    predicates below (is_agent, is_person …) and of knowledge/access.py, never spelled out by
    comparing strings; `kind_label` is what author and audit fields record."""

    kind: InitVar[str]  # agent | person | integration | system
    name: str
    role: str | None = None  # reviewer | admin for people
    agent: Agent | None = None
    user: AbstractBaseUser | None = None
    integration: Integration | None = None
    _kind: str = field(init=False, repr=False)

    def __post_init__(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"A principal is one of {', '.join(KINDS)}, not {kind!r}.")
        self._kind = kind

    @property
    def kind_label(self) -> str:
        """The kind as author and audit fields record it: a label to write, not to compare."""
        return self._kind

    # DRF and Django's permission classes look for this.
    is_authenticated = True

    @classmethod
    def for_user(cls, user) -> "Principal":
        return cls(kind="person", name=user.get_username(), role=user_role(user), user=user)

    @classmethod
    def for_agent(cls, agent: Agent) -> "Principal":
        return cls(kind="agent", name=agent.name, agent=agent)

    @classmethod
    def for_integration(cls, integration: Integration) -> "Principal":
        return cls(kind="integration", name=integration.name, integration=integration)

    @classmethod
    def system(cls, name: str = "system") -> "Principal":
        """A background job acting on its own (the distiller, Dreaming, a schedule)."""
        return cls(kind="system", name=name, role=ADMIN)

    @property
    def is_admin(self) -> bool:
        return self._kind in ("person", "system") and self.role == ADMIN

    @property
    def is_reviewer(self) -> bool:
        """Reviewers and admins may review; admins may do everything reviewers do."""
        return self._kind in ("person", "system") and self.role in ROLES

    @property
    def is_person(self) -> bool:
        return self._kind == "person"

    @property
    def is_agent(self) -> bool:
        """An agent's token: it reads and writes as that agent only (knowledge.access)."""
        return self._kind == "agent"

    @property
    def is_integration(self) -> bool:
        """An integration's token: it posts evidence to the channels it takes part in."""
        return self._kind == "integration"

    @property
    def is_system(self) -> bool:
        """A background job acting on its own."""
        return self._kind == "system"

    def as_dict(self) -> dict:
        return {"kind": self._kind, "name": self.name, "role": self.role}
