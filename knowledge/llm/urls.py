from django.urls import path

from knowledge.llm import api, views

urlpatterns = [
    path("models/", views.model_list, name="model-list"),
    path("models/profiles", views.model_profile_edit, name="model-profile-edit"),
    path("models/agents/<slug:name>", views.agent_model_edit, name="agent-model-edit"),
    path("models/jobs/<int:job_id>", views.model_job_panel, name="model-job"),
]

api_urlpatterns = [path("model-jobs/<int:job_id>", api.model_job_view, name="api-model-job")]
