from django.urls import path

from knowledge.portability import views

urlpatterns = [
    path("agents/import", views.agent_import_file, name="agent-import"),
    path("agents/<slug:name>/export.jsonl", views.agent_export_file, name="agent-export"),
]

api_urlpatterns = []
