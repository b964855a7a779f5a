from csp.decorators import csp_update
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from brainsite.ops.metrics import metrics_view
from curation import urls as curation_urls
from knowledge import urls as knowledge_urls
from knowledge.principals.forms import LoginForm
from knowledge.principals.views import healthz
from memory import urls as memory_urls

api_patterns = [
    *knowledge_urls.api_urlpatterns,
    *memory_urls.api_urlpatterns,
    *curation_urls.api_urlpatterns,
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file, so the page needs no inline
    # script; Swagger UI sets inline styles, allowed on this page only.
    path(
        "docs/",
        csp_update({"style-src": ["'unsafe-inline'"]})(
            SpectacularSwaggerSplitView.as_view(url_name="schema")
        ),
        name="api-docs",
    ),
]

handler400 = "knowledge.web.bad_request"
handler404 = "knowledge.web.not_found"
handler500 = "brainsite.ops.errors.server_error"  # 503 while the database is away

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path(
        "login/",
        auth_views.LoginView.as_view(template_name="auth/login.html", authentication_form=LoginForm),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include(api_patterns)),
    path("", include(knowledge_urls.urlpatterns)),
    path("", include(memory_urls.urlpatterns)),
    path("", include(curation_urls.urlpatterns)),
]
