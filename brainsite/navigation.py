"""The console's navigation, written once: the main menu's four groups and, inside the Knowledge
group, the Knowledge page's tab bar. `templates/nav.html` and `templates/knowledge/_tabs.html`
only render NAVIGATION; the context processor `navigation` marks what is current for a request.

It lives in the project, above the three apps, because it names pages of all of them (by URL
name). A new console page with a place in the menu, or a new Knowledge tab, is one line here."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Tab:
    """A tab of the Knowledge page: current on the pages that include the tab bar with one of
    `tabs` (the `tab` a view puts in its context)."""

    label: str
    url_name: str
    tabs: tuple[str, ...]


@dataclass(frozen=True)
class Link:
    """A link of the menu, current on the pages named `names` (or starting `name_prefix`), or
    whose path starts with one of `paths`, except the pages named `but`. `admin`: shown to admins
    only (nav.html reads the console's `role`, so the menu costs no query)."""

    label: str
    url_name: str
    names: tuple[str, ...] = ()
    name_prefix: str = ""
    paths: tuple[str, ...] = ()
    but: tuple[str, ...] = ()
    admin: bool = False
    tabs: tuple[Tab, ...] = ()

    def is_current(self, name: str, path: str) -> bool:
        if name in self.but:
            return False
        return (
            name in self.names
            or bool(self.name_prefix and name.startswith(self.name_prefix))
            or path.startswith(self.paths)
        )


@dataclass(frozen=True)
class Group:
    """A menu group (a `<details>` dropdown): current when one of its links is, or on the pages
    named `also` (pages of the group without a link of their own)."""

    label: str
    links: tuple[Link, ...]
    also: tuple[str, ...] = ()
    badge: str = ""  # a template shown beside the label (the review queue's count)


KNOWLEDGE_TABS = (
    Tab("Entries", "entry-list", ("entries", "edit", "projection", "audit-entry")),
    Tab("Materials", "material-list", ("materials",)),
    Tab("Skill experience", "skill-experience", ("skills",)),
    Tab("Dreaming", "dreaming-tab", ("dreaming",)),
    Tab("Audit", "audit-list", ("audit",)),
    Tab("Status", "knowledge-status", ("status",)),
)

NAVIGATION = (
    Group(
        "Review",
        (
            Link("Review queue", "review-queue", names=("review-queue",)),
            Link("Stale", "stale-list", names=("stale-list",)),
            Link("Consolidation", "consolidation-list", name_prefix="consolidation"),
            Link("Eval gate", "gate", names=("gate", "dataset-list", "dataset-edit")),
        ),
        badge="memory/lifecycle/_queue_count.html",
    ),
    Group(
        "Knowledge",
        (
            # The Knowledge page: every tab of its bar but Status, which the menu shows under
            # Operations.
            Link(
                "Entries",
                "entry-list",
                paths=("/knowledge/",),
                but=("knowledge-status",),
                tabs=KNOWLEDGE_TABS,
            ),
            Link("Memories", "memory-list", names=("memory-list", "memory-detail")),
            Link("Recall", "recall-playground", names=("recall-playground", "recall-browse")),
        ),
        also=("search",),
    ),
    Group(
        "Agents",
        (
            Link("Agent library", "agent-list", paths=("/agents/", "/skills/")),
            Link("Models", "model-list", names=("model-list",)),
        ),
    ),
    Group(
        "Operations",
        (
            Link("Status", "knowledge-status", names=("knowledge-status",)),
            Link("Settings", "settings", names=("settings",), admin=True),
            Link("Webhooks", "webhooks", names=("webhooks",), admin=True),
            Link("People & tokens", "people", names=("people", "tokens"), admin=True),
            Link("API", "api-docs"),
        ),
        also=("account",),
    ),
)


@dataclass
class Shown:
    """A group as one request sees it: its links, each with whether it is current."""

    group: Group
    links: list[tuple[Link, bool]] = field(default_factory=list)
    current: bool = False


def navigation_for(name: str, path: str) -> list[Shown]:
    shown = []
    for group in NAVIGATION:
        links = [(link, link.is_current(name, path)) for link in group.links]
        shown.append(Shown(group, links, any(c for _, c in links) or name in group.also))
    return shown


def navigation(request):
    """Context processor: `navigation` (the menu, marked for this request) and `knowledge_tabs`
    (the Knowledge page's tab bar)."""
    match = getattr(request, "resolver_match", None)
    name = (match.url_name if match else "") or ""
    return {"navigation": navigation_for(name, request.path), "knowledge_tabs": KNOWLEDGE_TABS}
