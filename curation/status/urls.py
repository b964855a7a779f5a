from django.urls import path

from curation.status import api, views

urlpatterns = [
    path("knowledge/status/", views.status_page, name="knowledge-status"),
]

api_urlpatterns = [
    path("status", api.status_view, name="api-status"),
]
