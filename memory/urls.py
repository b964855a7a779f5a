from django.urls import path

from memory import api_consolidation, api_gate, api_provenance, views_consolidation, views_gate

urlpatterns = []

api_urlpatterns = [
    # --- provenance (issue 4) ---
    path("sources/<slug:kind>/<path:ref>", api_provenance.source_detail, name="api-source"),
    path("memory-provenance/check", api_provenance.provenance_check, name="api-provenance-check"),
    path("memory-provenance/stale", api_provenance.provenance_stale, name="api-provenance-stale"),
    path("memory-provenance/<int:memory_id>", api_provenance.provenance_detail, name="api-provenance"),
]

# --- consolidation (issue 7) ---
urlpatterns += [
    path("consolidation/", views_consolidation.plan_list_page, name="consolidation-list"),
    path("consolidation/run", views_consolidation.plan_run, name="consolidation-run"),
    path("consolidation/<int:plan_id>/", views_consolidation.plan_page, name="consolidation-detail"),
    path(
        "consolidation/<int:plan_id>/<str:action>",
        views_consolidation.plan_action,
        name="consolidation-action",
    ),
]
api_urlpatterns += [
    path("memory-consolidations/run", api_consolidation.consolidation_run_view, name="api-consolidation-run"),
    path("memory-consolidations", api_consolidation.consolidation_list_view, name="api-consolidation-list"),
    path(
        "memory-consolidations/<int:plan_id>",
        api_consolidation.consolidation_detail_view,
        name="api-consolidation-detail",
    ),
    path(
        "memory-consolidations/<int:plan_id>/apply",
        api_consolidation.consolidation_apply_view,
        name="api-consolidation-apply",
    ),
    path(
        "memory-consolidations/<int:plan_id>/revert",
        api_consolidation.consolidation_revert_view,
        name="api-consolidation-revert",
    ),
    path(
        "memory-consolidations/<int:plan_id>/discard",
        api_consolidation.consolidation_discard_view,
        name="api-consolidation-discard",
    ),
]

# --- eval gate (issue 8) ---
urlpatterns += [
    path("gate/", views_gate.gate_page, name="gate"),
    path("gate/datasets/", views_gate.dataset_list, name="dataset-list"),
    path("gate/datasets/<str:name>/", views_gate.dataset_edit, name="dataset-edit"),
    path("gate/datasets/<str:name>/export.jsonl", views_gate.dataset_export, name="dataset-export"),
]

api_urlpatterns += [
    path("eval-datasets", api_gate.datasets, name="api-eval-datasets"),
    path("eval-datasets/<str:name>", api_gate.dataset_detail, name="api-eval-dataset"),
    path("memory-gate/checks", api_gate.gate_checks, name="api-gate-checks"),
    path("memory-gate/<int:memory_id>/check", api_gate.gate_check, name="api-gate-check"),
]
