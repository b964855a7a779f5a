from django.urls import path

from curation.dreaming import api, views

urlpatterns = [
    path("knowledge/status/stage-a/<slug:name>/run", views.stage_a_run_page, name="stage-a-run"),
]

api_urlpatterns = [
    path("dreaming/stage-a/run", api.stage_a_run_view, name="api-stage-a-run"),
    path("dreaming/runs", api.dreaming_run_list_view, name="api-dreaming-runs"),
]
