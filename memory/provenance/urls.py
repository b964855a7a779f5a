from django.urls import path

from memory.provenance import api, views

urlpatterns = [
    path("memories/stale/", views.stale_list, name="stale-list"),
    path("sources/<slug:kind>/<path:ref>", views.source_state, name="source-state"),
    path("memories/stale/check", views.stale_check, name="stale-check"),
    path(
        "memories/<int:memory_id>/confirm-sources",
        views.memory_confirm_sources,
        name="memory-confirm-sources",
    ),
]

api_urlpatterns = [
    path("sources/<slug:kind>/<path:ref>", api.source_detail, name="api-source"),
    path("memory-provenance/check", api.provenance_check, name="api-provenance-check"),
    path("memory-provenance/stale", api.provenance_stale, name="api-provenance-stale"),
    path("memory-provenance/<int:memory_id>", api.provenance_detail, name="api-provenance"),
]
