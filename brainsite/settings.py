"""Brain's one settings file. Every value comes from the environment; .env.example lists them
all with their defaults."""

import json
import os
import re
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from brainsite.embedded_db import embedded_url, parse_database_url
from brainsite.ops.logs import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("BRAIN_VAR_DIR", BASE_DIR / "var"))


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    return env(name, "1" if default else "0").strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    return int(env(name, str(default)))


def _secret_key() -> str:
    if env("BRAIN_SECRET_KEY"):
        return env("BRAIN_SECRET_KEY")
    path = VAR_DIR / "secret_key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("BRAIN_DEBUG")
ALLOWED_HOSTS = env("BRAIN_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")
# Origins (scheme://host[:port]) a browser may post forms from, e.g. https://brain.example.com
# behind a TLS proxy. BRAIN_CSRF_TRUSTED_ORIGINS is the older name of the same setting.
CSRF_TRUSTED_ORIGINS = [
    o.strip()
    for o in (env("BRAIN_TRUSTED_ORIGINS") or env("BRAIN_CSRF_TRUSTED_ORIGINS")).split(",")
    if o.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "django_htmx",
    "template_partials",
    "axes",
    "knowledge",
    "memory",
    "curation",
]

MIDDLEWARE = [
    "brainsite.ops.middleware.RequestLogMiddleware",  # first: one line per request, whole duration
    "brainsite.ops.metrics.MetricsMiddleware",  # requests by route and status (GET /metrics)
    "django.middleware.security.SecurityMiddleware",
    "knowledge.web.BodySizeMiddleware",
    "knowledge.web.ConsoleErrorMiddleware",  # domain errors of console views: 404 / 403 / 400 pages
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    "knowledge.middleware.RequestIdMiddleware",
    "knowledge.middleware.ApiNulCharacterMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Console logins are throttled by django-axes (its AccessAttempt rows in PostgreSQL, so every
# web process sees the same count): BRAIN_LOGIN_FAILURE_LIMIT failed logins for one username
# from one address lock that pair out for BRAIN_LOGIN_LOCKOUT_MINUTES (429 and the lockout page);
# a success resets the count. Failures and lockouts are audited (knowledge.principals.throttle).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "brainsite.urls"
WSGI_APPLICATION = "brainsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "knowledge.principals.context_processors.console",
                "memory.lifecycle.context_processors.review_queue",
                "brainsite.navigation.navigation",
            ],
        },
    }
]

# PostgreSQL always: DATABASE_URL, or the embedded server under var/pgdata.
DATABASE_URL = env("DATABASE_URL")
EMBEDDED_DATABASE = not DATABASE_URL
# `make run` starts the embedded server once and hands its URL to the web and worker processes
# (BRAIN_EMBEDDED_DATABASE_URL), so they neither start nor manage it themselves.
DATABASES = {
    "default": parse_database_url(DATABASE_URL or env("BRAIN_EMBEDDED_DATABASE_URL") or embedded_url())
}
DATABASES["default"]["CONN_MAX_AGE"] = env_int("BRAIN_CONN_MAX_AGE", 60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# A streaming replica of that database for read-only work (recall, lists, Status, the event
# feed; knowledge/replica.py): the router sends only those reads there, and falls back to the
# primary while the replica does not answer.
DATABASE_REPLICA_URL = env("DATABASE_REPLICA_URL")
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = parse_database_url(DATABASE_REPLICA_URL)
    DATABASES["replica"]["OPTIONS"].setdefault("connect_timeout", "3")
    DATABASES["replica"].update(CONN_MAX_AGE=DATABASES["default"]["CONN_MAX_AGE"], CONN_HEALTH_CHECKS=True)
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
    DATABASE_ROUTERS = ["knowledge.replica.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
MEDIA_ROOT = VAR_DIR / "media"
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("BRAIN_MAX_BODY_BYTES", 5 * 1024 * 1024)
# Materials: an uploaded original may be this large (the body limit above does not apply to
# material uploads, which are held to this one instead). Originals are kept through Django's
# storage API: the `materials` storage is a FileSystemStorage under var/media/materials unless
# BRAIN_MATERIAL_STORAGE names another backend (e.g. storages.backends.s3.S3Storage from
# django-storages) with its options as JSON in BRAIN_MATERIAL_STORAGE_OPTIONS.
BRAIN_MATERIAL_MAX_MB = env_int("BRAIN_MATERIAL_MAX_MB", 20)
# The erasure ledger's copy outside the database (knowledge.erasure): ids and content hashes of
# everything erased, one JSON line each, appended after each erasure commits. A restore of an
# older backup replaces the database's own ledger; this file is what re-applies it.
BRAIN_ERASURE_LEDGER = Path(os.environ.get("BRAIN_ERASURE_LEDGER", VAR_DIR / "erasure-ledger.jsonl"))
# What learning one material may cost (knowledge/materials/extract.py): PDF pages, sections and
# characters read (past them the rest is left out, and the material says so), how far a DOCX may
# unpack (a zip or media bomb is refused), and the memory and CPU time of the child process
# that reads the original (0 MB: read in the worker itself, no ceiling).
BRAIN_MATERIAL_MAX_PAGES = env_int("BRAIN_MATERIAL_MAX_PAGES", 300)
BRAIN_MATERIAL_MAX_SECTIONS = env_int("BRAIN_MATERIAL_MAX_SECTIONS", 200)
BRAIN_MATERIAL_MAX_CHARS = env_int("BRAIN_MATERIAL_MAX_CHARS", 500_000)
BRAIN_MATERIAL_MAX_UNZIPPED_MB = env_int("BRAIN_MATERIAL_MAX_UNZIPPED_MB", 50)
BRAIN_MATERIAL_EXTRACT_MEMORY_MB = env_int("BRAIN_MATERIAL_EXTRACT_MEMORY_MB", 1024)
BRAIN_MATERIAL_EXTRACT_SECONDS = env_int("BRAIN_MATERIAL_EXTRACT_SECONDS", 120)
# A material left `learning` past the job timeout is queued again this many times in all, then
# failed with the reason (the stuck-learning sweep, every 5 minutes).
BRAIN_MATERIAL_MAX_ATTEMPTS = env_int("BRAIN_MATERIAL_MAX_ATTEMPTS", 3)
BRAIN_MATERIAL_STORAGE = env("BRAIN_MATERIAL_STORAGE", "django.core.files.storage.FileSystemStorage")
BRAIN_MATERIAL_STORAGE_OPTIONS = json.loads(env("BRAIN_MATERIAL_STORAGE_OPTIONS", "{}"))
if BRAIN_MATERIAL_STORAGE.endswith("FileSystemStorage"):
    BRAIN_MATERIAL_STORAGE_OPTIONS.setdefault("location", str(MEDIA_ROOT / "materials"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "materials": {"BACKEND": BRAIN_MATERIAL_STORAGE, "OPTIONS": BRAIN_MATERIAL_STORAGE_OPTIONS},
}

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# Behind TLS (a proxy that terminates HTTPS and sets X-Forwarded-Proto): Secure cookies, HSTS,
# redirect plain HTTP, and trust the proxy's scheme header. Off by default, for `make run` on
# http://127.0.0.1.
BRAIN_SECURE_COOKIES = env_bool("BRAIN_SECURE_COOKIES")
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = BRAIN_SECURE_COOKIES
if BRAIN_SECURE_COOKIES:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("BRAIN_SSL_REDIRECT", True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # the proxy's health check may speak plain HTTP
    SECURE_HSTS_SECONDS = env_int("BRAIN_HSTS_SECONDS", 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("BRAIN_HSTS_INCLUDE_SUBDOMAINS")
# How many proxies in front of Brain append to X-Forwarded-For; 0: the client is REMOTE_ADDR.
# Login throttling and the API's bad-token throttle count per client address.
BRAIN_PROXY_HOPS = env_int("BRAIN_PROXY_HOPS", 0)


# An origin and nothing more: no user, path, query or quote that could end up inside a header.
ORIGIN_RE = re.compile(
    r"(https?://(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?)/?"
)


def public_url(configured: str, *, allowed_hosts: list[str], behind_tls: bool, port: str) -> str:
    """The origin (scheme://host[:port]) Brain names itself by where a client reads an absolute
    URL (the MCP resource metadata and its WWW-Authenticate pointer): BRAIN_PUBLIC_URL, else
    derived from this file's own settings — never from a request's Host header, which the client
    writes. The fallback is the first concrete ALLOWED_HOSTS entry (not `*` or a `.suffix`
    pattern): behind TLS (BRAIN_SECURE_COOKIES) the proxy answers https on its default port, as
    docs/DEPLOY.md sets it up; otherwise `make run` serves plain http on PORT itself."""
    configured = configured.strip()
    if configured:
        origin = ORIGIN_RE.fullmatch(configured)
        if not origin:
            raise ImproperlyConfigured(
                "BRAIN_PUBLIC_URL must be an origin such as https://brain.example.com (http or "
                f"https, a host, an optional port, nothing else); got {configured!r}."
            )
        return origin[1]
    host = next((h for h in allowed_hosts if h and h != "*" and not h.startswith(".")), "localhost")
    return f"https://{host}" if behind_tls else f"http://{host}:{port}"


BRAIN_PUBLIC_URL = public_url(
    env("BRAIN_PUBLIC_URL"),
    allowed_hosts=ALLOWED_HOSTS,
    behind_tls=BRAIN_SECURE_COOKIES,
    port=env("PORT", "8000"),
)

# Content-Security-Policy (django-csp): scripts, styles and everything else from this site only —
# no inline script or style, no eval (htmx runs with allowEval off; see templates/base.html).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

AXES_FAILURE_LIMIT = env_int("BRAIN_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = env_int("BRAIN_LOGIN_LOCKOUT_MINUTES", 15) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "auth/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "knowledge.principals.throttle.client_ip"
AXES_VERBOSE = False
# The API answers 429 (with Retry-After) to bad bearer tokens past this many from one address
# in a minute.
BRAIN_API_BAD_TOKENS_PER_MINUTE = env_int("BRAIN_API_BAD_TOKENS_PER_MINUTE", 20)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["knowledge.principals.auth.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["knowledge.web.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "knowledge.schema.BrainAutoSchema",
    "EXCEPTION_HANDLER": "knowledge.web.api_exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Brain API",
    "DESCRIPTION": "Long-term memory for AI agents: write, review, recall and audit memories.",
    "VERSION": "0.1.0",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_INCLUDE_SCHEMA": False,
    "ENUM_NAME_OVERRIDES": {
        "SourceKindEnum": "knowledge.models.MemorySource.KINDS",
        "SourceStateEnum": "knowledge.models.MemorySource.STATES",
        "RecallKindEnum": "memory.recall.serializers.RESULT_KINDS",
        "PlanStateEnum": "memory.models.ConsolidationPlan.STATES",
        "MemoryEventTypeEnum": "knowledge.events.feed.EVENT_TYPES",
    },
}

Q_CLUSTER = {
    "name": "brain",
    "orm": "default",
    "workers": env_int("BRAIN_WORKERS", 2),
    # timeout < retry, so the ORM broker never hands one task to two workers at once.
    "timeout": 600,
    "retry": 900,
    "max_attempts": 3,
    "catch_up": False,
    "poll": 0.5,
    "save_limit": 500,
    "ack_failures": True,
    # A pool process that grew past this (KB; BRAIN_WORKER_MAX_RSS_MB, default 1 GB) is replaced
    # after its job, so memory a backlog or an import took comes back; the embedding model is
    # loaded again by the next embedding job (about a second).
    "max_rss": env_int("BRAIN_WORKER_MAX_RSS_MB", 1024) * 1024,
}

# Timestamp, level, logger, request id, message; one `brain.request` line per request
# (brainsite/ops/logs.py).
LOGGING = logging_config(env("BRAIN_LOG_LEVEL", "WARNING"))
# The worker queues a heartbeat job this often; /healthz says "degraded" after three missed.
BRAIN_WORKER_HEARTBEAT_SECONDS = env_int("BRAIN_WORKER_HEARTBEAT_SECONDS", 60)
# A request body must arrive within this many seconds, and may never pause longer; an upload of
# an original (multipart or not) has BRAIN_UPLOAD_TIMEOUT_SECONDS in all (408 otherwise;
# brainsite/ops/asgi_body.py).
BRAIN_BODY_TIMEOUT_SECONDS = float(env("BRAIN_BODY_TIMEOUT_SECONDS", "30"))
BRAIN_UPLOAD_TIMEOUT_SECONDS = float(env("BRAIN_UPLOAD_TIMEOUT_SECONDS", "300"))

# GET /metrics (Prometheus) answers only with this bearer token; unset, it answers 404. Every
# process of this machine writes its counters under BRAIN_METRICS_DIR (PROMETHEUS_MULTIPROC_DIR
# when set; `make run` empties it on start). docs/METRICS.md lists the names.
BRAIN_METRICS_TOKEN = env("BRAIN_METRICS_TOKEN")
# prometheus_client picks its mode when first imported (django-q2 imports it while the apps
# load), so the variable is set here, before any app.
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(VAR_DIR / "metrics")
BRAIN_METRICS_DIR = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])

# --- Brain's own settings -------------------------------------------------------------------
# Modes marked "run time" can also be changed by admins on the settings page (audited); the
# environment gives their default.
BRAIN_ADMIN_PASSWORD = env("BRAIN_ADMIN_PASSWORD")
BRAIN_SHORT_TERM_TTL_HOURS = env_int("BRAIN_SHORT_TERM_TTL", 72)
BRAIN_STRICT_ANTI_DRIFT = env_bool("BRAIN_STRICT_ANTI_DRIFT")  # run time
BRAIN_MEMORY_INVALIDATION = env("BRAIN_MEMORY_INVALIDATION", "flag")  # run time
BRAIN_PROVENANCE_CHECK_MINUTES = env_int("BRAIN_PROVENANCE_CHECK_MINUTES", 15)
BRAIN_MEMORY_ACTIVATION_GATE = env("BRAIN_MEMORY_ACTIVATION_GATE", "shadow")  # run time
# A memory the enforcing gate holds whose check could not be made (the model's answers cut or
# empty twice, no model, no budget, no answer through every deferral): `hold` keeps it in the
# review queue saying so, where a reviewer's approval puts it into force without a new check;
# `activate` lets it go into force unchecked. `hold` by default: enforce was chosen so that
# nothing goes into force unchecked, and a person, not a timer, takes that risk.
BRAIN_GATE_UNCHECKED = env("BRAIN_GATE_UNCHECKED", "hold")  # run time
BRAIN_MEMORY_CONSOLIDATION = env("BRAIN_MEMORY_CONSOLIDATION", "propose")  # run time
BRAIN_CONSOLIDATION_SUMMARY_OVER = env_int("BRAIN_CONSOLIDATION_SUMMARY_OVER", 40)
BRAIN_CONFLICT_ARBITER = env_bool("BRAIN_CONFLICT_ARBITER")
BRAIN_DISTILLER_AUTO_ACTIVATE = env_bool("BRAIN_DISTILLER_AUTO_ACTIVATE")  # run time
# The reconciler: per agent every N turns or after M idle minutes (and on demand). Its dedup merges
# vectors at cosine ≥ θ that also pass the code guards (memory.reconciler.dedup); θ, the link
# floor and K were chosen on bench/data/dedup_pairs.json (docs/PERFORMANCE.md).
BRAIN_RECONCILER_EVERY_TURNS = env_int("BRAIN_RECONCILER_EVERY_TURNS", 25)
BRAIN_RECONCILER_IDLE_MINUTES = env_int("BRAIN_RECONCILER_IDLE_MINUTES", 10)
BRAIN_RECONCILER_DEDUP_COSINE = float(env("BRAIN_RECONCILER_DEDUP_COSINE", "0.80"))
BRAIN_RECONCILER_ARBITER = env("BRAIN_RECONCILER_ARBITER", "off").strip().lower() in (
    "on",
    "1",
    "true",
    "yes",
)
BRAIN_RECONCILER_LINK_K = env_int("BRAIN_RECONCILER_LINK_K", 5)
BRAIN_RECONCILER_LINK_FLOOR = float(env("BRAIN_RECONCILER_LINK_FLOOR", "0.50"))
BRAIN_RECONCILER_DIGEST_TOKENS = env_int("BRAIN_RECONCILER_DIGEST_TOKENS", 300)
BRAIN_RECONCILER_MODEL_CALLS = env_int("BRAIN_RECONCILER_MODEL_CALLS", 10)  # per run
# Dreaming stage A: a channel is read once it has been quiet this long (with a message past its
# cursor), or as soon as this many messages wait past the cursor (both run time).
BRAIN_DREAMING_QUIET_MINUTES = env_int("BRAIN_DREAMING_QUIET_MINUTES", 30)  # run time
BRAIN_DREAMING_BATCH_MESSAGES = env_int("BRAIN_DREAMING_BATCH_MESSAGES", 200)  # run time
BRAIN_DREAMING_BATCH_TOKENS = env_int("BRAIN_DREAMING_BATCH_TOKENS", 6000)  # messages per model call
# Context history: at most this many tokens for the section, of them at most this many for the
# rolling summary of the turns before the verbatim ones.
BRAIN_HISTORY_BUDGET_TOKENS = env_int("BRAIN_HISTORY_BUDGET_TOKENS", 1500)
BRAIN_HISTORY_SUMMARY_TOKENS = env_int("BRAIN_HISTORY_SUMMARY_TOKENS", 400)
# Webhooks: first retry after this many seconds, doubling (at most 6 h), failed after N tries.
BRAIN_WEBHOOK_RETRY_SECONDS = env_int("BRAIN_WEBHOOK_RETRY_SECONDS", 60)
BRAIN_WEBHOOK_MAX_ATTEMPTS = env_int("BRAIN_WEBHOOK_MAX_ATTEMPTS", 8)
BRAIN_WEBHOOK_TIMEOUT_SECONDS = env_int("BRAIN_WEBHOOK_TIMEOUT_SECONDS", 10)
# Webhooks go to public addresses only (knowledge/events/destinations.py); these hosts (names or
# addresses, comma-separated, as written in the webhook URL) may be internal.
BRAIN_WEBHOOK_ALLOW_HOSTS = [h.strip() for h in env("BRAIN_WEBHOOK_ALLOW_HOSTS").split(",") if h.strip()]
BRAIN_DREAMING_RETRY_MINUTES = env_int("BRAIN_DREAMING_RETRY_MINUTES", 5)  # first back-off; doubles
# Stage B: Dreaming fitness counts a Dreaming block write once it is this many days old.
BRAIN_DREAMING_MATURE_DAYS = env_int("BRAIN_DREAMING_MATURE_DAYS", 7)
BRAIN_DREAMING_SWEEP_MINUTES = env_int("BRAIN_DREAMING_SWEEP_MINUTES", 5)  # stage B: agents with new episodes
BRAIN_EMBEDDINGS = env("BRAIN_EMBEDDINGS", "local")  # local | openai | none
BRAIN_EMBEDDINGS_BASE_URL = env("BRAIN_EMBEDDINGS_BASE_URL")
BRAIN_EMBEDDINGS_MODEL = env("BRAIN_EMBEDDINGS_MODEL")
BRAIN_EMBEDDINGS_API_KEY = env("BRAIN_EMBEDDINGS_API_KEY")
BRAIN_EMBEDDING_THREADS = env_int("BRAIN_EMBEDDING_THREADS", 0)  # onnxruntime threads; 0: all cores
BRAIN_EMBEDDING_LANES = env_int("BRAIN_EMBEDDING_LANES", 0)  # backlog lanes per worker; 0: one per core
BRAIN_EMBEDDING_KICK = env_bool("BRAIN_EMBEDDING_KICK", True)  # queue the backlog job after ingestion
BRAIN_RECALL_RERANKER = env("BRAIN_RECALL_RERANKER")  # dotted path: (query, candidates) -> [0..1]
BRAIN_MODEL_BASE_URL = env("BRAIN_MODEL_BASE_URL")
BRAIN_MODEL = env("BRAIN_MODEL")
BRAIN_MODEL_API_KEY = env("BRAIN_MODEL_API_KEY")
BRAIN_MODEL_TIMEOUT_SECONDS = float(env("BRAIN_MODEL_TIMEOUT_SECONDS", "30"))
BRAIN_MODEL_DAILY_CALLS = env_int("BRAIN_MODEL_DAILY_CALLS", 2000)
BRAIN_MODEL_DAILY_TOKENS = env_int("BRAIN_MODEL_DAILY_TOKENS", 2_000_000)
BRAIN_MEMO_BUDGET_TOKENS = env_int("BRAIN_MEMO_BUDGET_TOKENS", 300)
# Each skill overlay (one agent's lessons of one skill) fits in this many tokens.
BRAIN_OVERLAY_BUDGET_TOKENS = env_int("BRAIN_OVERLAY_BUDGET_TOKENS", 1000)
BRAIN_DEMO = env_bool("BRAIN_DEMO")

# --- governed model calls and consolidation
BRAIN_MODEL_LIGHT = env("BRAIN_MODEL_LIGHT")  # the `light` profile's model (blank: BRAIN_MODEL)
BRAIN_MODEL_MAX_RETRIES = env_int("BRAIN_MODEL_MAX_RETRIES", 2)
BRAIN_MODEL_RETRY_BACKOFF_SECONDS = float(env("BRAIN_MODEL_RETRY_BACKOFF_SECONDS", "1"))
# Calls Brain has in flight to one model server at a time, across every worker (0: no limit);
# the rest wait for a free slot before they are sent, so a server's queue is not spent from a
# call's own timeout (knowledge/llm/slots.py). 1 suits llama-cpp-python's one-slot server; set
# it to a vLLM server's concurrency. A call that finds no free slot within the wait is deferred.
BRAIN_MODEL_ENDPOINT_SLOTS = env_int("BRAIN_MODEL_ENDPOINT_SLOTS", 1)
BRAIN_MODEL_SLOT_WAIT_SECONDS = float(env("BRAIN_MODEL_SLOT_WAIT_SECONDS", "600"))
# A job the model server did not answer (an outage) runs again after this back-off, doubling per
# outage in a row up to 30 minutes, with the same input (knowledge/llm/outage.py).
BRAIN_MODEL_DEFER_SECONDS = env_int("BRAIN_MODEL_DEFER_SECONDS", 60)
# Ask for replies as a stream, so a call Brain gives up on (its timeout) closes the connection and
# a server like llama-cpp-python stops generating it (knowledge/llm/stream.py); a server that
# answers plain JSON anyway is read as before.
BRAIN_MODEL_STREAM = env_bool("BRAIN_MODEL_STREAM", True)
# The model's context window (prompt + reply tokens) where a profile sets none and the server's
# /v1/models gives none; every prompt is fitted to it (knowledge/llm).
BRAIN_MODEL_CONTEXT_TOKENS = env_int("BRAIN_MODEL_CONTEXT_TOKENS", 8192)
# Structured output: auto (json_schema until the server refuses it once), json_schema, json_object.
BRAIN_MODEL_STRUCTURED_OUTPUT = env("BRAIN_MODEL_STRUCTURED_OUTPUT", "auto")
# The reply budget's request field: max_tokens, or max_completion_tokens for servers that want it.
BRAIN_MODEL_TOKEN_FIELD = env("BRAIN_MODEL_TOKEN_FIELD", "max_tokens")
BRAIN_AGENT_DAILY_CALLS = env_int("BRAIN_AGENT_DAILY_CALLS", 1000)
BRAIN_AGENT_DAILY_TOKENS = env_int("BRAIN_AGENT_DAILY_TOKENS", 1_000_000)
BRAIN_CONSOLIDATION_MODEL_GROUPS = env_int("BRAIN_CONSOLIDATION_MODEL_GROUPS", 50)
