from django.urls import path

from knowledge.erasure import api, views

urlpatterns = [
    path("knowledge/erasures/", views.erasure_index, name="erasures"),
    path("knowledge/erasures/memory/<int:memory_id>", views.erase_memory, name="erase-memory"),
    path("knowledge/erasures/person/<slug:name>", views.erase_person, name="erase-person"),
]

api_urlpatterns = [
    path("erasures", api.erasure_create, name="api-erasures"),
]
