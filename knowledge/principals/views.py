"""Console views for the foundation: health, home, owner selector, agent library, settings."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render, resolve_url
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from knowledge import access, health, names
from knowledge.errors import Invalid
from knowledge.models import Agent, ApiToken, Integration
from knowledge.principal import ADMIN, held_role
from knowledge.principals import selectors, services
from knowledge.principals.forms import (
    AgentEditForm,
    AgentForm,
    PersonCreateForm,
    RoleForm,
    TokenCreateForm,
    people_with_a_role,
)
from knowledge.principals.permissions import admin_required, console_principal, reviewer_required
from knowledge.settings_store import MODES, setting_get
from knowledge.web import console_write, error_text


@never_cache
@require_GET
def healthz(request):
    """Liveness and readiness in one JSON. `status` is "error" (503) when the database does not
    answer, "degraded" (200: requests are served, but not everything works) when migrations are
    pending, the worker's heartbeat is missing or older than three beats, or jobs wait and the
    worker starts none (knowledge.health), else "ok"."""
    body = {"database": "embedded" if settings.EMBEDDED_DATABASE else "external"}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        signals = selectors.worker_signals()
    except DatabaseError as exc:
        body.update(status="error", database_reachable=False, error=str(exc).splitlines()[0][:200])
        return JsonResponse(body, status=503)
    beat = signals["beat"]
    worker = health.worker_state(
        beat, oldest_waiting=signals["oldest_waiting"], job_started=signals["job_started"]
    )
    problems = []
    if pending:
        problems.append(f"{len(pending)} migration(s) not applied")
    if worker != "ok":
        problems.append(health.PROBLEMS[worker])
    body.update(
        status="degraded" if problems else "ok",
        problems=problems,
        database_reachable=True,
        migrations_applied=not pending,
        pending_migrations=len(pending),
        worker=worker,
        worker_heartbeat_age_seconds=round((timezone.now() - beat).total_seconds(), 1) if beat else None,
        worker_stale_after_seconds=health.worker_stale_after().total_seconds(),
    )
    return JsonResponse(body)


@reviewer_required
def home(request):
    return render(request, "knowledge/principals/home.html", {"agents": Agent.objects.count()})


def safe_next(request, target: str | None, default: str = "home") -> str:
    """`target` when it is a path on this site, else `default`: a `next` pointing elsewhere
    (another host, a scheme-relative //host, javascript:) never leaves the site."""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return resolve_url(default)


@reviewer_required
@require_POST
def owner_select(request):
    """Remember the owner-principal selector in the session; every Knowledge tab reads it."""
    name = request.POST.get("owner", "")
    if name and names.owner_selected(name) is None:
        return HttpResponseBadRequest("Unknown agent.")
    request.session["owner"] = name
    return redirect(safe_next(request, request.POST.get("next")))


@reviewer_required
def agent_list(request):
    form = AgentForm()
    if request.method == "POST":
        if not access.has_role(request.principal, ADMIN):
            messages.error(request, "Only admins can create agents.")
            return redirect("agent-list")
        form = AgentForm(request.POST)
        if form.is_valid():
            try:
                agent = services.agent_create(actor=request.principal, **form.cleaned_data)
            except Invalid as exc:  # the name is taken
                form.add_error(None, error_text(exc))
            else:
                messages.success(request, f"Agent {agent.name} created.")
                return redirect("agent-detail", name=agent.name)
    return render(
        request, "knowledge/principals/agent_list.html", {"agents": selectors.agent_list(), "form": form}
    )


@reviewer_required
def agent_detail(request, name):
    agent = names.agent_named(name)
    form = AgentEditForm(initial={"trusted": agent.trusted, "instructions": agent.instructions})
    if request.method == "POST":
        if not access.has_role(request.principal, ADMIN):
            messages.error(request, "Only admins can edit agents.")
            return redirect("agent-detail", name=name)
        form = AgentEditForm(request.POST)
        if form.is_valid():
            services.agent_update(actor=request.principal, agent=agent, **form.cleaned_data)
            messages.success(request, "Saved.")
            return redirect("agent-detail", name=name)
    context = {"agent": agent, "form": form, "tokens": selectors.token_list_for_agent(agent)}
    return render(request, "knowledge/principals/agent_detail.html", context)


@admin_required
@require_POST
def agent_token_create(request, name):
    agent = names.agent_named(name)
    raw = services.token_create(
        actor=request.principal, agent=agent, label=request.POST.get("label", "")[:100]
    )
    tokens = selectors.token_list_for_agent(agent)
    context = {"agent": agent, "tokens": tokens, "new_token": raw}
    template = "knowledge/principals/agent_detail.html"
    if request.htmx:
        template += "#tokens"
    else:
        context["form"] = AgentEditForm(
            initial={"trusted": agent.trusted, "instructions": agent.instructions}
        )
    return render(request, template, context)


@admin_required
@require_POST
def agent_token_revoke(request, name, token_id):
    agent = names.agent_named(name)
    token = get_object_or_404(ApiToken, pk=token_id, agent=agent)
    services.token_revoke(actor=request.principal, token_id=token.pk)
    if request.htmx:
        return render(
            request,
            "knowledge/principals/agent_detail.html#tokens",
            {"agent": agent, "tokens": selectors.token_list_for_agent(agent)},
        )
    messages.success(request, f"Token {token.prefix}… revoked.")
    return redirect("agent-detail", name=name)


@admin_required
def settings_page(request):
    if request.method == "POST":
        name = request.POST.get("name", "")
        raw = request.POST.get("value", "")
        value = {"true": True, "false": False}.get(raw, raw)
        with console_write(request, f"{name} is now {raw}.", fields=False):
            services.setting_set(actor=request.principal, name=name, value=value)
        return redirect("settings")
    modes = [
        {"name": name, "value": setting_get(name), "default": getattr(settings, name), **spec}
        for name, spec in MODES.items()
    ]
    return render(request, "knowledge/principals/settings.html", {"modes": modes})


# --- people, tokens and one's own account ------------------------------------------------------


def _people_context(request, **extra):
    users = list(selectors.console_users())
    for user in users:
        user.role = held_role(user) or ""
    return {"users": users, "form": PersonCreateForm(), "me": request.user.pk, **extra}


@admin_required
def people_page(request):
    """Admins: the console's people — create one with a role, change a role, deactivate or
    activate. Every change is audited by its service."""
    if request.method == "POST":
        form = PersonCreateForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                validate_password(data["password"])
                services.consoleuser_create(
                    actor=request.principal,
                    username=data["username"],
                    role=data["role"],
                    password=data["password"],
                )
            except DjangoValidationError as exc:
                form.add_error("password", exc)
            except Invalid as exc:
                form.add_error(None, error_text(exc))
            else:
                messages.success(request, f"{data['username']} can now log in as {data['role']}.")
                return redirect("people")
        return render(request, "knowledge/principals/people.html", {**_people_context(request), "form": form})
    return render(request, "knowledge/principals/people.html", _people_context(request))


@admin_required
@require_POST
def person_change(request, user_id: int):
    """One change to one person: a new role, or deactivate / activate."""
    action = request.POST.get("action", "")
    with console_write(request, fields=False):
        if action == "role":
            form = RoleForm(request.POST)
            if not form.is_valid():
                raise Invalid({"role": ["Choose reviewer or admin."]})
            user = services.consoleuser_set_role(
                actor=request.principal, user_id=user_id, role=form.cleaned_data["role"]
            )
            messages.success(request, f"{user.username} is now {form.cleaned_data['role']}.")
        elif action in ("deactivate", "activate"):
            user = services.consoleuser_set_active(
                actor=request.principal, user_id=user_id, active=action == "activate"
            )
            messages.success(request, f"{user.username} {action}d.")
        else:
            raise Invalid({"action": ["Unknown change."]})
    return redirect("people")


def _tokens_context(request, **extra):
    return {
        "tokens": selectors.token_list(kind=request.GET.get("kind", "")),
        "kind": request.GET.get("kind", ""),
        "token_form": TokenCreateForm(),
        "agents": Agent.objects.order_by("name"),
        "integrations": Integration.objects.order_by("name"),
        "people": people_with_a_role(),
        **extra,
    }


@admin_required
def tokens_page(request):
    """Admins: every API token (agents', integrations', people's) with when it was last used;
    make a token for an agent, an integration or a reviewer or admin (shown once), revoke any."""
    template = "knowledge/principals/tokens.html"
    if request.method != "POST":
        return render(request, template, _tokens_context(request))
    form = TokenCreateForm(request.POST)
    if not form.is_valid():
        return render(request, template, _tokens_context(request, token_form=form), status=400)
    data = form.cleaned_data
    owner = {}
    try:
        with transaction.atomic():
            if data["kind"] == "agent":
                owner["agent"] = data["agent"]
            elif data["kind"] == "person":
                owner["user"] = data["person"]
            else:
                owner["integration"] = services.integration_get_or_create(
                    actor=request.principal, name=data["integration"]
                )
            raw = services.token_create(actor=request.principal, label=data["label"], **owner)
    except Invalid as exc:
        form.add_error(None, error_text(exc))
        return render(request, template, _tokens_context(request, token_form=form), status=400)
    for_whom = {
        "agent": lambda: f"agent {data['agent'].name}",
        "person": lambda: f"{held_role(data['person'])} {data['person'].username}",
        "integration": lambda: f"integration {data['integration']}",
    }[data["kind"]]()
    return render(request, template, _tokens_context(request, new_token=raw, new_token_for=for_whom))


@admin_required
@require_POST
def token_revoke_page(request, token_id: int):
    token = get_object_or_404(ApiToken, pk=token_id)
    services.token_revoke(actor=request.principal, token_id=token.pk)
    messages.success(request, f"Token {token.prefix}… ({token.owner_label}) revoked.")
    return redirect("tokens")


@login_required
@require_POST
def theme_set(request):
    """Anyone logged in: their colour theme, kept for them (and in this session, so no page
    looks it up again)."""
    theme = request.POST.get("theme", "")
    try:
        services.console_theme_set(actor=console_principal(request), user=request.user, theme=theme)
    except Invalid as exc:
        return HttpResponseBadRequest(error_text(exc))
    request.session["theme"] = theme
    return redirect(safe_next(request, request.POST.get("next")))


def account_page(request):
    """Anyone logged in: their own password (the current one is asked for first)."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    form = PasswordChangeForm(request.user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.consoleuser_password_set(
                actor=console_principal(request),
                user=request.user,
                password=form.cleaned_data["new_password1"],
            )
        except Invalid as exc:
            form.add_error("new_password1", error_text(exc))
        else:
            request.user.refresh_from_db()
            update_session_auth_hash(request, request.user)  # stay logged in here
            messages.success(request, "Your password is changed.")
            return redirect("account")
    return render(request, "knowledge/principals/account.html", {"form": form})
