from django.urls import path

from memory import api_provenance

urlpatterns = []

api_urlpatterns = [
    path("sources/<slug:kind>/<path:ref>", api_provenance.source_detail, name="api-source"),
    path("memory-provenance/check", api_provenance.provenance_check, name="api-provenance-check"),
    path("memory-provenance/stale", api_provenance.provenance_stale, name="api-provenance-stale"),
    path("memory-provenance/<int:memory_id>", api_provenance.provenance_detail, name="api-provenance"),
]
