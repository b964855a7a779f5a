from django.urls import path

from curation.dreaming import api, views

urlpatterns = [
    path("knowledge/status/stage-a/<slug:name>/run", views.stage_a_run_page, name="stage-a-run"),
    path("knowledge/dreaming/", views.dreaming_tab, name="dreaming-tab"),
    path("knowledge/dreaming/run", views.dreaming_run_now, name="dreaming-run-now"),
    path(
        "knowledge/dreaming/runs/<int:run_id>/restore",
        views.dreaming_run_restore,
        name="dreaming-run-restore",
    ),
]

api_urlpatterns = [
    path("dreaming/stage-a/run", api.stage_a_run_view, name="api-stage-a-run"),
    path("dreaming/stage-b/run", api.stage_b_run_view, name="api-stage-b-run"),
    path("dreaming/runs", api.dreaming_run_list_view, name="api-dreaming-runs"),
]
