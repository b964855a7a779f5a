from django.urls import path

from memory import api_gate, views_gate

urlpatterns = [
    path("gate/", views_gate.gate_page, name="gate"),
    path("gate/datasets/", views_gate.dataset_list, name="dataset-list"),
    path("gate/datasets/<str:name>/", views_gate.dataset_edit, name="dataset-edit"),
    path("gate/datasets/<str:name>/export.jsonl", views_gate.dataset_export, name="dataset-export"),
]

api_urlpatterns = [
    path("eval-datasets", api_gate.datasets, name="api-eval-datasets"),
    path("eval-datasets/<str:name>", api_gate.dataset_detail, name="api-eval-dataset"),
    path("memory-gate/checks", api_gate.gate_checks, name="api-gate-checks"),
    path("memory-gate/<int:memory_id>/check", api_gate.gate_check, name="api-gate-check"),
]
