from django.urls import path

from knowledge.llm import views

urlpatterns = [
    path("models/", views.model_list, name="model-list"),
    path("models/profiles", views.model_profile_edit, name="model-profile-edit"),
    path("models/agents/<slug:name>", views.agent_model_edit, name="agent-model-edit"),
]

api_urlpatterns = []
