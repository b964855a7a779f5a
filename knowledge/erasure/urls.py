from django.urls import path

from knowledge.erasure import api, views

urlpatterns = [
    path("knowledge/erasures/", views.erasure_index, name="erasures"),
    path("knowledge/erasures/<slug:kind>/<path:ref>", views.erase, name="erase"),
]

api_urlpatterns = [
    path("erasures", api.erasure_create, name="api-erasures"),
]
