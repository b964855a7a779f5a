from django.urls import path

from memory.consolidation import api, views

urlpatterns = [
    path("consolidation/", views.plan_list_page, name="consolidation-list"),
    path("consolidation/run", views.plan_run, name="consolidation-run"),
    path("consolidation/<int:plan_id>/", views.plan_page, name="consolidation-detail"),
    path("consolidation/<int:plan_id>/<str:action>", views.plan_action, name="consolidation-action"),
]

api_urlpatterns = [
    path("memory-consolidations/run", api.consolidation_run_view, name="api-consolidation-run"),
    path("memory-consolidations", api.consolidation_list_view, name="api-consolidation-list"),
    path(
        "memory-consolidations/<int:plan_id>", api.consolidation_detail_view, name="api-consolidation-detail"
    ),
    path(
        "memory-consolidations/<int:plan_id>/apply",
        api.consolidation_apply_view,
        name="api-consolidation-apply",
    ),
    path(
        "memory-consolidations/<int:plan_id>/revert",
        api.consolidation_revert_view,
        name="api-consolidation-revert",
    ),
    path(
        "memory-consolidations/<int:plan_id>/discard",
        api.consolidation_discard_view,
        name="api-consolidation-discard",
    ),
]
