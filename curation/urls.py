from django.urls import path  # noqa: F401

from curation.dreaming import urls as dreaming_urls
from knowledge.llm import views

urlpatterns = []

api_urlpatterns = []

# --- models page ---
urlpatterns += [
    path("models/", views.model_list, name="model-list"),
    path("models/profiles", views.model_profile_edit, name="model-profile-edit"),
    path("models/agents/<slug:name>", views.agent_model_edit, name="agent-model-edit"),
]

# --- Dreaming ---
urlpatterns += dreaming_urls.urlpatterns
api_urlpatterns += dreaming_urls.api_urlpatterns
