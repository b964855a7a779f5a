"""One sweep over every surface, for every kind of principal, with real ids — one's own and
others': every GET operation of the OpenAPI schema and every console page answers without a
server error, and an API path always answers JSON. The console's doors are walked too: every
view but login, logout and the health endpoints needs a logged-in person, and the decorators that
guard a view decorate a view.

The ids come from the demo workspace (`manage.py seed_demo`: two agents, people, channels,
conversations, memories in every state, entries, a plan, a gate dataset, a skill, materials), so
a path or page added later is swept without a change here."""

import ast
import inspect
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from knowledge.principals import services as principals
from tests import factory
from tests.openapi import api_spec

ROOT = Path(__file__).resolve().parent.parent
MISSING = 10**9  # an id no row has
# Console paths anyone may open: signing in and out, the health and metrics endpoints (the
# latter behind its own token).
OPEN = {"login/", "logout/", "healthz", "metrics"}
# The navigation's review badge, polled by htmx, answers 204 (no content) to anyone who is not a
# reviewer rather than a login page squeezed into the badge; it shows nothing.
NO_CONTENT_FOR_STRANGERS = {"review/count"}


def _models():
    from django.apps import apps

    return {model.__name__: model for model in apps.get_models()}


def _sample(queryset, field="pk", n=3):
    """A few values of `field`: the first ones, and the last (different owners and stores come
    out of a queryset ordered by them)."""
    values = list(queryset.values_list(field, flat=True))
    return list(dict.fromkeys(values[:n] + values[-1:]))


def _values() -> dict[str, list]:
    """Real values for each path parameter name (and, for `pk`, by the path it is under)."""
    m = _models()
    memories = m["Memory"].objects.order_by("owner_id", "store", "status", "pk")
    names = {
        "agent": ["copilot", "scribe", "ghost"],
        "skill": _sample(m["Skill"].objects.order_by("pk"), "name") + ["ghost"],
        "name": ["copilot", "scribe", "ghost"],
        "kind": ["thread", "episode", "entry", "memory", "message", "ghost"],
        "ref": ["INC-1", "1"],
    }
    ids = {
        "memory": _sample(memories, n=8),
        "entry": _sample(m["Entry"].objects.order_by("owner_id", "store", "pk")),
        "block": _sample(memories.filter(entry__isnull=False)),
        "lesson": _sample(memories.filter(skill__isnull=False)),
        "relation": _sample(m["EntryRelation"].objects.order_by("pk")),
        "event": _sample(m["AuditEvent"].objects.order_by("pk")),
        "conversation": _sample(m["Conversation"].objects.order_by("agent_id", "pk")),
        "material": _sample(m["Material"].objects.order_by("owner_id", "pk")),
        "plan": _sample(m["ConsolidationPlan"].objects.order_by("pk")),
        "job": _sample(m["ModelJob"].objects.order_by("pk")),
        "token": _sample(m["ApiToken"].objects.order_by("pk")),
        "rule": _sample(m["SignalRule"].objects.order_by("pk")),
        "grant": _sample(m["ConnectorGrant"].objects.order_by("pk")),
        "webhook": _sample(m["Webhook"].objects.order_by("pk")),
        "run": _sample(m["DreamingRun"].objects.order_by("pk")),
        "browse": _sample(m["Message"].objects.order_by("channel_id", "pk"))
        + _sample(m["Episode"].objects.order_by("pk"))
        + _sample(m["Entry"].objects.order_by("pk")),
        "user": [factory.make_user("sweep-someone").pk],
        "dataset": _sample(m["EvalDataset"].objects.order_by("pk"), "name"),
    }
    return {"names": names, "ids": ids}


# The id pool a parameter draws from: by its name, or for `pk`/`id` by the path it is under.
BY_NAME = {
    "memory_id": "memory",
    "entry_id": "entry",
    "block_id": "block",
    "lesson_id": "lesson",
    "relation_id": "relation",
    "event_id": "event",
    "material_id": "material",
    "plan_id": "plan",
    "job_id": "job",
    "token_id": "token",
    "rule_id": "rule",
    "grant_id": "grant",
    "run_id": "run",
    "user_id": "user",
}
BY_PATH = (
    ("recall/browse", "browse"),
    ("memory/browse", "browse"),
    ("entries", "entry"),
    ("audit", "event"),
    ("materials", "material"),
    ("webhooks", "webhook"),
    ("conversations", "conversation"),
)


def _choices(path: str, name: str, kind: str, values: dict) -> list:
    if kind in ("string", "str", "slug", "path"):
        if name in ("name",) and "datasets" in path:
            return values["ids"]["dataset"] + ["ghost"]
        return values["names"].get(name.rsplit("_", 1)[0] if name.endswith("_name") else name, ["ghost"])
    pool = BY_NAME.get(name) or next((p for part, p in BY_PATH if part in path), None)
    return (values["ids"].get(pool) or [1]) + [MISSING]


def _expand(path: str, params: dict[str, str], values: dict):
    """Every URL of `path` with its parameters filled: each parameter in turn takes each of its
    values while the others keep their first."""
    firsts = {name: _choices(path, name, kind, values)[0] for name, kind in params.items()}
    seen = set()
    for name, kind in params.items():
        for value in _choices(path, name, kind, values):
            filled = {**firsts, name: value}
            url = re.sub(r"\{(\w+)\}", lambda m, f=filled: str(f[m[1]]), path)
            url = re.sub(r"<(?:(\w+):)?(\w+)>", lambda m, f=filled: str(f[m[2]]), url)
            if url not in seen:
                seen.add(url)
                yield url
    if not params:
        yield path


def _api_gets(values):
    for path, operations in sorted(api_spec()["paths"].items()):
        if "get" not in operations:
            continue
        params = {
            p["name"]: p.get("schema", {}).get("type", "string")
            for p in operations["get"].get("parameters", [])
            if p["in"] == "path"
        }
        yield from _expand(path, params, values)


def _console_patterns(patterns=None, prefix=""):
    for p in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(p, URLResolver):
            yield from _console_patterns(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern) and not (prefix + str(p.pattern)).startswith("api/"):
            yield prefix + str(p.pattern), p.callback


def _console_gets(values):
    for route, _ in _console_patterns():
        params = dict((name, kind or "str") for kind, name in re.findall(r"<(?:(\w+):)?(\w+)>", route))
        for url in _expand(route, params, values):
            yield "/" + url


@pytest.fixture
def workspace(transactional_db):
    """The demo workspace, people of both roles, and a client per kind of principal."""
    call_command("seed_demo", verbosity=0)
    from knowledge.models import Agent

    admin, reviewer = factory.make_user("sweep-admin", role="admin"), factory.make_user("sweep-rita")
    tokens = {
        "agent": factory.make_token(agent=Agent.objects.get(name="copilot")),
        "trusted agent": factory.make_token(agent=Agent.objects.get(name="scribe")),
        "integration": factory.make_token(
            integration=principals.integration_create(actor=factory.SYSTEM, name="sweep-tickets")
        ),
    }
    api, console = {}, {}
    for who, token in tokens.items():
        api[who] = APIClient()
        api[who].credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        console[who] = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    for who, user in (("admin", admin), ("reviewer", reviewer)):
        api[who], console[who] = APIClient(), Client()
        api[who].force_login(user)
        console[who].force_login(user)
    api["anonymous"], console["anonymous"] = APIClient(), Client()
    for client in [*api.values(), *console.values()]:
        client.raise_request_exception = False  # a server error is a finding, collected below
    return {"api": api, "console": console, "values": _values()}


def test_every_get_and_every_page_answers_every_principal_without_a_server_error(workspace):
    failures = []
    urls = list(_api_gets(workspace["values"]))
    assert len(urls) > 60  # the walk reaches the schema's GET operations with their ids
    for who, client in workspace["api"].items():
        for url in urls:
            response = client.get(url)
            is_json = response.get("Content-Type", "").startswith("application/json")
            download = url.endswith("/original") and response.status_code == 200
            if response.status_code >= 500 or not (is_json or download):
                failures.append(f"{who} GET {url} → {response.status_code} {response.content[:80]!r}")
    pages = list(_console_gets(workspace["values"]))
    for who, client in workspace["console"].items():
        for url in pages:
            response = client.get(url)
            if response.status_code >= 500:
                failures.append(f"{who} GET {url} → {response.status_code}")
    assert not failures, f"{len(failures)} server errors or non-JSON API answers:\n" + "\n".join(failures)


def test_every_console_view_but_login_and_health_needs_a_logged_in_person(workspace):
    """Anonymous callers, and agents or integrations with only a token, get the login page (or
    a 4xx) from every console view, for GET and POST alike; none runs the view."""
    failures = []
    for who in ("anonymous", "agent", "integration"):
        client = workspace["console"][who]
        for route, _ in _console_patterns():
            if route in OPEN:
                continue
            if route in NO_CONTENT_FOR_STRANGERS:
                for method, status in (("get", 204), ("post", 405)):
                    response = getattr(client, method)("/" + route)
                    if response.status_code != status or response.content:
                        failures.append(f"{who} {method.upper()} /{route} → {response.status_code}")
                continue
            params = dict((n, k or "str") for k, n in re.findall(r"<(?:(\w+):)?(\w+)>", route))
            url = "/" + next(_expand(route, params, workspace["values"]))
            for method in ("get", "post"):
                response = getattr(client, method)(url)
                to_login = response.status_code == 302 and "/login/" in response["Location"]
                if not (to_login or response.status_code in (401, 403, 404)):
                    failures.append(f"{who} {method.upper()} {url} → {response.status_code}")
    assert not failures, "console views that answered without a login:\n" + "\n".join(failures)


# The decorators that guard a console view; on any other function they guard nothing.
GUARDS = {"require_POST", "require_GET", "require_http_methods", "login_required"} | {
    "reviewer_required",
    "admin_required",
}


def _guarded_functions():
    for app in ("knowledge", "memory", "curation"):
        for path in sorted((ROOT / app).rglob("views.py")):
            tree = ast.parse(path.read_text())
            for node in tree.body:
                if isinstance(node, ast.FunctionDef):
                    names = {
                        (d.func if isinstance(d, ast.Call) else d).id
                        for d in node.decorator_list
                        if isinstance(d.func if isinstance(d, ast.Call) else d, ast.Name)
                    }
                    if names & GUARDS:
                        module = path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
                        yield module, node.name, names & GUARDS


def test_view_guards_decorate_views_and_post_only_views_refuse_get(workspace):
    views = {}
    for route, callback in _console_patterns():
        function = inspect.unwrap(callback)
        views[(function.__module__, function.__name__)] = route
    stray = [f"{m}.{n} ({', '.join(sorted(g))})" for m, n, g in _guarded_functions() if (m, n) not in views]
    assert stray == [], "guard decorators on functions no URL reaches:\n" + "\n".join(stray)

    admin = workspace["console"]["admin"]
    answered = []
    for module, name, guards in _guarded_functions():
        if "require_POST" not in guards:
            continue
        route = views[(module, name)]
        params = dict((n, k or "str") for k, n in re.findall(r"<(?:(\w+):)?(\w+)>", route))
        url = "/" + next(_expand(route, params, workspace["values"]))
        response = admin.get(url)
        if response.status_code != 405:
            answered.append(f"GET {url} → {response.status_code}")
    assert answered == [], "POST-only views that answered GET:\n" + "\n".join(answered)
