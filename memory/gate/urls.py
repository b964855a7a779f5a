from django.urls import path

from memory.gate import api, views

urlpatterns = [
    path("gate/", views.gate_page, name="gate"),
    path("gate/datasets/", views.dataset_list, name="dataset-list"),
    path("gate/datasets/<str:name>/", views.dataset_edit, name="dataset-edit"),
    path("gate/datasets/<str:name>/export.jsonl", views.dataset_export, name="dataset-export"),
    path("memories/<int:memory_id>/gate-check", views.memory_gate_check, name="memory-gate-check"),
]

api_urlpatterns = [
    path("eval-datasets", api.datasets, name="api-eval-datasets"),
    path("eval-datasets/<str:name>", api.dataset_detail, name="api-eval-dataset"),
    path("memory-gate/checks", api.gate_checks, name="api-gate-checks"),
    path("memory-gate/<int:memory_id>/check", api.gate_check, name="api-gate-check"),
]
